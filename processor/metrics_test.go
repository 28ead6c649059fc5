package processor

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"dedup/rotation"
	"dedup/sizing"
)

// specFamilies are the families of the shared spec: those listed first
// exist from New, the per-partition ones from the first assignment.
var (
	eagerFamilies = []string{
		"dedup_filter_false_positive_target", "dedup_filter_expected_keys", "dedup_filter_window_seconds",
		"dedup_assigned_partitions", "dedup_memory_predicted_bytes", "dedup_produce_errors_total", "dedup_end_to_end_latency_seconds",
		"dedup_checkpoint_duration_seconds", "dedup_checkpoint_pause_seconds", "dedup_restores_total",
	}
	partitionFamilies = []string{
		"dedup_messages_total", "dedup_replay_suppressed_total", "dedup_timestamp_anomalies_total", "dedup_timestamp_rewritten_total",
		"dedup_filter_fill_ratio", "dedup_filter_estimated_keys", "dedup_filter_false_positive_rate",
		"dedup_filter_saturated_counters", "dedup_filter_window_elapsed_ratio", "dedup_filter_bytes",
		"dedup_rotations_total", "dedup_filter_overflow_total", "dedup_filter_early_rotations_total",
		"dedup_filter_forgotten_keys_total", "dedup_filter_stashed", "dedup_consumer_lag", "dedup_checkpoint_size_bytes",
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
	if v := metricValue(r.p.metrics.ProduceErrors.WithLabelValues(outTopic)); v != 0 {
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

// seriesPartitions returns, per per-partition family of reg, the input
// partitions it has series of.
func seriesPartitions(t *testing.T, reg *prometheus.Registry) map[string][]string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "partition" && !slices.Contains(got[mf.GetName()], l.GetValue()) {
					got[mf.GetName()] = append(got[mf.GetName()], l.GetValue())
				}
			}
		}
	}
	for _, ps := range got {
		slices.Sort(ps)
	}
	return got
}

// TestMetricsFollowPartitions: when a partition moves to another member,
// the first member deletes its series (a dashboard summing the group's
// members then counts each partition once); the partition it keeps keeps
// its counters; at shutdown it deletes them all.
func TestMetricsFollowPartitions(t *testing.T) {
	const parts = 2
	e := newTestEnv(t, parts, parts)
	o := e.options("follow")
	regA := newRegistry()
	o.Metrics = NewMetrics(regA)
	a := start(t, o)
	out := e.collect()
	eventually(t, 20*time.Second, "a holds both partitions", func() bool { return a.p.Ready() && assignedTo(a) == parts })
	e.produce(rec(0, "x", "x0", t0), rec(1, "y", "y1", t0))
	e.produce(sentinels(parts, t0)...)
	out.untilSentinels(parts)
	forwarded := func(r *running, part string) float64 {
		return metricValue(r.p.metrics.Messages.WithLabelValues(inTopic, part, OutcomeForwarded))
	}
	eventually(t, 10*time.Second, "a's counters published", func() bool {
		return forwarded(a, "0") == 2 && forwarded(a, "1") == 2
	})
	for _, name := range partitionFamilies {
		if got := seriesPartitions(t, regA)[name]; !slices.Equal(got, []string{"0", "1"}) {
			t.Errorf("before the move: %s has series of partitions %v, want [0 1]", name, got)
		}
	}

	b := startFresh(t, o)
	eventually(t, 20*time.Second, "one partition each", func() bool {
		return a.p.Ready() && b.p.Ready() && assignedTo(a) == 1 && assignedTo(b) == 1
	})
	kept := seriesPartitions(t, regA)["dedup_messages_total"]
	if len(kept) != 1 {
		t.Fatalf("after the move a has dedup_messages_total of partitions %v, want one", kept)
	}
	for _, name := range partitionFamilies {
		if got := seriesPartitions(t, regA)[name]; !slices.Equal(got, kept) {
			t.Errorf("after the move: %s has series of partitions %v, want %v", name, got, kept)
		}
	}
	// The partition a kept is read without going through the registry's
	// series map: its counter was not reset by the new generation.
	if v := forwarded(a, kept[0]); v != 2 {
		t.Errorf("kept partition %s: forwarded = %v, want 2 (kept across the generation)", kept[0], v)
	}
	if err := b.stop(t); err != nil {
		t.Errorf("Run b: %v", err)
	}
	if err := a.stop(t); err != nil {
		t.Errorf("Run a: %v", err)
	}
	if got := seriesPartitions(t, regA); len(got) != 0 {
		t.Errorf("after shutdown a still has per-partition series: %v", got)
	}
}

// TestMemoryPredictedFollowsAssignment: dedup_memory_predicted_bytes follows
// the member's assigned partitions: one pair, the partition overhead and
// the fetch buffer those partitions share (sizing.FetchBuffer) as
// partitions arrive and leave, the spare pair, a batch per output partition
// and the runtime base always.
func TestMemoryPredictedFollowsAssignment(t *testing.T) {
	const parts, outParts = 2, 3
	e := newTestEnv(t, parts, outParts)
	o := e.storedOptions(t, "predicted")
	a := startFresh(t, o)
	predicted := func(r *running) int64 { return int64(metricValue(r.p.metrics.MemPredicted)) }
	pair, err := rotation.New(o.Filter)
	if err != nil {
		t.Fatal(err)
	}
	fixed := int64(pair.SizeBytes()) + outParts*a.p.o.BatchBytes + sizing.RuntimeBase
	holding := func(n int) int64 {
		return fixed + int64(n)*(int64(pair.SizeBytes())+sizing.PartitionOverhead) + sizing.FetchBuffer(a.p.o.FetchBufferBytes, n)
	}

	eventually(t, 20*time.Second, "a holds both partitions", func() bool { return a.p.Ready() && assignedTo(a) == parts })
	if got, want := predicted(a), holding(parts); got != want {
		t.Errorf("a with %d partitions predicts %d bytes, want %d", parts, got, want)
	}
	o.Metrics = NewMetrics(newRegistry())
	o.Store = fileStore(t, "predicted")
	b := start(t, o)
	eventually(t, 20*time.Second, "one partition each", func() bool {
		return a.p.Ready() && b.p.Ready() && assignedTo(a) == 1 && assignedTo(b) == 1
	})
	for name, r := range map[string]*running{"a": a, "b": b} {
		if got, want := predicted(r), holding(1); got != want {
			t.Errorf("%s with 1 partition predicts %d bytes, want %d", name, got, want)
		}
	}
	if err := b.stop(t); err != nil {
		t.Errorf("Run b: %v", err)
	}
	eventually(t, 20*time.Second, "a holds both partitions again", func() bool { return a.p.Ready() && assignedTo(a) == parts })
	if got, want := predicted(a), holding(parts); got != want {
		t.Errorf("a with %d partitions again predicts %d bytes, want %d", parts, got, want)
	}
	if err := a.stop(t); err != nil {
		t.Errorf("Run a: %v", err)
	}
}
