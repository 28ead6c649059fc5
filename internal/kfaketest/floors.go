package kfaketest

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Floors is the lowest version of each request key that a broker of vs's
// release accepts, for the keys whose lowest is above 0: the versions the
// release removed (Kafka 4.0's KIP-896). kversion keeps these minimums
// unexported, so they are read by reflection; a kversion laid out
// otherwise panics here rather than yield no floors.
func Floors(vs *kversion.Versions) map[int16]int16 {
	reqs := reflect.ValueOf(vs).Elem().FieldByName("reqs")
	if reqs.Kind() != reflect.Map {
		panic(fmt.Sprintf("kfaketest: kversion.Versions has no reqs map (%s)", reqs.Kind()))
	}
	floors := map[int16]int16{}
	for it := reqs.MapRange(); it.Next(); {
		vmin := it.Value().FieldByName("vmin")
		if vmin.Kind() != reflect.Int16 {
			panic(fmt.Sprintf("kfaketest: kversion's request has no int16 vmin (%s)", vmin.Kind()))
		}
		if v := int16(vmin.Int()); v > 0 {
			floors[int16(it.Key().Int())] = v
		}
	}
	return floors
}

// KeyVersion is a request key at one version.
type KeyVersion struct{ Key, Version int16 }

func (kv KeyVersion) String() string {
	return fmt.Sprintf("%s v%d", kmsg.NameForKey(kv.Key), kv.Version)
}

// Versions counts the requests a cluster handles by key and version, and
// refuses each one below its key's floor.
type Versions struct {
	mu      sync.Mutex
	floors  map[int16]int16
	seen    map[KeyVersion]int64
	refused map[KeyVersion]int64
}

// EnforceFloors makes c refuse every request whose version is below its
// key's floor as a Kafka 4.0 broker refuses a removed version: it closes
// the connection without answering (the broker rejects the request
// header before any handler runs). Every request is counted; nil floors
// only counts. kfake keeps advertising its own minimums in ApiVersions:
// kafka-go picks versions by the broker's maximum alone, so those change
// nothing the stage sends.
func EnforceFloors(c *kfake.Cluster, floors map[int16]int16) *Versions {
	v := &Versions{floors: maps.Clone(floors), seen: map[KeyVersion]int64{}, refused: map[KeyVersion]int64{}}
	c.Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		kv := KeyVersion{req.Key(), req.GetVersion()}
		v.mu.Lock()
		defer v.mu.Unlock()
		if floor, ok := v.floors[kv.Key]; ok && kv.Version < floor {
			v.refused[kv]++
			return nil, fmt.Errorf("%s is below the floor v%d", kv, floor), true
		}
		v.seen[kv]++
		return nil, nil, false
	})
	return v
}

// Refused is how many requests were refused, by key and version.
func (v *Versions) Refused() map[KeyVersion]int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return maps.Clone(v.refused)
}

// Seen is how many requests were let through, by key and version.
func (v *Versions) Seen() map[KeyVersion]int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return maps.Clone(v.seen)
}

// Summary lists each key let through with its lowest and highest version
// and its floor, one "Name vLow-vHigh (floor vF)" per key in key order.
func (v *Versions) Summary() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	low, high := map[int16]int16{}, map[int16]int16{}
	for kv := range v.seen {
		if l, ok := low[kv.Key]; !ok || kv.Version < l {
			low[kv.Key] = kv.Version
		}
		high[kv.Key] = max(high[kv.Key], kv.Version)
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(low)) {
		s := fmt.Sprintf("%s v%d-v%d", kmsg.NameForKey(k), low[k], high[k])
		if f, ok := v.floors[k]; ok {
			s += fmt.Sprintf(" (floor v%d)", f)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}
