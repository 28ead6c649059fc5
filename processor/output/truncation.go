package output

import (
	"log/slog"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
)

// truncations notices an output partition whose log went back: an
// acknowledged produce got a base offset at or below one acknowledged
// before. A partition's offsets only grow, so records this process wrote,
// and may have committed its input past, are gone: an unclean leader
// election truncated the partition, or the topic was deleted and created
// again. Nothing else in Kafka's answers says so.
//
// It keeps one offset per output partition and is asked once per
// acknowledged produce request, not per record.
type truncations struct {
	topic string
	count *prometheus.CounterVec // dedup_output_truncations_total{topic,partition}
	log   *slog.Logger

	mu   sync.Mutex
	base map[int32]int64 // highest acknowledged base offset per partition
}

func newTruncations(topic string, count *prometheus.CounterVec, log *slog.Logger) *truncations {
	if count == nil {
		return nil
	}
	return &truncations{topic: topic, count: count, log: log, base: map[int32]int64{}}
}

// acked checks the base offsets of a successful produce response.
func (t *truncations) acked(r *produceAPI.Response) {
	for _, rt := range r.Topics {
		if rt.Topic != t.topic {
			continue
		}
		for _, p := range rt.Partitions {
			if p.BaseOffset >= 0 { // -1: no offset given
				t.check(p.Partition, p.BaseOffset)
			}
		}
	}
}

func (t *truncations) check(partition int32, base int64) {
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
	// The offsets from base to prev held records before, prev one of this
	// process's: at least that many are gone.
	t.log.Error("output partition truncated: records written and acknowledged before are gone "+
		"(unclean leader election, or the topic deleted and created again)",
		"topic", t.topic, "partition", partition, "acknowledged_base_offset", prev, "new_base_offset", base,
		"offsets_lost_at_least", prev-base+1)
}

// forget drops the output's series: a stopped stage reports no partition.
func (t *truncations) forget() {
	if t != nil {
		t.count.DeletePartialMatch(prometheus.Labels{"topic": t.topic})
	}
}
