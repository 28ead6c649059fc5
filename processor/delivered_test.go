package processor

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
			p := &Processor{
				log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
				metrics: NewMetrics(prometheus.NewRegistry()),
			}
			p.stuck = recovery{since: time.Now(), failedAt: map[int]int64{0: c.stuck}}
			p.stalls.add(&ProduceError{Partition: 0, Offset: c.stall, Err: errors.New("refused")})

			p.delivered(0, c.delivered)

			if got := p.stalls.offset(0) >= 0; got != c.wantStall {
				t.Errorf("stall kept = %v, want %v", got, c.wantStall)
			}
			if _, got := p.stuck.failedAt[0]; got != c.wantStuck {
				t.Errorf("stuck entry kept = %v, want %v", got, c.wantStuck)
			}
			if got := p.failedOffset(0); got != c.wantFailedOffset {
				t.Errorf("failedOffset = %d, want %d", got, c.wantFailedOffset)
			}
			wantStalled := 0.0
			if c.wantStall {
				wantStalled = 1
			}
			if got := metricValue(p.metrics.stalled); got != wantStalled {
				t.Errorf("dedup_partitions_stalled = %v, want %v", got, wantStalled)
			}
			if got := p.stuck.since.IsZero(); got == c.wantStuck {
				t.Errorf("recovery settled = %v, want %v", got, !c.wantStuck)
			}
		})
	}
}
