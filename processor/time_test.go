package processor

import (
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fixedClock is a wall clock that reads t: Options.Now, the partitions' Deps.Clock.
func fixedClock(t time.Time) func() time.Time { return func() time.Time { return t } }

// anomalies reads dedup_timestamp_anomalies_total{kind} of input partition 0.
func anomalies(r *running, kind string) float64 {
	return metricValue(r.p.metrics.TimestampAnomalies.WithLabelValues(inTopic, "0", kind))
}

// keyed returns n records of keys prefix0..prefix{n-1} with values
// tag-i, stamped at ts + i ms.
func keyed(prefix, tag string, n int, ts time.Time) []*kgo.Record {
	rs := make([]*kgo.Record, n)
	for i := range n {
		rs[i] = rec(0, fmt.Sprintf("%s%d", prefix, i), fmt.Sprintf("%s-%d", tag, i), ts.Add(time.Duration(i)*time.Millisecond))
	}
	return rs
}

// TestFutureTimestampsDoNotMoveTheWindow: records stamped a year and ten
// years ahead of the wall clock, in the middle of duplicates, are decided
// in the current window: the duplicates after them are still dropped, and
// later records rotate the filters by their own (honest) timestamps.
// Records without a timestamp (0, -1) are decided without moving time too.
func TestFutureTimestampsDoNotMoveTheWindow(t *testing.T) {
	e := newTestEnv(t, 1, 1)
	o := e.options("future")
	o.Now = fixedClock(t0.Add(3 * time.Hour)) // every honest record below is in the past
	r := start(t, o)
	out := e.collect()
	r.waitReady(t)

	const n = 50
	year := 365 * 24 * time.Hour
	var in []*kgo.Record
	in = append(in, keyed("k", "first", n, t0)...)
	in = append(in, rec(0, "bad-1", "year-ahead", t0.Add(year)))
	in = append(in, keyed("k", "dup-a", n, t0.Add(time.Minute))...)
	in = append(in, rec(0, "bad-2", "ten-years-ahead", t0.Add(10*year)))
	in = append(in, keyed("k", "dup-b", n/2, t0.Add(2*time.Minute))...)
	in = append(in, rec(0, "bad-3", "hour-ahead-of-now", t0.Add(4*time.Hour)))
	in = append(in, keyed("k", "dup-c", n, t0.Add(3*time.Minute))...)
	in = append(in, rec(0, "k0", "zero-timestamp", time.UnixMilli(0)))
	in = append(in, rec(0, "neg", "minus-one-timestamp", time.UnixMilli(-1)))
	in = append(in, keyed("k", "dup-d", n, t0.Add(4*time.Minute))...)
	// Two windows after t0's (window 1h): both generations are cleared by
	// event time, so k0 is new again; its repeat is a duplicate.
	in = append(in, rec(0, "k0", "two-windows-later", t0.Add(2*time.Hour+30*time.Minute)))
	in = append(in, rec(0, "k0", "dup-of-that", t0.Add(2*time.Hour+31*time.Minute)))
	e.produce(in...)
	e.produce(sentinels(1, t0.Add(2*time.Hour+32*time.Minute))...)

	got := withoutSentinels(out.untilSentinels(1))
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("first-%d", i))
	}
	want = append(want, "year-ahead", "ten-years-ahead", "hour-ahead-of-now", "minus-one-timestamp", "two-windows-later")
	if !reflect.DeepEqual(values(got), want) {
		t.Fatalf("output\n got %q\nwant %q", values(got), want)
	}
	// Outputs keep their timestamps: future ones as they are, a missing one
	// as -1 (kafka-go cannot write 0).
	for _, o := range got {
		var wantTS int64
		switch o.Value {
		case "year-ahead":
			wantTS = t0.Add(year).UnixMilli()
		case "ten-years-ahead":
			wantTS = t0.Add(10 * year).UnixMilli()
		case "minus-one-timestamp":
			wantTS = -1
		default:
			continue
		}
		if o.Time.UnixMilli() != wantTS {
			t.Errorf("%s: output timestamp %d, want %d", o.Value, o.Time.UnixMilli(), wantTS)
		}
	}
	eventually(t, 10*time.Second, "anomalies and rotations published", func() bool {
		return anomalies(r, AnomalyFuture) == 3 && anomalies(r, AnomalyMissing) == 2 &&
			metricValue(r.p.metrics.Rotations.WithLabelValues(inTopic, "0")) >= 1
	})
	if v := metricValue(r.p.metrics.Rotations.WithLabelValues(inTopic, "0")); v != 1 {
		t.Errorf("dedup_rotations_total = %v, want 1 (the honest jump two windows ahead only)", v)
	}
	if v := metricValue(r.p.metrics.TimestampRewritten.WithLabelValues(inTopic, "0")); v != 1 {
		t.Errorf("dedup_timestamp_rewritten_total = %v, want 1", v)
	}
	if p := r.p.Progress(); p.Duplicates != uint64(3*n+n/2+2) {
		t.Errorf("duplicates %d, want %d", p.Duplicates, 3*n+n/2+2)
	}
}

// TestMaxClockSkewBoundary: a record up to the skew ahead of the wall clock
// moves event time (it may rotate the filters once); one past it does not.
func TestMaxClockSkewBoundary(t *testing.T) {
	now := t0.Add(59 * time.Minute) // one minute before the window of t0 ends
	for _, c := range []struct {
		name    string
		skew    time.Duration
		ahead   time.Duration // of now
		future  float64
		rotated float64
	}{
		{"within skew rotates once", 5 * time.Minute, 4 * time.Minute, 0, 1},
		{"past skew does not move", 5 * time.Minute, 6 * time.Minute, 1, 0},
		{"skew longer than window applies as window", 3 * time.Hour, 2 * time.Hour, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newTestEnv(t, 1, 1)
			o := e.options("skew")
			o.Now = fixedClock(now)
			o.MaxClockSkew = c.skew
			r := start(t, o)
			out := e.collect()
			r.waitReady(t)
			e.produce(rec(0, "k", "first", t0), rec(0, "ahead", "ahead", now.Add(c.ahead)), rec(0, "k", "dup", t0.Add(time.Second)))
			e.produce(sentinels(1, t0.Add(2*time.Second))...)
			if got, want := values(withoutSentinels(out.untilSentinels(1))), []string{"first", "ahead"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("got %q, want %q", got, want)
			}
			eventually(t, 10*time.Second, "counters published", func() bool {
				return r.p.Progress().In == 4 && anomalies(r, AnomalyFuture) == c.future &&
					metricValue(r.p.metrics.Rotations.WithLabelValues(inTopic, "0")) == c.rotated
			})
		})
	}
}

// TestFutureTimestampReplayedLater: the skew rule reads the wall clock, so
// a replay of the same input later, when the record stamped ahead is no
// longer in the future, decides it by its timestamp: here it clears the
// filters and a duplicate after it is forwarded, which it was not at first
// processing. Everything else decides by event time alone.
func TestFutureTimestampReplayedLater(t *testing.T) {
	input := func() []*kgo.Record {
		return []*kgo.Record{
			rec(0, "k", "first", t0),
			rec(0, "early", "stamped-ahead", t0.Add(2*time.Hour+30*time.Minute)),
			rec(0, "k", "dup", t0.Add(time.Minute)),
			rec(0, "j", "other", t0.Add(2*time.Minute)),
			rec(0, "j", "dup-of-other", t0.Add(3*time.Minute)),
		}
	}
	run := func(now time.Time) ([]string, float64) {
		e := newTestEnv(t, 1, 1)
		o := e.options("replay-" + strconv.FormatInt(now.Unix(), 10))
		o.Now = fixedClock(now)
		r := start(t, o)
		out := e.collect()
		r.waitReady(t)
		e.produce(input()...)
		e.produce(sentinels(1, t0.Add(4*time.Minute))...)
		got := values(withoutSentinels(out.untilSentinels(1)))
		eventually(t, 10*time.Second, "counts published", func() bool { return r.p.Progress().In == 6 })
		future := anomalies(r, AnomalyFuture)
		if err := r.stop(t); err != nil {
			t.Errorf("Run: %v", err)
		}
		return got, future
	}

	live, future := run(t0.Add(2 * time.Minute)) // processed as it arrives
	if want := []string{"first", "stamped-ahead", "other"}; !reflect.DeepEqual(live, want) || future != 1 {
		t.Errorf("live: got %q with %v future, want %q with 1", live, future, want)
	}
	later, future := run(t0.Add(30 * 24 * time.Hour)) // the same input replayed a month later
	if want := []string{"first", "stamped-ahead", "dup", "other"}; !reflect.DeepEqual(later, want) || future != 0 {
		t.Errorf("replay: got %q with %v future, want %q with 0", later, future, want)
	}
}
