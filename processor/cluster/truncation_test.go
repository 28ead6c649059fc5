package cluster

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

const outTopic = "out"

// TestTruncations: base offsets that only grow are no truncation, on any
// partition and in any interleaving of partitions; a base at or below one
// acknowledged before on the same partition is, once, counted on that
// partition and logged with the offsets; later appends are compared with
// the new log. Responses without offsets are ignored; another topic's
// tracker is its own; Forget drops only its topic's series.
func TestTruncations(t *testing.T) {
	count := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "truncations"}, []string{"topic", "partition"})
	var log bytes.Buffer
	trackers := map[string]*Truncations{}
	for _, topic := range []string{outTopic, "other"} {
		trackers[topic] = NewTruncations(topic, "output", count, slog.New(slog.NewTextHandler(&log, nil)))
	}
	ack := func(topic string, partition int32, base int64) { trackers[topic].Acked(partition, base) }
	got := func(partition string) float64 {
		var m dto.Metric
		if err := count.WithLabelValues(outTopic, partition).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}

	for _, step := range []struct {
		topic     string
		partition int32
		base      int64
		want0     float64 // truncations of partition 0 after the step
		want1     float64
	}{
		{outTopic, 0, 0, 0, 0},
		{outTopic, 1, 0, 0, 0},
		{outTopic, 0, 5, 0, 0},
		{outTopic, 1, 3, 0, 0},
		{outTopic, 0, 6, 0, 0},
		{"other", 0, 1, 0, 0},     // another topic's log is not the output's
		{"other", 0, 0, 0, 0},     // nor its truncation
		{outTopic, 0, -1, 0, 0},   // no offset given
		{outTopic, 0, 4, 1, 0},    // offsets 4..6 held records before
		{outTopic, 0, 9, 1, 0},    // the truncated log grows again
		{outTopic, 1, 3, 1, 1},    // the same base again: offset 3 was taken
		{outTopic, 1, 0, 1, 2},    // the topic created anew
		{outTopic, 1, 1000, 1, 2}, // and written on
	} {
		ack(step.topic, step.partition, step.base)
		if got("0") != step.want0 || got("1") != step.want1 {
			t.Fatalf("after base %d on %s/%d: truncations %v and %v, want %v and %v",
				step.base, step.topic, step.partition, got("0"), got("1"), step.want0, step.want1)
		}
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d log lines, want 4:\n%s", len(lines), log.String())
	}
	for _, want := range []string{"level=ERROR", "topic=other", "partition=0", "acknowledged_base_offset=1", "new_base_offset=0"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("first line %q lacks %q", lines[0], want)
		}
	}
	for _, want := range []string{"level=ERROR", "output partition truncated", "topic=out", "partition=0", "acknowledged_base_offset=6", "new_base_offset=4", "offsets_lost_at_least=3"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("second line %q lacks %q", lines[1], want)
		}
	}
	var other dto.Metric
	if err := count.WithLabelValues("other", "0").Write(&other); err != nil || other.GetCounter().GetValue() != 1 {
		t.Errorf("other/0: %v truncations (%v), want 1", other.GetCounter().GetValue(), err)
	}
	trackers[outTopic].Forget()
	series := make(chan prometheus.Metric, 10)
	count.Collect(series)
	if n := len(series); n != 1 {
		t.Errorf("after Forget: %d series, want only other's", n)
	}
	var off *Truncations = NewTruncations(outTopic, "output", nil, nil)
	if off != nil {
		t.Error("without a counter the check must be off (nil)")
	}
	off.Acked(0, 0) // a nil tracker checks nothing
}

// TestTruncationsEnds: end offsets at or below the last record written
// (acknowledged) before the mark are a truncation, counted and logged once;
// ends past it are none; a record acknowledged after the mark is left to
// the next round (it may have been appended after the ends were read);
// once counted, the partition is compared with the new log, by the next
// ends and the next acknowledged produce alike, also when a produce found
// the truncation first.
func TestTruncationsEnds(t *testing.T) {
	count := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "truncations"}, []string{"topic", "partition"})
	var log bytes.Buffer
	tr := NewTruncations(outTopic, "output", count, slog.New(slog.NewTextHandler(&log, nil)))
	got := func(partition string) float64 {
		var m dto.Metric
		if err := count.WithLabelValues(outTopic, partition).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	check := func(step string, want0, want1 float64) {
		t.Helper()
		if got("0") != want0 || got("1") != want1 {
			t.Fatalf("%s: truncations %v and %v, want %v and %v", step, got("0"), got("1"), want0, want1)
		}
	}
	produce := func(partition int32, base, n int64) {
		tr.Acked(partition, base)
		tr.Written(partition, base+n-1)
	}

	produce(0, 0, 11) // offsets 0..10
	produce(1, 0, 6)  // 0..5
	parts, mark := tr.Watched()
	if slices.Sort(parts); !slices.Equal(parts, []int{0, 1}) {
		t.Fatalf("watched partitions %v, want [0 1]", parts)
	}
	tr.Ends(mark, map[int]int64{0: 11, 1: 6})
	check("ends past every record", 0, 0)
	tr.Ends(mark, map[int]int64{0: 11, 1: 5})
	check("partition 1 ends at its last record", 0, 1)
	tr.Ends(mark, map[int]int64{0: 11, 1: 5})
	check("the same ends again", 0, 1)
	produce(1, 5, 1)
	check("the new log written on", 0, 1)

	_, mark = tr.Watched()
	produce(0, 11, 10) // after the mark: ends read before may not hold it yet
	tr.Ends(mark, map[int]int64{0: 15})
	check("records acknowledged after the mark", 0, 1)
	_, mark = tr.Watched()
	tr.Ends(mark, map[int]int64{0: 21})
	check("ends past them in the next round", 0, 1)
	tr.Ends(mark, map[int]int64{0: 3})
	check("partition 0 ends below its last record", 1, 1)
	produce(0, 7, 1) // others wrote 3..6 meanwhile
	check("the next produce to the new log", 1, 1)

	// A produce finds a truncation first; ends read before its records
	// were told are not counted again.
	_, mark = tr.Watched()
	tr.Acked(0, 2)
	tr.Ends(mark, map[int]int64{0: 2})
	check("a produce found it first", 2, 1)
	_, mark = tr.Watched()
	tr.Ends(mark, map[int]int64{0: 3})
	check("ends past the produce's base", 2, 1)

	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d log lines, want 3:\n%s", len(lines), log.String())
	}
	for i, want := range [][]string{
		{"level=ERROR", "output partition truncated", "partition=1", "acknowledged_offset=5", "end_offset=5", "offsets_lost_at_least=1"},
		{"level=ERROR", "partition=0", "acknowledged_offset=20", "end_offset=3", "offsets_lost_at_least=18"},
		{"level=ERROR", "partition=0", "acknowledged_base_offset=7", "new_base_offset=2"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i, lines[i], w)
			}
		}
	}

	var none *Truncations
	none.Written(0, 1)
	none.Ends(0, map[int]int64{0: 0})
	none.Watch(context.Background(), func(context.Context, []int) (map[int]int64, error) {
		t.Fatal("a nil Truncations read end offsets")
		return nil, nil
	})
}
