package cluster

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Truncations notices a partition, written to by the stage, whose log went
// back: an acknowledged produce got a base offset at or below one
// acknowledged before. A partition's offsets only grow, so records the
// stage wrote, and may have committed its input past, are gone: an unclean
// leader election truncated the partition, or the topic was deleted and
// created again. Nothing else in Kafka's answers says so.
//
// The comparison holds only along requests of one partition sent one after
// the other, each once the one before is acknowledged: two requests in
// flight at once may be appended in either order. Other writers to the
// partition only move its log forward, so a tracker per sequential writer
// is sound.
//
// It keeps one offset per partition and is told once per acknowledged
// produce request, not per record. Safe for concurrent use.
//
// That comparison needs the stage's next produce to the partition, and
// misses a truncation that other writers have written past by then. Watch
// also compares the partitions' end offsets, every EndsInterval, with the
// offset of the last record acknowledged (Written): a log that ends at or
// below it lost that record, whoever writes to the partition, and an idle
// partition is checked too.
type Truncations struct {
	topic, role string
	count       *prometheus.CounterVec // {topic,partition}
	log         *slog.Logger

	mu      sync.Mutex
	base    map[int32]int64 // highest acknowledged base offset per partition
	written map[int32]acked // last acknowledged record per partition
	seq     uint64          // acknowledgements so far
}

// acked is the offset of a partition's last acknowledged record and the
// acknowledgement (Truncations.seq) that told it.
type acked struct {
	offset int64
	seq    uint64
}

// EndsInterval is how often Watch reads the end offsets.
const EndsInterval = 2 * time.Second

// NewTruncations checks the partitions of topic, counted in count
// (labels topic and partition) and logged at error to log; role names the
// topic in the log line ("output", "repartition"). Without a counter it is
// nil, and a nil Truncations checks nothing.
func NewTruncations(topic, role string, count *prometheus.CounterVec, log *slog.Logger) *Truncations {
	if count == nil {
		return nil
	}
	return &Truncations{topic: topic, role: role, count: count, log: log, base: map[int32]int64{}, written: map[int32]acked{}}
}

// Acked checks the base offset of an acknowledged produce request to
// partition (-1, no offset given, is ignored).
func (t *Truncations) Acked(partition int32, base int64) {
	if t == nil || base < 0 {
		return
	}
	t.mu.Lock()
	t.seq++
	prev, seen := t.base[partition]
	t.base[partition] = base // the new log is what later appends are compared with
	truncated := seen && base <= prev
	if truncated {
		// What the end offsets are compared with, until Written tells
		// the request's last record: the new log holds base.
		t.written[partition] = acked{offset: base, seq: t.seq}
	}
	t.mu.Unlock()
	if !seen {
		// The series exists, at 0, from the partition's first
		// acknowledgement on: an alert sees it rise.
		t.count.WithLabelValues(t.topic, strconv.Itoa(int(partition)))
	}
	if !truncated {
		return
	}
	t.count.WithLabelValues(t.topic, strconv.Itoa(int(partition))).Inc()
	// The offsets from base to prev held records before, prev one of the
	// stage's: at least that many are gone.
	t.log.Error(t.role+" partition truncated: records written and acknowledged before are gone "+
		"(unclean leader election, or the topic deleted and created again)",
		"topic", t.topic, "partition", partition, "acknowledged_base_offset", prev, "new_base_offset", base,
		"offsets_lost_at_least", prev-base+1)
}

// Written records offset, that of the last record of an acknowledged
// produce request to partition, for the end-offset comparison (Ends).
func (t *Truncations) Written(partition int32, offset int64) {
	if t == nil || offset < 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	t.written[partition] = acked{offset: offset, seq: t.seq}
}

// Watch reads the end offsets of the partitions acknowledged so far with
// ends every EndsInterval until ctx ends, and compares them (Ends). A nil
// Truncations returns at once.
func (t *Truncations) Watch(ctx context.Context, ends func(ctx context.Context, parts []int) (map[int]int64, error)) {
	if t == nil {
		return
	}
	for {
		Sleep(ctx, Jitter(EndsInterval))
		if ctx.Err() != nil {
			return
		}
		parts, mark := t.Watched()
		if len(parts) == 0 {
			continue
		}
		e, err := ends(ctx, parts)
		if err != nil {
			// Brokers lost or the topic missing: the cluster watch says
			// so; the next round reads again.
			t.log.Debug("read "+t.role+" end offsets", "topic", t.topic, "err", err)
			continue
		}
		t.Ends(mark, e)
	}
}

// Watched returns the partitions written so far, and the mark to hand
// Ends with the end offsets read after it.
func (t *Truncations) Watched() (parts []int, mark uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for p := range t.written {
		parts = append(parts, int(p))
	}
	return parts, t.seq
}

// Ends compares end offsets, read after Watched returned mark, with the
// last records acknowledged by then: a partition ending at or below one
// lost it. A record acknowledged after mark may lie past ends read before
// it was appended, and is left to the next round. A truncation found lowers
// what the partition is compared with below its end, so that it is counted
// once, and the next produce is compared with the new log.
func (t *Truncations) Ends(mark uint64, ends map[int]int64) {
	if t == nil {
		return
	}
	type lost struct {
		partition int32
		last, end int64
	}
	var found []lost
	t.mu.Lock()
	for p, end := range ends {
		w, ok := t.written[int32(p)]
		if !ok || w.seq > mark || end > w.offset {
			continue
		}
		found = append(found, lost{int32(p), w.offset, end})
		t.written[int32(p)] = acked{offset: end - 1, seq: w.seq}
		if b, ok := t.base[int32(p)]; ok {
			t.base[int32(p)] = min(b, end-1)
		}
	}
	t.mu.Unlock()
	for _, l := range found {
		t.count.WithLabelValues(t.topic, strconv.Itoa(int(l.partition))).Inc()
		t.log.Error(t.role+" partition truncated: its log ends at or below a record written and acknowledged before "+
			"(unclean leader election, or the topic deleted and created again)",
			"topic", t.topic, "partition", l.partition, "acknowledged_offset", l.last, "end_offset", l.end,
			"offsets_lost_at_least", l.last-l.end+1)
	}
}

// Topic is the topic whose partitions are checked.
func (t *Truncations) Topic() string { return t.topic }

// Forget drops the topic's series: a stopped stage reports no partition.
func (t *Truncations) Forget() {
	if t != nil {
		t.count.DeletePartialMatch(prometheus.Labels{"topic": t.topic})
	}
}
