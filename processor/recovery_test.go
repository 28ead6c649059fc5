package processor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// producePaced produces recs in chunks with a pause after each, so that
// the input keeps flowing for a while (pacing the load, not synchronising),
// counts what it produced in sent and closes the returned channel when
// done.
func producePaced(t *testing.T, e *testEnv, recs []*kgo.Record, chunk int, pause time.Duration, sent *atomic.Int64) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < len(recs); i += chunk {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := e.prod.ProduceSync(ctx, recs[i:min(i+chunk, len(recs))]...).FirstErr()
			cancel()
			if err != nil {
				t.Errorf("produce: %v", err)
				return
			}
			sent.Store(int64(min(i+chunk, len(recs))))
			time.Sleep(pause)
		}
	}()
	return done
}

// TestBrokerRestart: the stage rides out produce failures and broker
// restarts while records flow. First the broker drops the connection of
// every produce request to the output topic for a while (what kafka-go's
// writer saw in the e2e broker restart: all of its attempts fail with
// "unexpected EOF"), which makes the writer give up on a batch for certain;
// then the broker is restarted twice from its data directory on the same
// port. Run keeps going, recovers (Healthy is nil again), the output holds
// every first occurrence exactly once, and Run returns nil on cancel.
func TestBrokerRestart(t *testing.T) {
	const parts = 2
	e := newTestEnv(t, parts, parts, kfake.DataDir(t.TempDir()), kfake.Ports(freePort(t)))
	o := e.storedOptions(t, "restart")
	o.RecoveryTimeout = time.Minute // generous on a loaded machine; the test fails if Run returns at all
	out := e.collect()
	a := start(t, o)
	a.waitReady(t)
	running := func() bool {
		if len(a.done) > 0 {
			t.Fatalf("Run returned while recovering: %v", <-a.done)
		}
		return true
	}

	w := newWorkload(parts, 4000, 2, 9)
	var sent atomic.Int64
	produced := producePaced(t, e, w.recs, 40, 10*time.Millisecond, &sent)
	n := int64(len(w.recs))
	eventually(t, 30*time.Second, "a fifth of the input read", func() bool { return running() && a.p.Progress().In > uint64(n/5) })

	// Drop the connection of the next produce requests to the output
	// topic: more than the writer's 3 attempts at one batch.
	const drops = 5
	var dropped atomic.Int32
	e.cluster.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.ProduceRequest)
		if len(req.Topics) == 0 || req.Topics[0].Topic != outTopic {
			return nil, nil, false // the test's own input: not handled, the control stays
		}
		if dropped.Add(1) < drops {
			e.cluster.KeepControl()
		} else {
			e.cluster.DropControl()
		}
		return nil, errors.New("connection dropped by the test"), true
	})
	eventually(t, 30*time.Second, "the writer replaced after a produce failure", func() bool {
		return running() && a.p.out.Replaced() > 0
	})
	if metricValue(a.p.metrics.ProduceErrors.WithLabelValues(outTopic)) == 0 {
		t.Error("writer replaced, but dedup_produce_errors_total did not count the failure")
	}
	eventually(t, 30*time.Second, "recovery from the produce failure", func() bool {
		return running() && a.p.Healthy() == nil && a.p.Ready()
	})

	// Two restarts, at 60% and 80% of the input produced, each once the
	// stage is consuming again.
	for i, at := range []int64{6 * n / 10, 8 * n / 10} {
		eventually(t, 30*time.Second, fmt.Sprintf("%d records produced", at), func() bool {
			return running() && sent.Load() >= at && a.p.Ready()
		})
		t.Logf("broker restart %d at %d of %d records produced: down for %v", i+1, sent.Load(), n, e.restart())
	}
	<-produced
	e.produce(sentinels(parts, t0.Add(time.Hour/2))...)
	checkExactlyOnce(t, w, out.untilSentinels(parts))
	running()
	eventually(t, 30*time.Second, "healthy after the restarts", func() bool { return running() && a.p.Healthy() == nil })
	if err := a.stop(t); err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	t.Logf("produce errors: %v records", metricValue(a.p.metrics.ProduceErrors.WithLabelValues(outTopic)))
}
