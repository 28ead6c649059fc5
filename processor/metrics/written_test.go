package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// written reads reg's series of family whose labels include want, summed.
func written(t *testing.T, reg *prometheus.Registry, family string, want map[string]string) (sum float64, series int) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			sum += m.GetCounter().GetValue()
			series++
		}
	}
	return sum, series
}

// TestInstanceWrittenOutlivesMoves: the bytes a partition's checkpoints
// write count in its own series and in the instance's total; when the
// partition moves away (Forget) its series goes, the total keeps its
// bytes, and counts on when the partition comes back.
func TestInstanceWrittenOutlivesMoves(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	const base, increment = 0, 1
	if _, n := written(t, reg, "dedup_checkpoint_instance_written_bytes_total", nil); n != 2 {
		t.Fatalf("instance total has %d series before any checkpoint, want 2 (base, increment)", n)
	}

	pm := m.Partition("events", 3, "kafka")
	pm.CheckpointWritten[base].Add(1000)
	pm.CheckpointWritten[increment].Add(30)
	m.Partition("events", 4, "kafka").CheckpointWritten[increment].Add(7)
	if got, _ := written(t, reg, "dedup_checkpoint_written_bytes_total", map[string]string{"partition": "3", "piece": "base"}); got != 1000 {
		t.Errorf("partition 3's base bytes = %v, want 1000", got)
	}
	if got, _ := written(t, reg, "dedup_checkpoint_instance_written_bytes_total", map[string]string{"piece": "increment"}); got != 37 {
		t.Errorf("instance's increment bytes = %v, want 37", got)
	}

	// Partition 3 writes its last base and moves away.
	pm.CheckpointWritten[base].Add(500)
	m.Forget("events", 3)
	if _, n := written(t, reg, "dedup_checkpoint_written_bytes_total", map[string]string{"partition": "3"}); n != 0 {
		t.Errorf("partition 3 has %d written-bytes series after Forget, want none", n)
	}
	if got, _ := written(t, reg, "dedup_checkpoint_instance_written_bytes_total", map[string]string{"piece": "base"}); got != 1500 {
		t.Errorf("instance's base bytes after partition 3 moved = %v, want 1500", got)
	}

	// It comes back: its series starts again, the total goes on.
	m.Partition("events", 3, "kafka").CheckpointWritten[base].Add(200)
	if got, _ := written(t, reg, "dedup_checkpoint_written_bytes_total", map[string]string{"partition": "3", "piece": "base"}); got != 200 {
		t.Errorf("partition 3's base bytes after it came back = %v, want 200", got)
	}
	if got, _ := written(t, reg, "dedup_checkpoint_instance_written_bytes_total", map[string]string{"piece": "base"}); got != 1700 {
		t.Errorf("instance's base bytes = %v, want 1700", got)
	}
}
