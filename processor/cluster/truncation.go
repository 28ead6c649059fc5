package cluster

import (
	"log/slog"
	"strconv"
	"sync"

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
type Truncations struct {
	topic, role string
	count       *prometheus.CounterVec // {topic,partition}
	log         *slog.Logger

	mu   sync.Mutex
	base map[int32]int64 // highest acknowledged base offset per partition
}

// NewTruncations checks the partitions of topic, counted in count
// (labels topic and partition) and logged at error to log; role names the
// topic in the log line ("output", "repartition"). Without a counter it is
// nil, and a nil Truncations checks nothing.
func NewTruncations(topic, role string, count *prometheus.CounterVec, log *slog.Logger) *Truncations {
	if count == nil {
		return nil
	}
	return &Truncations{topic: topic, role: role, count: count, log: log, base: map[int32]int64{}}
}

// Acked checks the base offset of an acknowledged produce request to
// partition (-1, no offset given, is ignored).
func (t *Truncations) Acked(partition int32, base int64) {
	if t == nil || base < 0 {
		return
	}
	t.mu.Lock()
	prev, seen := t.base[partition]
	t.base[partition] = base // the new log is what later appends are compared with
	t.mu.Unlock()
	if !seen {
		// The series exists, at 0, from the partition's first
		// acknowledgement on: an alert sees it rise.
		t.count.WithLabelValues(t.topic, strconv.Itoa(int(partition)))
	}
	if !seen || base > prev {
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

// Topic is the topic whose partitions are checked.
func (t *Truncations) Topic() string { return t.topic }

// Forget drops the topic's series: a stopped stage reports no partition.
func (t *Truncations) Forget() {
	if t != nil {
		t.count.DeletePartialMatch(prometheus.Labels{"topic": t.topic})
	}
}
