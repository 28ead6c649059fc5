package e2e_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// tally is what the nemesis checker finds: the input and output topics as
// the broker holds them, and how far the output is from exactly once.
type tally struct {
	inputs, firsts, outputs int
	lost                    int // first occurrences absent from the output
	duplicated              int // output records beyond one per first occurrence
	sameInput               int // of which: copies of an input already forwarded
	laterDups               int // of which: inputs that were not first occurrences
	stray                   int // of which: source headers that name no input record with that key
	examples                []string
}

func (ty tally) ok() bool { return ty.lost == 0 && ty.duplicated == 0 }

func (ty tally) String() string {
	return fmt.Sprintf("inputs=%d firsts=%d outputs=%d lost=%d duplicated=%d (same-input copies=%d, later duplicates forwarded=%d, stray=%d)",
		ty.inputs, ty.firsts, ty.outputs, ty.lost, ty.duplicated, ty.sameInput, ty.laterDups, ty.stray)
}

// source names an input record: partition and offset.
type source struct {
	partition int32
	offset    int64
}

// checkExactlyOnce reads the input and output topics back from the broker
// and counts, by the dedup-source headers of each output record, the first
// occurrences missing from the output and the output records that should not
// be there. The first occurrence of a key is its earliest record: every
// record of one key is in one partition, and the workload repeats a key only
// within seconds, far inside DEDUP_WINDOW, so the stage's semantics make
// exactly that record the one to forward.
func checkExactlyOnce(brokers string) (tally, error) {
	var ty tally
	in, err := readTopic(brokers, inputTopic)
	if err != nil {
		return ty, err
	}
	out, err := readTopic(brokers, outputTopic)
	if err != nil {
		return ty, err
	}
	ty.inputs, ty.outputs = len(in), len(out)

	keyAt := make(map[source]string, len(in))
	first := map[string]source{}
	for _, r := range in {
		s := source{r.Partition, r.Offset}
		k := string(r.Key)
		keyAt[s] = k
		if f, ok := first[k]; !ok || s.offset < f.offset {
			first[k] = s
		}
	}
	isFirst := make(map[source]bool, len(first))
	for _, s := range first {
		isFirst[s] = true
	}
	ty.firsts = len(first)

	copies := make(map[source]int, len(out))
	for _, r := range out {
		s, ok := sourceOf(r)
		k, known := keyAt[s]
		switch {
		case !ok || !known || k != string(r.Key):
			ty.stray++
			ty.examples = append(ty.examples, fmt.Sprintf("stray %s", describe(r)))
		case !isFirst[s]:
			ty.laterDups++
			ty.examples = append(ty.examples, fmt.Sprintf("later duplicate forwarded %s (first occurrence at %d@%d)",
				describe(r), first[k].partition, first[k].offset))
		default:
			copies[s]++
			if copies[s] == 2 {
				ty.examples = append(ty.examples, fmt.Sprintf("same input forwarded again %s", describe(r)))
			}
			if copies[s] > 1 {
				ty.sameInput++
			}
		}
	}
	for k, s := range first {
		if copies[s] == 0 {
			ty.lost++
			ty.examples = append(ty.examples, fmt.Sprintf("lost key=%s input %d@%d", k, s.partition, s.offset))
		}
	}
	ty.duplicated = ty.sameInput + ty.laterDups + ty.stray
	sort.Strings(ty.examples)
	return ty, nil
}

func sourceOf(r *kgo.Record) (source, bool) {
	var topic, part, off string
	for _, h := range r.Headers {
		switch h.Key {
		case hdrSourceTopic:
			topic = string(h.Value)
		case hdrSourcePartition:
			part = string(h.Value)
		case hdrSourceOffset:
			off = string(h.Value)
		}
	}
	p, err1 := strconv.ParseInt(part, 10, 32)
	o, err2 := strconv.ParseInt(off, 10, 64)
	if topic != inputTopic || err1 != nil || err2 != nil {
		return source{}, false
	}
	return source{int32(p), o}, true
}

func describe(r *kgo.Record) string {
	hs := make([]string, 0, len(r.Headers))
	for _, h := range r.Headers {
		if strings.HasPrefix(h.Key, "dedup-source-") {
			hs = append(hs, h.Key+"="+string(h.Value))
		}
	}
	return fmt.Sprintf("out %d@%d key=%s [%s]", r.Partition, r.Offset, r.Key, strings.Join(hs, " "))
}

// readTopic reads every partition of topic from the start to the end
// offsets it has when the read begins.
func readTopic(brokers, topic string) ([]*kgo.Record, error) {
	ends, err := endOffsets(brokers, topic)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", topic, err)
	}
	parts := map[int32]kgo.Offset{}
	for p := int32(0); p < numPartitions; p++ {
		parts[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchMaxBytes(testFetchMaxBytes),
		kgo.DisableFetchSessions(),
	)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", topic, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	next := map[int32]int64{}
	reached := func() bool {
		for p, end := range ends {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	var recs []*kgo.Record
	for !reached() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("read %s: at %v of end offsets %v: %w", topic, next, ends, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < ends[r.Partition] {
				recs = append(recs, r)
			}
			next[r.Partition] = r.Offset + 1
		})
	}
	return recs, nil
}
