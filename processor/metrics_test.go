package processor

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// specFamilies are the families of the shared spec: those listed first
// exist from New, the per-partition ones from the first assignment.
var (
	eagerFamilies = []string{
		"dedup_filter_false_positive_target", "dedup_filter_expected_keys", "dedup_filter_window_seconds",
		"dedup_assigned_partitions", "dedup_produce_errors_total", "dedup_end_to_end_latency_seconds",
		"dedup_checkpoint_duration_seconds", "dedup_checkpoint_pause_seconds", "dedup_restores_total",
	}
	partitionFamilies = []string{
		"dedup_messages_total", "dedup_replay_suppressed_total",
		"dedup_filter_fill_ratio", "dedup_filter_estimated_keys", "dedup_filter_false_positive_rate",
		"dedup_filter_saturated_counters", "dedup_filter_window_elapsed_ratio", "dedup_filter_bytes",
		"dedup_rotations_total", "dedup_consumer_lag", "dedup_checkpoint_size_bytes",
		"dedup_checkpoint_last_success_timestamp_seconds", "dedup_checkpoints_total", "dedup_checkpoint_failures_total",
	}
)

func families(t *testing.T, reg *prometheus.Registry) map[string]int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, mf := range mfs {
		got[mf.GetName()] = len(mf.GetMetric())
	}
	return got
}

// TestMetricsEager: every family of the spec is exposed before the first
// record, so that dashboards and alerts name series that exist: the
// unlabelled, {topic} (output), {source} and {store} ones from New, the
// per-partition ones from assignment.
func TestMetricsEager(t *testing.T) {
	e := newTestEnv(t, 2, 2)
	reg := newRegistry()
	o := e.options("eager")
	o.Metrics = NewMetrics(reg)
	o.Store = fileStore(t, "eager")
	r := start(t, o)
	got := families(t, reg)
	for _, name := range eagerFamilies {
		if got[name] == 0 {
			t.Errorf("%s not exposed after New", name)
		}
	}
	if v := metricValue(r.p.metrics.produceErrors.WithLabelValues(outTopic)); v != 0 {
		t.Errorf("dedup_produce_errors_total{topic=%q} = %v before any produce", outTopic, v)
	}
	r.waitReady(t)
	got = families(t, reg)
	for _, name := range partitionFamilies {
		if got[name] == 0 {
			t.Errorf("%s not exposed after assignment", name)
		}
	}
}
