package processor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/internal/testkit"
	"dedup/offsets"
	"dedup/processor/partition"
)

const dropTopic = "events-dropped"

// droppedEnv is a broker with parts input and output partitions and the
// drop topic, and options of a stage with a file store writing it.
func droppedEnv(t *testing.T, parts int32, group string) (*testEnv, Options) {
	t.Helper()
	e := newTestEnv(t, parts, parts)
	if err := e.cluster.CreateTopic(dropTopic, parts, nil); err != nil {
		t.Fatal(err)
	}
	o := e.storedOptions(t, group)
	o.DroppedTopic = dropTopic
	return e, o
}

// collectTopic reads topic from the start, as collect reads the output.
func (e *testEnv) collectTopic(topic string) *collector {
	e.t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(e.brokers...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(50*time.Millisecond),
	)
	if err != nil {
		e.t.Fatalf("consumer: %v", err)
	}
	e.t.Cleanup(cl.Close)
	return &collector{t: e.t, cl: cl}
}

// drained reads what c has not read yet of topic up to its end offsets
// now: once every writer is stopped, the whole topic.
func (c *collector) drained(e *testEnv, topic string, parts int32) []outRec {
	c.t.Helper()
	end, err := offsets.EndSum(context.Background(), testkit.KafkaClient(c.t, e.brokers...), topic, int(parts))
	if err != nil {
		c.t.Fatal(err)
	}
	return c.until(fmt.Sprintf("%s read to its end (%d records)", topic, end), func(rs []outRec) bool { return int64(len(rs)) >= end })
}

// sources counts the records of rs by the input record their source
// headers name.
func sources(rs []outRec) map[[2]int64]int {
	n := map[[2]int64]int{}
	for _, r := range rs {
		n[[2]int64{int64(r.SrcPart), r.SrcOffset}]++
	}
	return n
}

// duplicatesOf is the input records of w that are not the first of their
// key: what the filters drop.
func duplicatesOf(w *workload) map[[2]int64]string {
	seen := map[string]bool{}
	dups := map[[2]int64]string{}
	for _, r := range w.recs {
		k := string(r.Key)
		if seen[k] {
			dups[[2]int64{int64(r.Partition), r.Offset}] = k
		}
		seen[k] = true
	}
	return dups
}

// checkDropsOnce asserts that drops hold every record of want exactly
// once, by source headers, and nothing else.
func checkDropsOnce(t *testing.T, want map[[2]int64]string, drops []outRec) {
	t.Helper()
	got := sources(drops)
	missing, twice, unexpected := 0, 0, 0
	for src := range want {
		switch got[src] {
		case 0:
			missing++
		case 1:
		default:
			twice++
		}
	}
	for src := range got {
		if _, ok := want[src]; !ok {
			unexpected++
		}
	}
	if missing > 0 || twice > 0 || unexpected > 0 {
		t.Fatalf("drop topic: of %d duplicates %d missing, %d written more than once; %d records of no duplicate (%d records in all)",
			len(want), missing, twice, unexpected, len(drops))
	}
}

// TestDroppedHeaders: a duplicate is written to the drop topic unchanged
// (key, value, timestamp, its own headers), with the source headers of an
// output and the drop headers naming the generation that held its key
// and that generation's window: the current one, the previous one after
// a rotation, and the legacy pair after the filter options changed.
// First occurrences, retractions and unkeyed records are not written
// there, and the counters count what was.
func TestDroppedHeaders(t *testing.T) {
	const parts = 2
	e, o := droppedEnv(t, parts, "dropped-headers")
	drops := e.collectTopic(dropTopic)
	out := e.collect()
	a := startFresh(t, o)
	a.waitReady(t)
	hdr := kgo.RecordHeader{Key: "x-trace", Value: []byte("t-1")}
	recs := []*kgo.Record{
		rec(0, "a", "a-first", t0),
		rec(0, "a", "a-current", t0.Add(time.Minute), hdr), // same window: the current generation
		rec(0, "b", "b-first", t0.Add(2*time.Minute)),
		rec(1, "c", "c-first", t0),
		rec(1, "", "unkeyed", t0.Add(time.Second)),
		rec(1, "c", "c-retract", t0.Add(2*time.Second), kgo.RecordHeader{Key: retract, Value: []byte("1")}),
		rec(0, "a", "a-previous", t0.Add(time.Hour+5*time.Minute)), // next window: the previous generation
	}
	e.produce(recs...)
	e.produce(sentinels(parts, t0.Add(time.Hour+6*time.Minute))...)
	out.untilSentinels(parts)
	got := drops.until("both duplicates", func(rs []outRec) bool { return len(rs) >= 2 })
	w0, w1 := t0.Truncate(time.Hour), t0.Truncate(time.Hour).Add(time.Hour)
	checkDrop(t, got, recs[1], partition.DropGenCurrent, w0, w1)
	checkDrop(t, got, recs[6], partition.DropGenPrevious, w0, w1)
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	if d := a.p.Progress(); d.Dropped != 2 || d.Duplicates != 2 {
		t.Errorf("progress: %d duplicates, %d written to the drop topic, want 2 and 2", d.Duplicates, d.Dropped)
	}

	// Other filter options: b, seen before the change, is held by the
	// legacy pair (its previous generation, the window before the pair's
	// last); d, seen after, by the new pair.
	o.Filter.ExpectedKeys *= 2
	b := startFresh(t, o)
	b.waitReady(t)
	more := []*kgo.Record{
		rec(0, "b", "b-legacy", t0.Add(time.Hour+7*time.Minute)),
		rec(0, "d", "d-first", t0.Add(time.Hour+8*time.Minute)),
		rec(0, "d", "d-current", t0.Add(time.Hour+9*time.Minute)),
	}
	e.produce(more...)
	got = drops.until("the duplicates after the options changed", func(rs []outRec) bool { return len(rs) >= 4 })
	checkDrop(t, got, more[0], partition.DropGenLegacy, w0, w1)
	checkDrop(t, got, more[2], partition.DropGenCurrent, w1, w1.Add(time.Hour))
	eventually(t, 5*time.Second, "dedup_dropped_written_total to count the second run's drops", func() bool {
		return metricValue(b.p.metrics.DroppedWritten.WithLabelValues(inTopic, "0")) == 2
	})
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
	if got := drops.drained(e, dropTopic, parts); len(got) != 4 {
		t.Errorf("drop topic holds %d records, want the 4 duplicates", len(got))
	}
}

// checkDrop asserts that drops hold in's record as a drop of generation
// gen, whose window is [start, end).
func checkDrop(t *testing.T, drops []outRec, in *kgo.Record, gen string, start, end time.Time) {
	t.Helper()
	var d *outRec
	for i := range drops {
		if drops[i].Value == string(in.Value) {
			d = &drops[i]
		}
	}
	if d == nil {
		t.Errorf("%s not in the drop topic", in.Value)
		return
	}
	want := map[string]string{
		HeaderSourceTopic:               inTopic,
		HeaderSourcePartition:           strconv.Itoa(int(in.Partition)),
		HeaderSourceOffset:              strconv.FormatInt(in.Offset, 10),
		partition.HeaderDropReason:      partition.DropReasonDuplicate,
		partition.HeaderDropGeneration:  gen,
		partition.HeaderDropWindowStart: start.UTC().Format(time.RFC3339Nano),
		partition.HeaderDropWindowEnd:   end.UTC().Format(time.RFC3339Nano),
	}
	for _, h := range in.Headers {
		want[h.Key] = string(h.Value)
	}
	for k, v := range want {
		if d.Headers[k] != v {
			t.Errorf("%s: header %s = %q, want %q", in.Value, k, d.Headers[k], v)
		}
	}
	if len(d.Headers) != len(want) {
		t.Errorf("%s: headers %v, want %v", in.Value, d.Headers, want)
	}
	if d.Key != string(in.Key) || !d.Time.Equal(in.Timestamp) || d.Partition != in.Partition {
		t.Errorf("%s: key %q at %s in partition %d, want key %q at %s in %d", in.Value, d.Key, d.Time, d.Partition, in.Key, in.Timestamp, in.Partition)
	}
}

// TestDroppedSampling: with DROPPED_SAMPLE_RATE 0.5 about half the keys
// have their duplicates written, each key all of them or none, and a
// replay after a crash (twice, mid-stream) samples the same: the drop
// topic holds every duplicate of a sampled key exactly once.
func TestDroppedSampling(t *testing.T) {
	const parts = 2
	e, o := droppedEnv(t, parts, "dropped-sampling")
	o.DroppedSampleRate = 0.5
	drops := e.collectTopic(dropTopic)
	out := e.collect()
	w := newWorkload(parts, 1000, 3, 31)
	a := startFresh(t, o)
	a.waitReady(t)
	var sent atomic.Int64
	produced := producePaced(t, e, w.recs, 30, 5*time.Millisecond, &sent)
	for _, at := range []int{300, 600} {
		drops.until(fmt.Sprintf("%d drops before a crash", at), func(rs []outRec) bool { return len(rs) >= at })
		a.crash(t)
		a = startFresh(t, o)
	}
	<-produced
	e.produce(sentinels(parts, t0.Add(time.Hour/2))...)
	checkExactlyOnce(t, w, out.untilSentinels(parts))
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	dups := duplicatesOf(w)
	byKey := map[string]int{}
	for _, k := range dups {
		byKey[k]++
	}
	sampled := map[string]bool{}
	for _, d := range drops.drained(e, dropTopic, parts) {
		sampled[d.Key] = true
	}
	want := map[[2]int64]string{}
	for src, k := range dups {
		if sampled[k] {
			want[src] = k
		}
	}
	checkDropsOnce(t, want, drops.recs)
	// 1000 keys at 0.5: outside 400..600 is a 6-sigma event.
	if n := len(sampled); n < 400 || n > 600 {
		t.Errorf("%d of %d keys sampled at rate 0.5", n, len(byKey))
	}
	t.Logf("%d of %d keys sampled, %d drops written", len(sampled), len(byKey), len(drops.recs))
}

// TestDroppedExactlyOnce: with faults at several points of the stream
// (crashes of the member, acknowledgements of drop-topic requests lost or
// answered REQUEST_TIMED_OUT after the append at the 1st, 5th and 20th
// request), the drop topic holds every duplicate exactly once, by source
// headers, and the output every first occurrence exactly once.
func TestDroppedExactlyOnce(t *testing.T) {
	lost := func(*kmsg.ProduceRequest) (kmsg.Response, error) {
		return nil, errors.New("connection closed by the test after the append")
	}
	for _, tc := range []struct {
		name    string
		answer  func(*kmsg.ProduceRequest) (kmsg.Response, error) // nil: crashes
		crashAt []int                                             // drops written before each crash
	}{
		{name: "crashes", crashAt: []int{500, 1500, 2500}},
		{name: "lost acknowledgements", answer: lost},
		{name: "request timed out", answer: errorAnswer(kerr.RequestTimedOut.Code)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const parts = 2
			e, o := droppedEnv(t, parts, "dropped-once")
			drops := e.collectTopic(dropTopic)
			out := e.collect()
			w := newWorkload(parts, 1500, 3, 41)
			at := []int{1, 5, 20}
			var injected *atomic.Int32
			if tc.answer != nil {
				injected = afterAppendTo(t, e, dropTopic, at, tc.answer)
			}
			a := startFresh(t, o)
			a.waitReady(t)
			var sent atomic.Int64
			produced := producePaced(t, e, w.recs, 30, 5*time.Millisecond, &sent)
			for _, n := range tc.crashAt {
				drops.until(fmt.Sprintf("%d drops before a crash", n), func(rs []outRec) bool { return len(rs) >= n })
				a.crash(t)
				a = startFresh(t, o)
			}
			if injected != nil {
				eventually(t, 60*time.Second, "every fault injected", func() bool { return injected.Load() == int32(len(at)) })
			}
			<-produced
			e.produce(sentinels(parts, t0.Add(time.Hour/2))...)
			checkExactlyOnce(t, w, out.untilSentinels(parts))
			want := duplicatesOf(w)
			drops.until("every duplicate in the drop topic", func(rs []outRec) bool { return len(sources(rs)) >= len(want) })
			if err := a.stop(t); err != nil {
				t.Fatal(err)
			}
			checkDropsOnce(t, want, drops.drained(e, dropTopic, parts))
			if injected != nil && a.p.out.Replaced() == 0 {
				t.Error("no writer replaced: the faults did not go through the restore")
			}
			t.Logf("%d duplicates; writers replaced %d", len(want), a.p.out.Replaced())
		})
	}
}

// TestDroppedTopicEnabled: a stage restored from a checkpoint taken
// without a drop topic anchors the partition (the drop topic's ends
// recorded) before its first drop, so that a crash before its first
// periodic checkpoint writes none of those drops twice.
func TestDroppedTopicEnabled(t *testing.T) {
	const parts = 2
	e, o := droppedEnv(t, parts, "dropped-enabled")
	o.DroppedTopic = ""
	drops := e.collectTopic(dropTopic)
	out := e.collect()
	w := newWorkload(parts, 500, 3, 51)
	half := len(w.recs) / 2
	a := startFresh(t, o)
	a.waitReady(t)
	e.produce(w.recs[:half]...)
	eventually(t, 20*time.Second, "the first half decided", func() bool { return a.p.Progress().Decided() == uint64(half) })
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}

	o.DroppedTopic, o.CheckpointInterval = dropTopic, time.Hour // no periodic checkpoint: only the anchor
	b := startFresh(t, o)
	b.waitReady(t)
	e.produce(w.recs[half:]...)
	want := map[[2]int64]string{}
	for src, k := range duplicatesOf(w) {
		for _, r := range w.recs[half:] {
			if int64(r.Partition) == src[0] && r.Offset == src[1] {
				want[src] = k
			}
		}
	}
	drops.until("the second half's duplicates", func(rs []outRec) bool { return len(rs) >= len(want) })
	b.crash(t)
	c := startFresh(t, o)
	e.produce(sentinels(parts, t0.Add(time.Hour/2))...)
	checkExactlyOnce(t, w, out.untilSentinels(parts))
	if err := c.stop(t); err != nil {
		t.Fatal(err)
	}
	checkDropsOnce(t, want, drops.drained(e, dropTopic, parts))
}

// TestDroppedRefused: the drop topic refusing a duplicate for good (an
// authorization failure, or INVALID_RECORD, of every request to its
// partition 0) stops the
// input partition whose drop it was, loudly, as a refused output does:
// Healthy names it, dedup_partitions_stalled is 1, the other partition
// goes on, nothing at or past the refused record is committed; once the
// cause is fixed, a restarted member writes every drop once.
func TestDroppedRefused(t *testing.T) {
	for _, code := range []*kerr.Error{kerr.TopicAuthorizationFailed, kerr.InvalidRecord} {
		t.Run(code.Message, func(t *testing.T) { droppedRefused(t, code.Code) })
	}
}

func droppedRefused(t *testing.T, code int16) {
	const parts = 2
	e, o := droppedEnv(t, parts, "dropped-refused")
	drops := e.collectTopic(dropTopic)
	out := e.collect()
	a := startFresh(t, o)
	a.waitReady(t)
	var lifted atomic.Bool
	e.cluster.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		e.cluster.KeepControl()
		req := kr.(*kmsg.ProduceRequest)
		if lifted.Load() || len(req.Topics) == 0 || req.Topics[0].Topic != dropTopic || req.Topics[0].Partitions[0].Partition != 0 {
			return nil, nil, false
		}
		resp, _ := errorAnswer(code)(req)
		return resp, nil, true
	})
	recs := []*kgo.Record{rec(0, "a", "a0", t0), rec(1, "b", "b0", t0), rec(0, "a", "a1", t0), rec(1, "b", "b1", t0), rec(0, "c", "c0", t0)}
	e.produce(recs...)
	eventually(t, 20*time.Second, "Healthy to report the refusal", func() bool { return errors.Is(a.p.Healthy(), ErrOutputRefused) })
	var perr *ProduceError
	if err := a.p.Healthy(); !errors.As(err, &perr) || perr.Partition != 0 || perr.Offset != recs[2].Offset || !perr.Dropped {
		t.Fatalf("Healthy() = %v, want the refused drop of %s/0 offset %d", err, inTopic, recs[2].Offset)
	}
	if n := metricValue(a.p.metrics.Stalled); n != 1 {
		t.Errorf("dedup_partitions_stalled = %v, want 1", n)
	}
	// Partition 1 goes on, on the same writer.
	e.produce(rec(1, "b", "b2", t0), rec(1, "d", "d0", t0))
	drops.untilValue("b2")
	out.untilValue("d0")
	if n := a.p.out.Replaced(); n != 0 {
		t.Errorf("%d writers replaced: a refused drop stops its partition, not the writer", n)
	}
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	if c := committed(t, e, o.GroupID, 0); c > recs[2].Offset {
		t.Fatalf("committed offset %d of partition 0 passes the refused drop at %d", c, recs[2].Offset)
	}

	lifted.Store(true)
	b := startFresh(t, o)
	e.produce(sentinels(parts, t0)...)
	out.untilSentinels(parts)
	drops.untilValue("a1")
	eventually(t, 20*time.Second, "healthy after the fix", func() bool { return b.p.Healthy() == nil })
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
	checkDropsOnce(t, map[[2]int64]string{{0, recs[2].Offset}: "a", {1, recs[3].Offset}: "b", {1, recs[3].Offset + 1}: "b"},
		drops.drained(e, dropTopic, parts))
}

// TestDroppedTopicMissing: a drop topic that does not exist is reported
// as a missing output is (dedup_topic_missing, Readiness naming it); no
// generation starts, and once it is created the stage goes on and writes
// the drops.
func TestDroppedTopicMissing(t *testing.T) {
	const parts = 2
	e := newTestEnv(t, parts, parts)
	o := e.storedOptions(t, "dropped-missing")
	o.DroppedTopic = dropTopic
	a := startFresh(t, o)
	eventually(t, 10*time.Second, "the drop topic reported missing", func() bool {
		return errors.Is(a.p.Readiness(), ErrTopicMissing) && metricValue(a.p.metrics.Missing.WithLabelValues(dropTopic)) == 1
	})
	if err := a.p.Readiness(); !strings.Contains(err.Error(), dropTopic) {
		t.Errorf("Readiness() = %v, want it to name %s", err, dropTopic)
	}
	e.produce(rec(0, "a", "a0", t0), rec(0, "a", "a1", t0))
	if err := e.cluster.CreateTopic(dropTopic, parts, nil); err != nil {
		t.Fatal(err)
	}
	a.waitReady(t)
	e.collectTopic(dropTopic).untilValue("a1")
	if n := metricValue(a.p.metrics.Missing.WithLabelValues(dropTopic)); n != 0 {
		t.Errorf("dedup_topic_missing{topic=%q} = %v once created, want 0", dropTopic, n)
	}
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestDroppedTooLarge: a duplicate larger than the drop topic's
// max.message.bytes is not written there (its first occurrence, which
// the output takes, is forwarded); it is counted and the partition goes
// on.
func TestDroppedTooLarge(t *testing.T) {
	const parts = 2
	e, o := droppedEnv(t, parts, "dropped-too-large")
	testkit.SetTopicConfig(t, e.brokers[0], dropTopic, "max.message.bytes", "500")
	drops := e.collectTopic(dropTopic)
	out := e.collect()
	a := startFresh(t, o)
	a.waitReady(t)
	big := strings.Repeat("x", 1000)
	e.produce(rec(0, "big", big, t0), rec(0, "big", big, t0), rec(0, "small", "s0", t0), rec(0, "small", "s1", t0))
	e.produce(sentinels(parts, t0)...)
	out.untilSentinels(parts)
	drops.untilValue("s1")
	eventually(t, 5*time.Second, "the refused drop counted", func() bool {
		return metricValue(a.p.metrics.DroppedSkipped.WithLabelValues(inTopic, "0", "refused")) == 1
	})
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	if got := drops.drained(e, dropTopic, parts); len(got) != 1 {
		t.Errorf("drop topic holds %d records, want only the small duplicate", len(got))
	}
}

// TestDroppedTwoHops: with REPARTITION_TOPIC a drop names the input
// record, not the repartition topic's copy, in its source headers, as an
// output does, and carries the repartition header its replay scan
// matches: each copy of an id but the forwarded one is in the drop topic
// once.
func TestDroppedTwoHops(t *testing.T) {
	const inParts, reParts = 3, 4
	e, k := twoHopEnv(t, inParts, reParts)
	if err := e.cluster.CreateTopic(dropTopic, reParts, nil); err != nil {
		t.Fatal(err)
	}
	o := e.options("dropped-twohop")
	o.InputTopic, o.Repartitioned, o.Key = reTopic, true, k
	o.Store, o.DroppedTopic = fileStore(t, "dropped-twohop"), dropTopic
	out := e.collect()
	drops := e.collectTopic(dropTopic)
	b := start(t, o)
	b.waitReady(t)
	h := startHop1(t, e, "dropped-twohop", k, smallBatches)
	in := newTwoHopInput(inParts, 200, 3, 20, 61)
	for i := 0; i < len(in.recs); i += 30 {
		e.produce(in.recs[i:min(i+30, len(in.recs))]...)
	}
	ends := map[int32]int64{}
	for _, r := range in.recs {
		ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
	}
	eventually(t, 60*time.Second, "hop 1 caught up", func() bool { return h.caughtUp(inParts, ends) })
	repartitionSentinels(e, reParts)
	got := out.untilSentinels(reParts)
	in.check(t, got)
	const copies = 3
	drops.until("every copy but the forwarded one", func(rs []outRec) bool { return len(rs) >= len(in.ids)*(copies-1) })
	h.stop()
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
	input := map[string]*kgo.Record{}
	for _, r := range in.recs {
		input[string(r.Value)] = r
	}
	forwarded := map[string]bool{}
	for _, r := range got {
		forwarded[r.Value] = true
	}
	seen := map[string]int{}
	for _, d := range drops.drained(e, dropTopic, reParts) {
		seen[d.Value]++
		r := input[d.Value]
		switch {
		case r == nil || forwarded[d.Value]:
			t.Errorf("drop %q: not a duplicate input record", d.Value)
		case d.Headers[HeaderSourceTopic] != inTopic || d.SrcPart != r.Partition || d.SrcOffset != r.Offset:
			t.Errorf("drop %q: source %s/%d/%d, want %s/%d/%d", d.Value, d.Headers[HeaderSourceTopic], d.SrcPart, d.SrcOffset, inTopic, r.Partition, r.Offset)
		case d.Headers[partition.HeaderRepartition] == "" || d.Headers[partition.HeaderDropReason] != partition.DropReasonDuplicate:
			t.Errorf("drop %q: headers %v, want the repartition header and the drop reason", d.Value, d.Headers)
		}
	}
	for v, n := range seen {
		if n > 1 {
			t.Errorf("drop %q written %d times", v, n)
		}
	}
	if len(seen) != len(in.ids)*(copies-1) {
		t.Errorf("%d drops, want %d (every copy of every id but the forwarded one)", len(seen), len(in.ids)*(copies-1))
	}
}
