package processor

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/rotation"
)

// TestExpectedFalseDrops: driven with distinct keys only, every duplicate
// the stage counts is a false drop; dedup_expected_false_drops_total must
// come within 2x of that count, for filters past their size (counting,
// plain) and at it (fingerprint), at a high false-positive rate so that
// there are enough false drops to count.
func TestExpectedFalseDrops(t *testing.T) {
	for _, c := range []struct {
		mode rotation.Mode
		keys int
		fp   float64
	}{
		{rotation.Counting, 2000, 0.05},
		{rotation.Plain, 2000, 0.05},
		{rotation.Fingerprint, 1000, 0.2},
	} {
		t.Run(c.mode.String(), func(t *testing.T) {
			e := newTestEnv(t, 1, 1)
			out := e.collect()
			o := e.options("false-drops-" + c.mode.String())
			o.Filter = rotation.Options{ExpectedKeys: 1000, FPRate: c.fp, Window: time.Hour, Mode: c.mode}
			base := time.Now().Add(-time.Minute)
			recs := make([]*kgo.Record, 0, c.keys+1)
			for i := range c.keys {
				recs = append(recs, rec(0, fmt.Sprintf("key-%d", i), "v", base.Add(time.Duration(i)*time.Microsecond)))
			}
			recs = append(recs, rec(0, "", sentinelValue(0), base.Add(time.Second))) // unkeyed: never dropped
			e.produce(recs...)
			run := start(t, o)
			out.untilValue(sentinelValue(0))
			in := func() float64 {
				var n float64
				for _, oc := range []string{"forwarded", "duplicate", "unkeyed"} {
					n += testutil.ToFloat64(o.Metrics.Messages.WithLabelValues(inTopic, "0", oc))
				}
				return n
			}
			eventually(t, 10*time.Second, "every record counted", func() bool { return in() == float64(len(recs)) })
			dropped := testutil.ToFloat64(o.Metrics.Messages.WithLabelValues(inTopic, "0", "duplicate"))
			expected := testutil.ToFloat64(o.Metrics.ExpectedFalseDrops.WithLabelValues(inTopic, "0"))
			t.Logf("%s, %d distinct keys: %v false drops, %.1f expected", c.mode, c.keys, dropped, expected)
			if dropped < 20 {
				t.Fatalf("only %v false drops: too few to compare", dropped)
			}
			if expected < dropped/2 || expected > 2*dropped {
				t.Errorf("expected false drops %.1f, measured %v: not within 2x", expected, dropped)
			}
			if err := run.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}
