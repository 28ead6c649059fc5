package processor

import (
	"strings"
	"testing"
	"time"
)

// TestGroupBalancerOption: the balancer is named in any case; an unknown
// name is a validation error naming it.
func TestGroupBalancerOption(t *testing.T) {
	e := newTestEnv(t, 1, 1)
	for _, name := range []string{"", "sticky", "RANGE", "RoundRobin"} {
		o := e.options("balancer")
		o.GroupBalancer = name
		if _, err := New(o); err != nil {
			t.Errorf("GroupBalancer %q: %v", name, err)
		}
	}
	o := e.options("balancer")
	o.GroupBalancer = "cooperative-sticky"
	if _, err := New(o); err == nil || !strings.Contains(err.Error(), "cooperative-sticky") {
		t.Errorf("GroupBalancer cooperative-sticky: got %v, want an error naming it", err)
	}
}

// restoresFrom reads dedup_restores_total{source}.
func restoresFrom(r *running, source string) float64 {
	return metricValue(r.p.metrics.restores.WithLabelValues(source))
}

// TestRestoreScanBounded: after a crash, a restore scans each output
// partition only from the end its snapshot recorded, and only the output
// partitions its input partition routes to: with as many output as input
// partitions, exactly the outputs the crashed member wrote after the
// snapshot, never the history before it nor the other partitions'.
func TestRestoreScanBounded(t *testing.T) {
	const parts = 3
	e := newTestEnv(t, parts, parts)
	o := e.options("bounded")
	o.Store = fileStore(t, "bounded")
	out := e.collect()

	// A long history, checkpointed at its end by a graceful stop.
	history := newWorkload(parts, 3000, 1, 11)
	e.produce(history.recs...)
	a := start(t, o)
	eventually(t, 20*time.Second, "history read", func() bool { return a.p.Progress().In == uint64(len(history.recs)) })
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}

	// A few more records, forwarded by a member that then crashes without
	// a checkpoint.
	recent := newWorkload(parts, 3050, 1, 11) // the same keys first, then 50 new ones
	e.produce(recent.recs...)
	o.Metrics = NewMetrics(newRegistry())
	o.CheckpointInterval = time.Hour
	b := start(t, o)
	eventually(t, 20*time.Second, "recent read", func() bool { return b.p.Progress().In == uint64(len(recent.recs)) })
	forwardedByB := b.p.Progress().Forwarded
	if forwardedByB == 0 || forwardedByB >= uint64(len(history.recs))/10 {
		t.Fatalf("crashed member forwarded %d records; the test needs a few, far fewer than the history", forwardedByB)
	}
	out.until("crashed member's outputs", func(rs []outRec) bool { return uint64(len(rs)) == uint64(len(history.keys))+forwardedByB })
	if n := metricValue(b.p.metrics.restoreScanned); n != 0 {
		t.Errorf("restore right after a final checkpoint scanned %v records, want 0", n)
	}
	b.p.crashed.Store(true)
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}

	o.Metrics = NewMetrics(newRegistry())
	c := start(t, o)
	c.waitReady(t)
	e.produce(sentinels(parts, t0.Add(time.Hour/2))...)
	all := &workload{parts: parts, keys: recent.keys}
	checkExactlyOnce(t, all, out.untilSentinels(parts))
	if n := metricValue(c.p.metrics.restoreScanned); n != float64(forwardedByB) {
		t.Errorf("dedup_restore_scanned_records_total = %v, want %d (the outputs written after the snapshots)", n, forwardedByB)
	}
	if n := restoresFrom(c, "latest"); n != parts {
		t.Errorf("dedup_restores_total{source=latest} = %v, want %d", n, parts)
	}
}
