package assignment

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"reflect"
	"testing"

	"github.com/segmentio/kafka-go"
)

func TestOwnershipRoundTrip(t *testing.T) {
	for _, o := range []ownership{
		{gen: 0, topics: map[string][]int{}},
		{gen: 7, topics: map[string][]int{"in": {0, 3, 11}}},
		{gen: 1 << 30, topics: map[string][]int{"a": {}, "b": {2}, "ç": {0, 1, 2, 1 << 20}}},
	} {
		got, err := decodeOwnership(o.appendTo(nil))
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		if !reflect.DeepEqual(got, o) {
			t.Fatalf("round trip of %+v gave %+v", o, got)
		}
	}
}

// TestOwnershipSortsAndDeduplicates: a report listing partitions out of
// order or twice means the set it names.
func TestOwnershipSortsAndDeduplicates(t *testing.T) {
	b := ownership{gen: 3, topics: map[string][]int{"in": {5, 1, 5, 0}}}.appendTo(nil)
	got, err := decodeOwnership(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 1, 5}; !reflect.DeepEqual(got.topics["in"], want) {
		t.Fatalf("got %v, want %v", got.topics["in"], want)
	}
}

func TestOwnershipMalformed(t *testing.T) {
	valid := ownership{gen: 9, topics: map[string][]int{"a": {1, 2}, "b": {0}}}.appendTo(nil)
	var bad [][]byte
	for n := 1; n < len(valid); n++ { // every truncation
		bad = append(bad, valid[:n])
	}
	withVersion := append([]byte{2}, valid[1:]...)
	negGen := ownership{gen: -1, topics: map[string][]int{}}.appendTo(nil)
	negPart := ownership{gen: 1, topics: map[string][]int{"a": {-4}}}.appendTo(nil)
	// One topic named twice.
	twice := []byte{userDataVersion, 0, 0, 0, 1, 0, 0, 0, 2}
	for range 2 {
		twice = append(twice, 0, 1, 'a', 0, 0, 0, 0)
	}
	// A partition count far beyond the bytes that follow.
	huge := []byte{userDataVersion, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 'a'}
	huge = binary.BigEndian.AppendUint32(huge, 1<<31)
	bad = append(bad, append(valid[:len(valid):len(valid)], 0), withVersion, negGen, negPart, twice, huge, []byte("not a report"))
	for _, b := range bad {
		if o, err := decodeOwnership(b); !errors.Is(err, ErrMalformedUserData) {
			t.Errorf("decodeOwnership(%x) = %+v, %v; want ErrMalformedUserData", b, o, err)
		}
	}
}

// FuzzUserData: whatever a member's user data holds, the leader assigns
// every partition exactly once, balanced, and a report that decodes
// survives another encoding unchanged.
func FuzzUserData(f *testing.F) {
	f.Add(ownership{gen: 3, topics: map[string][]int{"in": {0, 2}}}.appendTo(nil))
	f.Add(ownership{gen: 1, topics: map[string][]int{"in": {}, "x": {1 << 20}}}.appendTo(nil))
	f.Add([]byte{userDataVersion, 0, 0, 0, 1, 0, 0, 0, 1, 0, 2, 'i', 'n', 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	s := &Sticky{Log: slog.New(slog.DiscardHandler)}
	fresh := ownership{gen: 2, topics: map[string][]int{"in": {1, 3}}}.appendTo(nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		if o, err := decodeOwnership(data); err == nil {
			again, err := decodeOwnership(o.appendTo(nil))
			if err != nil || !reflect.DeepEqual(again, o) {
				t.Fatalf("%x decodes to %+v, which encodes to something else: %+v, %v", data, o, again, err)
			}
		}
		got := s.AssignGroups([]kafka.GroupMember{
			{ID: "m1", Topics: []string{"in"}, UserData: data},
			{ID: "m2", Topics: []string{"in"}, UserData: fresh},
			{ID: "m3", Topics: []string{"in"}, UserData: data},
		}, parts("in", 5))
		seen := map[int]bool{}
		for id, byTopic := range got {
			if n := len(byTopic["in"]); n < 1 || n > 2 {
				t.Fatalf("%x: %s got %d partitions: %v", data, id, n, got)
			}
			for _, p := range byTopic["in"] {
				if seen[p] || p < 0 || p >= 5 {
					t.Fatalf("%x: partition %d twice or unknown: %v", data, p, got)
				}
				seen[p] = true
			}
		}
		if len(seen) != 5 {
			t.Fatalf("%x: %d of 5 partitions assigned: %v", data, len(seen), got)
		}
	})
}
