package processor

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// histogramCount reads the number of observations and their sum.
func histogramCount(t testing.TB, h prometheus.Histogram) (uint64, float64) {
	t.Helper()
	var d dto.Metric
	if err := h.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetHistogram().GetSampleCount(), d.GetHistogram().GetSampleSum()
}

// TestCheckpointPause: dedup_checkpoint_pause_seconds observes the worker's
// share of each periodic checkpoint (flush and copy into the spare), and
// nothing else: no sample for the anchor checkpoint written at assignment,
// whose pair the worker has not started to use.
func TestCheckpointPause(t *testing.T) {
	e := newTestEnv(t, 1, 1)
	o := e.storedOptions(t, "pause")
	r := start(t, o)
	r.waitReady(t)
	pause := r.p.metrics.CheckpointPause
	saved := r.p.metrics.Checkpoints.WithLabelValues(inTopic, "0")
	if n, _ := histogramCount(t, pause); n != 0 {
		t.Fatalf("%d pauses observed before any input", n)
	}
	for i := range 50 {
		e.produce(rec(0, fmt.Sprintf("k%d", i), "v", t0))
	}
	// The anchor counts as a checkpoint; a second one is periodic.
	eventually(t, 20*time.Second, "a periodic checkpoint", func() bool { return metricValue(saved) >= 2 })
	n, sum := histogramCount(t, pause)
	if n == 0 || sum <= 0 {
		t.Fatalf("after a periodic checkpoint: %d pauses observed, sum %vs", n, sum)
	}
}
