package output

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestDeliveredClearsEveryEntryAtOrBelow: a partition can hold both a
// refused-record stall and a stuck-produce entry at different offsets.
// The worker reports delivery of the lower one only after everything up to
// it is acknowledged, so every entry at or below the delivered offset is
// settled, and entries above it stay.
func TestDeliveredClearsEveryEntryAtOrBelow(t *testing.T) {
	for _, c := range []struct {
		name             string
		stall, stuck     int64
		delivered        int64
		wantStall        bool
		wantStuck        bool
		wantFailedOffset int64
	}{
		{name: "stall below stuck", stall: 5, stuck: 7, delivered: 7, wantFailedOffset: -1},
		{name: "stuck below stall", stall: 9, stuck: 4, delivered: 9, wantFailedOffset: -1},
		{name: "only the lower delivered", stall: 5, stuck: 7, delivered: 5, wantStuck: true, wantFailedOffset: 7},
		{name: "between", stall: 3, stuck: 8, delivered: 6, wantStuck: true, wantFailedOffset: 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			stalled := prometheus.NewGauge(prometheus.GaugeOpts{Name: "stalled"})
			f := NewFailures(slog.New(slog.NewTextHandler(io.Discard, nil)), "in", "out", stalled)
			f.since = time.Now()
			f.failedAt[0] = c.stuck
			f.stalled[0] = &ProduceError{Partition: 0, Offset: c.stall, Err: errors.New("refused")}

			f.Delivered(0, c.delivered)

			if _, got := f.stalled[0]; got != c.wantStall {
				t.Errorf("stall kept = %v, want %v", got, c.wantStall)
			}
			if _, got := f.failedAt[0]; got != c.wantStuck {
				t.Errorf("stuck entry kept = %v, want %v", got, c.wantStuck)
			}
			if got := f.FailedOffset(0); got != c.wantFailedOffset {
				t.Errorf("FailedOffset = %d, want %d", got, c.wantFailedOffset)
			}
			wantStalled := 0.0
			if c.wantStall {
				wantStalled = 1
			}
			if got := gaugeValue(stalled); got != wantStalled {
				t.Errorf("dedup_partitions_stalled = %v, want %v", got, wantStalled)
			}
			if got := f.since.IsZero(); got == c.wantStuck {
				t.Errorf("recovery settled = %v, want %v", got, !c.wantStuck)
			}
		})
	}
}

func gaugeValue(g prometheus.Gauge) float64 {
	var d dto.Metric
	if err := g.Write(&d); err != nil {
		panic(err)
	}
	return d.GetGauge().GetValue()
}
