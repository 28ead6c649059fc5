package processor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/checkpoint"
	"dedup/internal/testkit"
	"dedup/processor/partition"
)

// originTopic is the input topic the simulated first hop read.
const originTopic = "raw-events"

// originRec is what hop 1 writes to repartition partition p for the
// record at offset off of origin partition op: keyed by the dedup key,
// the origin key and coordinates in the value's trailer. key "" is an
// unkeyed record: a null key, as hop 1 sends those (to a partition by
// their origin partition).
type originRec struct {
	p        int32
	op       int32
	off      int64
	key      string
	retracts bool
}

func (o originRec) value() string { return fmt.Sprintf("o%d-%d", o.op, o.off) }

// inputKey is the key of the input record: keyed by user, one per origin
// partition, not by the dedup key (hop 2 takes the dedup key from the
// repartition record's key, never from the input record again).
func (o originRec) inputKey() []byte {
	if o.key == "" {
		return nil
	}
	return fmt.Appendf(nil, "user-%d", o.op)
}

func (o originRec) record(ts time.Time) *kgo.Record {
	var key []byte // a null key unless it has one
	if o.key != "" {
		key = []byte(o.key)
	}
	hs := []kgo.RecordHeader{{Key: "trace", Value: []byte(o.value())}}
	if o.retracts {
		hs = append(hs, kgo.RecordHeader{Key: retract, Value: []byte("1")})
	}
	origin := partition.Origin{Topic: originTopic, Partition: o.op, Offset: o.off, Key: o.inputKey()}
	value := []byte(o.value())
	return &kgo.Record{Partition: o.p, Key: key, Value: origin.AppendTrailer(value, value), Timestamp: ts, Headers: hs}
}

// originStream is hop 1's first sends of a stream: per origin partition,
// keyed records (ids shared across origin partitions, so copies of an id
// arrive from several), unkeyed records and a retraction cycle, each sent
// to the repartition partition of its key.
func originStream(parts int32, perOrigin int, from int64) []originRec {
	var rs []originRec
	for op := range parts {
		for i := range perOrigin {
			off := from + int64(i)
			o := originRec{op: op, off: off}
			switch {
			case i%7 == 3:
				// unkeyed
			case i%11 == 5:
				o.key, o.retracts = fmt.Sprintf("id-%d", (off/2)%5), true
			default:
				o.key = fmt.Sprintf("id-%d", off/2) // both origins share ids: copies
			}
			o.p = repartitionOf(o, parts)
			rs = append(rs, o)
		}
	}
	return rs
}

func repartitionOf(o originRec, parts int32) int32 {
	if o.key == "" {
		return o.op % parts
	}
	h := int32(0)
	for _, c := range o.key {
		h = h*31 + c
	}
	return (h%parts + parts) % parts
}

// records builds the records of rs at ts.
func records(rs []originRec, ts time.Time) []*kgo.Record {
	out := make([]*kgo.Record, len(rs))
	for i, o := range rs {
		out[i] = o.record(ts)
	}
	return out
}

// wantOnce is what one hop makes of the stream: each origin record is
// decided once, in origin order per origin partition... by a model of the
// filters: first occurrence of an id forwarded, a retraction forwarded and
// clearing its id, unkeyed records forwarded.
func wantOnce(rs []originRec) map[string]originRec {
	// Decided per repartition partition, in the order hop 1 sent them;
	// an id is always on the same repartition partition, so one seen set
	// does.
	seen := map[string]bool{}
	want := map[string]originRec{}
	for _, o := range rs {
		switch {
		case o.key == "":
			want[o.value()] = o
		case o.retracts:
			delete(seen, o.key)
			want[o.value()] = o
		case !seen[o.key]:
			seen[o.key] = true
			want[o.value()] = o
		}
	}
	return want
}

// checkRepartitioned checks the output against the stream: every value
// of want exactly once and nothing else, source headers naming the origin,
// the repartition header naming a repartition record, origin order kept per
// origin partition within each output partition.
func checkRepartitioned(t *testing.T, want map[string]originRec, got []outRec) {
	t.Helper()
	count := map[string]int{}
	last := map[[2]int32]int64{}
	for _, r := range withoutSentinels(got) {
		count[r.Value]++
		var op int32
		var off int64
		if _, err := fmt.Sscanf(r.Value, "o%d-%d", &op, &off); err != nil {
			t.Fatalf("unexpected output value %q", r.Value)
		}
		if r.Headers[HeaderSourceTopic] != originTopic || r.SrcPart != op || r.SrcOffset != off {
			t.Errorf("%s: source headers %s/%d/%d, want %s/%d/%d", r.Value, r.Headers[HeaderSourceTopic], r.SrcPart, r.SrcOffset, originTopic, op, off)
		}
		var rp int32
		var roff int64
		if n, err := fmt.Sscanf(r.Headers[partition.HeaderRepartition], inTopic+"/%d/%d", &rp, &roff); n != 2 || err != nil {
			t.Errorf("%s: repartition header %q", r.Value, r.Headers[partition.HeaderRepartition])
		}
		if w, ok := want[r.Value]; ok && r.Key != string(w.inputKey()) {
			t.Errorf("%s: output key %q, want the origin's %q", r.Value, r.Key, w.inputKey())
		}
		if r.Headers["trace"] != r.Value {
			t.Errorf("%s: own header trace=%q lost", r.Value, r.Headers["trace"])
		}
		k := [2]int32{r.Partition, op}
		if prev, ok := last[k]; ok && off <= prev && count[r.Value] == 1 {
			t.Errorf("output partition %d: origin %d offset %d after %d", r.Partition, op, off, prev)
		}
		last[k] = max(last[k], off)
	}
	for v := range want {
		if count[v] != 1 {
			t.Errorf("%s forwarded %d times, want once", v, count[v])
		}
	}
	for v, n := range count {
		if _, ok := want[v]; !ok {
			t.Errorf("%s forwarded %d times, want never", v, n)
		}
	}
}

// resendFrom is what hop 1 sends again after restarting each origin
// partition at offset from: its records from there, in order.
func resendFrom(rs []originRec, from int64) []originRec {
	var out []originRec
	for _, o := range rs {
		if o.off >= from {
			out = append(out, o)
		}
	}
	return out
}

// finishOrigins produces more after first, then the sentinels, checks
// that the output holds every origin record of first and more once, and
// stops r.
func (e *testEnv) finishOrigins(t *testing.T, out *collector, r *running, parts int32, first, more []originRec) {
	t.Helper()
	e.produce(records(more, t0)...)
	e.produce(sentinels(parts, t0)...)
	got := out.untilSentinels(parts)
	checkRepartitioned(t, wantOnce(append(append([]originRec(nil), first...), more...)), got)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestRepartitionedResends: the second hop takes every origin record
// once. Hop 1's re-sends after a restart (in order, after what landed) are
// dropped by their origin offset and counted, never decided again: a
// re-sent retraction does not clear its id, a re-sent unkeyed record is
// not forwarded twice. Source headers name the origin, the output keeps
// the origin key, and order per origin partition holds.
func TestRepartitionedResends(t *testing.T) {
	const parts = 2
	e := newTestEnv(t, parts, parts)
	o := e.options("hop2")
	o.Repartitioned = true
	out := e.collect()
	r := start(t, o)
	r.waitReady(t)

	first := originStream(parts, 60, 0)
	e.produce(records(first, t0)...)
	// Hop 1 restarts at origin offset 20 twice over (lost
	// acknowledgements), then goes on.
	again := resendFrom(first, 20)
	e.produce(records(again, t0)...)
	e.produce(records(again, t0)...)
	e.finishOrigins(t, out, r, parts, first, originStream(parts, 30, 60))
	if got, want := r.p.progress.Resent.Load(), uint64(2*len(again)); got != want {
		t.Errorf("%d re-sends dropped, want %d", got, want)
	}
}

// savedAt records the newest checkpoint offset saved per partition.
type savedAt struct {
	Store
	mu sync.Mutex
	at map[int]int64
}

func (s *savedAt) Save(ctx context.Context, m checkpoint.Meta, state io.WriterTo) (checkpoint.Meta, error) {
	saved, err := s.Store.Save(ctx, m, state)
	if err == nil {
		s.mu.Lock()
		s.at[m.Partition] = max(s.at[m.Partition], m.Offset)
		s.mu.Unlock()
	}
	return saved, err
}

// covers reports whether every partition's checkpoint is at its end.
func (s *savedAt) covers(ends map[int]int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, end := range ends {
		if s.at[p] < end {
			return false
		}
	}
	return true
}

// TestRepartitionedCrash: a member of the second hop is killed (no final
// checkpoint, no commit) after checkpoints of its high-water marks, bases
// and increments. Hop 1 then sends everything again from the start (its
// commit was lost too) and goes on. The successor restores the marks with
// the filters, its replay scan finds by the repartition headers what the
// killed member forwarded after its checkpoint, and the re-sends are
// dropped: every origin record once. Both stores.
func TestRepartitionedCrash(t *testing.T) {
	stores(t, func(t *testing.T, e *testEnv, store func(string) Store) {
		const parts = 4
		o := e.options("hop2crash")
		o.Repartitioned = true
		saved := &savedAt{Store: store("hop2crash"), at: map[int]int64{}}
		o.Store = saved
		o.CheckpointInterval = 20 * time.Millisecond
		o.ChainRatio = 4
		out := e.collect()
		a := start(t, o)
		a.waitReady(t)
		first := originStream(parts, 40, 0)
		for i := 0; i < len(first); i += 20 {
			e.produce(records(first[i:min(i+20, len(first))], t0)...)
		}
		// Killed once its checkpoints cover every first send: its
		// successor replays nothing of them, only its marks stop the
		// re-sends of unkeyed records and retractions.
		ends := map[int]int64{}
		for _, r := range first {
			ends[int(r.p)]++
		}
		eventually(t, 20*time.Second, "checkpoints at the end of the first sends", func() bool { return saved.covers(ends) })
		a.crash(t)

		b := startFresh(t, o)
		e.produce(records(first, t0)...) // hop 1 from the start again
		e.finishOrigins(t, out, b, parts, first, originStream(parts, 20, 40))
		if got := b.p.progress.Resent.Load(); got != uint64(len(first)) {
			t.Errorf("%d re-sends dropped, want %d", got, len(first))
		}
	})
}

// frozenStore passes saves through until frozen, then fails every one: the
// newest checkpoint stays behind what the member goes on forwarding.
type frozenStore struct {
	Store
	frozen atomic.Bool
}

func (s *frozenStore) Save(ctx context.Context, m checkpoint.Meta, state io.WriterTo) (checkpoint.Meta, error) {
	if s.frozen.Load() {
		return checkpoint.Meta{}, errCrashed
	}
	return s.Store.Save(ctx, m, state)
}

// TestRepartitionedReplayScan: the second hop's checkpoints stop (the store
// fails every save) while it goes on forwarding, then the member is killed.
// Its successor restores the older checkpoint, replays the repartition
// topic from there, and its replay scan finds by the repartition headers
// what the killed member forwarded after the checkpoint: not forwarded
// again. Then hop 1 sends everything again: dropped by the marks. Every
// origin record once. Both stores.
func TestRepartitionedReplayScan(t *testing.T) {
	stores(t, func(t *testing.T, e *testEnv, store func(string) Store) {
		const parts = 4
		o := e.options("hop2replay")
		o.Repartitioned = true
		fs := &frozenStore{Store: store("hop2replay")}
		o.Store = fs
		o.CheckpointInterval = 20 * time.Millisecond
		out := e.collect()
		a := start(t, o)
		a.waitReady(t)
		first := originStream(parts, 30, 0)
		e.produce(records(first, t0)...)
		out.until("the first part", func(rs []outRec) bool { return len(rs) >= len(wantOnce(first)) })
		fs.frozen.Store(true)
		second := originStream(parts, 30, 30)
		e.produce(records(second, t0)...)
		both := append(append([]originRec(nil), first...), second...)
		out.until("the second part", func(rs []outRec) bool { return len(rs) >= len(wantOnce(both)) })
		a.crash(t)

		o.Store = fs.Store
		b := startFresh(t, o)
		e.produce(records(both, t0)...) // hop 1 from the start again
		e.produce(sentinels(parts, t0)...)
		checkRepartitioned(t, wantOnce(both), out.untilSentinels(parts))
		if err := b.stop(t); err != nil {
			t.Fatal(err)
		}
		if got := b.p.progress.Suppressed.Load(); got == 0 {
			t.Error("the replay scan suppressed nothing: the crash left no output past the checkpoint")
		}
		t.Logf("replay suppressed %d, re-sends dropped %d", b.p.progress.Suppressed.Load(), b.p.progress.Resent.Load())
	})
}

// TestRepartitionedUnknownRecordStops: a repartition record whose origin
// trailer has flags this build does not know (a newer re-key hop wrote it)
// stops its partition at it: what came before is decided and committed,
// neither it nor anything after it is decided or forwarded, the commit
// never passes it, and readiness names the partition and the offset, until
// a hop 2 that knows the flags takes over.
func TestRepartitionedUnknownRecordStops(t *testing.T) {
	e := newTestEnv(t, 1, 1)
	o := e.options("unknown")
	o.Repartitioned = true
	out := e.collect()
	r := start(t, o)
	r.waitReady(t)

	before, after := originStream(1, 10, 0), originStream(1, 5, 11)
	e.produce(records(before, t0)...)
	newer := originRec{key: "id-new", off: 10}.record(t0)
	newer.Value[len(newer.Value)-9] |= 0x40 // a flag this build does not know
	e.produce(newer)
	e.produce(records(after, t0)...)

	want := len(wantOnce(before))
	out.until("the records before it forwarded", func(rs []outRec) bool { return len(rs) >= want })
	eventually(t, 20*time.Second, "readiness naming the stopped partition", func() bool {
		err := r.p.Readiness()
		return errors.Is(err, partition.ErrUnknownRecord) && strings.Contains(err.Error(), "0 at offset 10")
	})
	if n := r.p.Progress().In; n != uint64(len(before)) {
		t.Errorf("%d records decided, want the %d before the unknown one", n, len(before))
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if c := committed(t, e, "unknown", 0); c != 10 {
		t.Errorf("committed offset %d, want 10: not past the unknown record", c)
	}
	if got := testkit.EndOffsets(t, e.brokers[0], outTopic, 1); got != int64(want) {
		t.Errorf("the output holds %d records, want %d: nothing at or after the unknown record", got, want)
	}
}
