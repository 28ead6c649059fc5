package processor

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/internal/testkit"
)

// Input deleted below the next offset to read (retention, DeleteRecords)
// is skipped, and said: a warning naming the offsets, the counter
// dedup_input_skipped_offsets_total, and every record from the log start on
// forwarded exactly once.

// capturedLogger logs at debug into a buffer the test reads.
func capturedLogger() (*slog.Logger, *lockedBuffer) {
	var b lockedBuffer
	return slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug})), &b
}

// skipLines returns the skipped-input warnings of log.
func skipLines(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "input skipped") {
			out = append(out, l)
		}
	}
	return out
}

// numbered are records n0 to n1-1 of partition 0, one distinct key each,
// produced one by one so that each is a batch of its own (a deletion then
// removes whole batches, as retention does).
func (e *testEnv) produceNumbered(n0, n1 int) {
	e.t.Helper()
	for i := n0; i < n1; i++ {
		e.produce(rec(0, fmt.Sprintf("key-%03d", i), fmt.Sprintf("v-%03d", i), t0.Add(time.Duration(i)*time.Millisecond)))
	}
}

// checkForwardedOnce asserts the output holds exactly the values
// v-<i> for i in want (plus the sentinel), each once.
func checkForwardedOnce(t *testing.T, out []outRec, want []int) {
	t.Helper()
	got := map[string]int{}
	for _, r := range withoutSentinels(out) {
		got[r.Value]++
	}
	for _, i := range want {
		v := fmt.Sprintf("v-%03d", i)
		if got[v] != 1 {
			t.Errorf("%s forwarded %d times, want once", v, got[v])
		}
		delete(got, v)
	}
	for v, n := range got {
		t.Errorf("%s forwarded %d times, want never (deleted before it was read)", v, n)
	}
}

func span(n0, n1 int) []int {
	var s []int
	for i := n0; i < n1; i++ {
		s = append(s, i)
	}
	return s
}

// checkSkipped asserts the counter and the single warning of a skip from
// expected to start.
func checkSkipped(t *testing.T, m *Metrics, log string, expected, start int64, at string) {
	t.Helper()
	if got := metricValue(m.InputSkipped.WithLabelValues(inTopic, "0")); got != float64(start-expected) {
		t.Errorf("dedup_input_skipped_offsets_total{partition=0} = %v, want %d", got, start-expected)
	}
	lines := skipLines(log)
	if len(lines) != 1 {
		t.Fatalf("%d skipped-input warnings, want 1:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, part := range []string{
		"topic=" + inTopic, "partition=0",
		fmt.Sprintf("expected_offset=%d", expected), fmt.Sprintf("log_start_offset=%d", start),
		fmt.Sprintf("skipped_offsets=%d", start-expected), at,
	} {
		if !strings.Contains(lines[0], part) {
			t.Errorf("skipped-input warning lacks %q: %s", part, lines[0])
		}
	}
}

// TestSkippedAtStart: the stage stopped at offset 10; while it was down,
// records 10-29 were written and 10-19 deleted. The restart resumes from
// the checkpoint (or, without a store, from the committed offset), names
// and counts the 10 offsets it cannot read, and forwards 20-29 once.
func TestSkippedAtStart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store bool
		at    string
	}{
		{"checkpoint", true, `at="start from checkpoint"`},
		{"committed", false, `at="start from committed offset"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t, 1, 1)
			out := e.collect()
			o := e.options("skip-start-" + tc.name)
			if tc.store {
				o.Store = fileStore(t, o.GroupID)
			}
			first := start(t, o)
			first.waitReady(t)
			e.produceNumbered(0, 10)
			out.untilValue("v-009")
			if err := first.stop(t); err != nil {
				t.Fatal(err)
			}

			e.produceNumbered(10, 30)
			testkit.DeleteRecords(e.t, e.brokers[0], inTopic, 0, 20)

			log, buf := capturedLogger()
			o.Logger = log
			o.Metrics = NewMetrics(newRegistry())
			second := start(t, o)
			second.waitReady(t)
			e.produce(sentinels(1, t0.Add(time.Minute))...)
			recs := out.untilSentinels(1)
			checkForwardedOnce(t, recs, slices.Concat(span(0, 10), span(20, 30)))
			checkSkipped(t, o.Metrics, buf.String(), 10, 20, tc.at)
		})
	}
}

// TestSkippedAtRuntime: the stage is caught up at offset 10 and its
// fetches are held (a stage paused or far behind); records 10-29 are
// written and 10-19 deleted. When the fetch goes through, kafka-go's reader
// jumps to the log start: the jump is named and counted, and 20-29 are
// forwarded once.
func TestSkippedAtRuntime(t *testing.T) {
	e := newTestEnv(t, 1, 1)
	out := e.collect()
	o, buf := e.loggedOptions(t, "skip-runtime")
	fetches := holdRequests(t, e, kmsg.Fetch.Int16(), func(r kmsg.Request) bool {
		return fetchesFrom(r.(*kmsg.FetchRequest), inTopic)
	})

	r := start(t, o)
	r.waitReady(t)
	e.produceNumbered(0, 10)
	out.untilValue("v-009")

	fetches.on.Store(true)
	<-fetches.held
	e.produceNumbered(10, 30)
	testkit.DeleteRecords(e.t, e.brokers[0], inTopic, 0, 20)
	fetches.let()

	e.produce(sentinels(1, t0.Add(time.Minute))...)
	recs := out.untilSentinels(1)
	checkForwardedOnce(t, recs, slices.Concat(span(0, 10), span(20, 30)))
	checkSkipped(t, o.Metrics, buf.String(), 10, 20, `at="reader: `)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// loggedOptions are e.storedOptions(group) logging at debug into the
// buffer returned.
func (e *testEnv) loggedOptions(t testing.TB, group string) (Options, *lockedBuffer) {
	t.Helper()
	o := e.storedOptions(t, group)
	log, buf := capturedLogger()
	o.Logger = log
	return o, buf
}

// holder holds the requests of one kind that match while on is set, each
// until let.
type holder struct {
	on       atomic.Bool
	held     chan struct{} // a request is held (buffered: the first)
	release  chan struct{}
	released bool
}

// holdRequests installs a holder for the requests of key that match;
// the test's end lets whatever it still holds go.
func holdRequests(t testing.TB, e *testEnv, key int16, match func(kmsg.Request) bool) *holder {
	h := &holder{held: make(chan struct{}, 1), release: make(chan struct{})}
	t.Cleanup(h.let)
	e.cluster.ControlKey(key, func(r kmsg.Request) (kmsg.Response, error, bool) {
		e.cluster.KeepControl()
		if !h.on.Load() || !match(r) {
			return nil, nil, false
		}
		select {
		case h.held <- struct{}{}:
		default:
		}
		e.cluster.SleepControl(func() { <-h.release })
		return nil, nil, false
	})
	return h
}

// let stops holding and lets every held request go, once.
func (h *holder) let() {
	h.on.Store(false)
	if !h.released {
		h.released = true
		close(h.release)
	}
}

// fetchesFrom reports whether req fetches topic (kafka-go's readers send
// Fetch versions that name topics).
func fetchesFrom(req *kmsg.FetchRequest, topic string) bool {
	for _, t := range req.Topics {
		if t.Topic == topic {
			return true
		}
	}
	return false
}
