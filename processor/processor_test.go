package processor

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/key"
)

// TestSemantics drives one processor through the contract's Semantics on a
// single partition: duplicates dropped, first occurrences forwarded once,
// the retraction cycle, unkeyed pass-through, headers and timestamps kept,
// source headers added.
func TestSemantics(t *testing.T) {
	e := newTestEnv(t, 1, 1)
	r := start(t, e.options("semantics"))
	out := e.collect()
	r.waitReady(t)

	h := kgo.RecordHeader{Key: "trace", Value: []byte("abc")}
	del := kgo.RecordHeader{Key: retract, Value: nil}
	in := []*kgo.Record{
		rec(0, "a", "a1", t0, h),
		rec(0, "b", "b1", t0.Add(time.Second)),
		rec(0, "a", "a2-dup", t0.Add(2*time.Second)),
		rec(0, "", "unkeyed-1", t0.Add(3*time.Second)),
		rec(0, "", "unkeyed-2", t0.Add(3*time.Second)), // identical: still forwarded
		rec(0, "b", "b2-dup", t0.Add(4*time.Second)),
		// retraction cycle: first, duplicate, retraction, again, duplicate
		rec(0, "c", "c-first", t0.Add(5*time.Second)),
		rec(0, "c", "c-dup", t0.Add(6*time.Second)),
		rec(0, "c", "c-retract", t0.Add(7*time.Second), del),
		rec(0, "c", "c-again", t0.Add(8*time.Second)),
		rec(0, "c", "c-dup-again", t0.Add(9*time.Second)),
		// a retraction of a key never seen is forwarded too
		rec(0, "z", "z-retract", t0.Add(10*time.Second), del),
	}
	e.produce(in...)
	e.produce(sentinels(1, t0.Add(11*time.Second))...)
	got := withoutSentinels(out.untilSentinels(1))

	want := []string{"a1", "b1", "unkeyed-1", "unkeyed-2", "c-first", "c-retract", "c-again", "z-retract"}
	if !reflect.DeepEqual(values(got), want) {
		t.Fatalf("output values\n got %q\nwant %q", values(got), want)
	}
	a1 := got[0]
	if a1.Key != "a" || a1.Headers["trace"] != "abc" {
		t.Errorf("a1: key %q headers %v: want key and trace header kept", a1.Key, a1.Headers)
	}
	if !a1.Time.Equal(t0) {
		t.Errorf("a1 timestamp %v, want %v", a1.Time, t0)
	}
	if a1.Headers[HeaderSourceTopic] != inTopic || a1.Headers[HeaderSourcePartition] != "0" || a1.Headers[HeaderSourceOffset] != "0" {
		t.Errorf("a1 source headers %v, want %s/0/0", a1.Headers, inTopic)
	}
	for i, o := range got {
		src := in[o.SrcOffset]
		if string(src.Value) != o.Value || !o.Time.Equal(src.Timestamp) {
			t.Errorf("output %d (%s, %v) does not match input offset %d (%s, %v)", i, o.Value, o.Time, o.SrcOffset, src.Value, src.Timestamp)
		}
	}
	if _, ok := got[5].Headers[retract]; !ok {
		t.Errorf("retraction forwarded without its header: %v", got[5].Headers)
	}
	// Read while the partition is assigned: its series are deleted when
	// the member stops.
	m := r.p.metrics.Messages
	wantOutcomes := map[string]float64{OutcomeForwarded: 5, OutcomeDuplicate: 4, OutcomeRetraction: 2, OutcomeUnkeyed: 2}
	eventually(t, 10*time.Second, "dedup_messages_total published", func() bool {
		return metricValue(m.WithLabelValues(inTopic, "0", OutcomeForwarded)) == wantOutcomes[OutcomeForwarded]
	})
	for outcome, n := range wantOutcomes {
		if got := metricValue(m.WithLabelValues(inTopic, "0", outcome)); got != n {
			t.Errorf("dedup_messages_total{outcome=%q} = %v, want %v", outcome, got, n)
		}
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	pr := r.p.Progress()
	wantPr := Progress{In: 13, Forwarded: 4, Duplicates: 4, Retractions: 2, Unkeyed: 2}
	wantPr.Forwarded++ // the sentinel
	if pr != wantPr {
		t.Errorf("progress %+v, want %+v", pr, wantPr)
	}
	if pr.Decided() != pr.In || pr.Written() != uint64(len(got)+1) {
		t.Errorf("progress %+v: decided %d of %d read, written %d, want %d (the outputs and the sentinel)", pr, pr.Decided(), pr.In, pr.Written(), len(got)+1)
	}
}

// TestEventTimeWindow: a key forwarded less than a window earlier (by record
// timestamp) is dropped, one forwarded two windows or more earlier is
// forwarded again, whatever the wall clock says.
func TestEventTimeWindow(t *testing.T) {
	e := newTestEnv(t, 1, 1)
	o := e.options("window")
	o.Filter.Window = time.Minute
	r := start(t, o)
	out := e.collect()
	r.waitReady(t)

	e.produce(
		rec(0, "k", "first", t0),
		rec(0, "k", "within-window", t0.Add(59*time.Second)),
		rec(0, "k", "two-windows-later", t0.Add(2*time.Minute)),
		rec(0, "k", "dup-of-that", t0.Add(2*time.Minute+30*time.Second)),
		rec(0, "k", "much-later", t0.Add(10*time.Minute)),
	)
	e.produce(sentinels(1, t0.Add(10*time.Minute))...)
	got := values(withoutSentinels(out.untilSentinels(1)))
	want := []string{"first", "two-windows-later", "much-later"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestKeySources covers each DEDUP_KEY source end to end.
func TestKeySources(t *testing.T) {
	hdr := func(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }
	// unkeyed counts the records of in forwarded as unkeyed; the sentinel
	// each case ends with is keyed in every case but json (not JSON).
	cases := []struct {
		source  string
		in      []*kgo.Record
		want    []string
		unkeyed uint64
	}{
		{"key", []*kgo.Record{
			rec(0, "k1", "v1", t0), rec(0, "k1", "v2", t0), rec(0, "k2", "v1", t0),
		}, []string{"v1", "v1"}, 0},
		{"value", []*kgo.Record{
			rec(0, "k1", "same", t0), rec(0, "k2", "same", t0), rec(0, "k3", "other", t0), rec(0, "k4", "", t0), rec(0, "k5", "", t0),
		}, []string{"same", "other", "", ""}, 2},
		{"header:id", []*kgo.Record{
			rec(0, "k1", "a", t0, hdr("id", "1")), rec(0, "k2", "b", t0, hdr("id", "1")),
			rec(0, "k3", "c", t0, hdr("id", "2")), rec(0, "k4", "no-header", t0), rec(0, "k5", "no-header", t0),
		}, []string{"a", "c", "no-header", "no-header"}, 2},
		{"json:user.id", []*kgo.Record{
			rec(0, "", `{"user":{"id":"u1","n":1}}`, t0),
			rec(0, "", `{"x":[1,{"id":"u1"}],"user":{"name":"x","id":"u1"}}`, t0), // duplicate of u1
			rec(0, "", `{"user":{"id":"u2"}} trailing garbage`, t0),               // not one JSON document: unkeyed
			rec(0, "", `{"user":{"id":42}}`, t0),
			rec(0, "", `{"user":{"id":42.0}}`, t0),      // raw text differs from 42
			rec(0, "", `{"user":{"id":"u\u0031"}}`, t0), // escaped u1: duplicate
			rec(0, "", `{"user":`, t0),                  // malformed: unkeyed
			rec(0, "", `not json`, t0),                  // malformed: unkeyed
			rec(0, "", `{"user":{"name":"no id"}}`, t0), // missing: unkeyed
			rec(0, "", `{"user":{"id":null}}`, t0),      // null: unkeyed
		}, []string{
			`{"user":{"id":"u1","n":1}}`,
			`{"user":{"id":"u2"}} trailing garbage`,
			`{"user":{"id":42}}`, `{"user":{"id":42.0}}`,
			`{"user":`, `not json`, `{"user":{"name":"no id"}}`, `{"user":{"id":null}}`,
		}, 5},
	}
	e := newTestEnv(t, 1, 1)
	out := e.collect()
	for i, c := range cases {
		t.Run(c.source, func(t *testing.T) {
			o := e.options("keys-" + strconv.Itoa(i))
			ks, err := key.Parse(c.source)
			if err != nil {
				t.Fatal(err)
			}
			o.Key = ks
			before := len(out.recs)
			// Each case consumes the topic from where the previous one
			// ended: start at the end so earlier cases are not re-read.
			o.StartOffset = -1 // kafka.LastOffset
			r := start(t, o)
			r.waitReady(t)
			e.produce(c.in...)
			sentinel := "sentinel-case-" + strconv.Itoa(i)
			e.produce(rec(0, sentinel, sentinel, t0, hdr("id", sentinel)))
			got := out.untilValue(sentinel)[before:]
			got = got[:len(got)-1]
			if !slices.Equal(values(got), c.want) {
				t.Fatalf("DEDUP_KEY=%s\n got %q\nwant %q", c.source, values(got), c.want)
			}
			unkeyed := c.unkeyed
			if strings.HasPrefix(c.source, "json:") {
				unkeyed++ // the sentinel
			}
			// Progress is published per tick: wait until it holds every record.
			eventually(t, 10*time.Second, "every record counted", func() bool { return r.p.Progress().In == uint64(len(c.in)+1) })
			if n := r.p.Progress().Unkeyed; n != unkeyed {
				t.Errorf("DEDUP_KEY=%s: %d records counted unkeyed, want %d", c.source, n, unkeyed)
			}
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}
