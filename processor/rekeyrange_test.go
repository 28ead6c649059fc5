package processor

import (
	"dedup/internal/kfaketest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRekeyFetchOutOfRange: a fetch of hop 1 answered OFFSET_OUT_OF_RANGE
// (its offset left the log: deleted below it, or the log truncated under
// it) is no failed batch. The partition seeks again at once; here the
// offset is within the log after all, so nothing is skipped or truncated,
// no restart is counted, and every record is re-keyed once.
func TestRekeyFetchOutOfRange(t *testing.T) {
	e, k := hop1Env(t)
	recs := keyedRecs
	e.produce(recs(0, 50)...)
	var fetches, injected atomic.Int32
	e.cluster.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		e.cluster.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		if len(req.Topics) == 0 || req.Topics[0].Topic != inTopic || fetches.Add(1) != 2 {
			return nil, nil, false
		}
		// The fetch after the first batch, at the log's end.
		injected.Add(1)
		return kfaketest.FetchResponse(req, func(_ *kmsg.FetchRequestTopicPartition, p *kmsg.FetchResponseTopicPartition) {
			p.ErrorCode = kerr.OffsetOutOfRange.Code
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
		}), nil, true
	})
	h := startHop1(t, e, "range", k, smallBatches)
	eventually(t, 30*time.Second, "the out-of-range answer given", func() bool { return injected.Load() == 1 })
	e.produce(recs(50, 100)...)
	eventually(t, 30*time.Second, "hop 1 caught up", func() bool { return h.caughtUp(1, map[int32]int64{0: 100}) })
	for name, c := range map[string]float64{
		"restarts":          metricValue(h.metrics.Restarts.WithLabelValues(inTopic, "0")),
		"skipped":           metricValue(h.metrics.Skipped.WithLabelValues(inTopic, "0")),
		"input truncations": metricValue(h.metrics.InputTruncations.WithLabelValues(inTopic, "0")),
		"rekeyed":           metricValue(h.metrics.Rekeyed.WithLabelValues(inTopic, "0")) - 100,
	} {
		if c != 0 {
			t.Errorf("%s: %v, want 0", name, c)
		}
	}
	if got := readTopic(t, e, reTopic, 100); len(got) != 100 {
		t.Errorf("%d repartition records, want 100", len(got))
	}
}
