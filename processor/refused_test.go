package processor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/internal/testkit"
)

const dlqTopic = "events-dlq"

// lockedBuffer is a log sink safe for the processor's goroutines.
type lockedBuffer struct{ testkit.SyncBuffer }

// lines returns the logged lines containing every one of parts.
func (l *lockedBuffer) lines(parts ...string) []string {
	var got []string
	for _, line := range strings.Split(l.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all && line != "" {
			got = append(got, line)
		}
	}
	return got
}

func setTopicMaxMessageBytes(t *testing.T, e *testEnv, topic string, v int) {
	t.Helper()
	testkit.SetTopicConfig(t, e.brokers[0], topic, "max.message.bytes", fmt.Sprint(v))
}

// readTopic reads every record of topic until want are there (or 20s).
func readTopic(t *testing.T, e *testEnv, topic string, want int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, r) })
		cancel()
	}
	return got
}

// refusedCase is a run with a record too large for the output: records
// before it, the big one on partition 0, records after it and sentinels.
type refusedCase struct {
	e     *testEnv
	o     Options
	out   *collector
	logs  *lockedBuffer
	big   *kgo.Record
	bigAt int64 // its offset on partition 0
	keys  []string
}

const refusedParts = 2

// newRefusedCase starts a stage on an output topic with max.message.bytes
// outLimit (0: the broker default) and, when dlq >= 0, a dead-letter topic
// with max.message.bytes dlq (0: default).
func newRefusedCase(t *testing.T, name string, outLimit, dlq int) *refusedCase {
	var extra []kfake.Opt
	if dlq >= 0 {
		extra = append(extra, kfake.SeedTopics(1, dlqTopic))
	}
	e := newTestEnv(t, refusedParts, refusedParts, extra...)
	if outLimit > 0 {
		setTopicMaxMessageBytes(t, e, outTopic, outLimit)
	}
	if dlq > 0 {
		setTopicMaxMessageBytes(t, e, dlqTopic, dlq)
	}
	o := e.storedOptions(t, name)
	if dlq >= 0 {
		o.DeadLetterTopic = dlqTopic
	}
	logs := &lockedBuffer{}
	o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return &refusedCase{e: e, o: o, out: e.collect(), logs: logs}
}

// aroundBig are the 10 records written before the big one and the 10
// after it, spread over the partitions.
func aroundBig() (before, after []*kgo.Record) {
	for i := range 10 {
		k := fmt.Sprintf("before-%d", i)
		before = append(before, rec(int32(i%refusedParts), k, k, t0))
		k = fmt.Sprintf("after-%d", i)
		after = append(after, rec(int32(i%refusedParts), k, k, t0))
	}
	return before, after
}

// produce writes 10 records, the big one (value of size bytes, then
// suffix, with a header of its own) on partition 0, 10 more and the
// sentinels, and waits until every record is decided.
func (c *refusedCase) produce(t *testing.T, a *running, size int, suffix ...string) {
	before, after := aroundBig()
	c.e.produce(before...)
	c.out.until("records before the big one", func(rs []outRec) bool { return len(rs) >= len(before) })
	c.big = rec(0, "big", strings.Repeat("x", size)+strings.Join(suffix, ""), t0.Add(time.Second), kgo.RecordHeader{Key: "trace", Value: []byte("t-1")})
	c.bigAt = int64(len(before) / refusedParts)
	c.e.produce(c.big)
	c.e.produce(after...)
	c.e.produce(sentinels(refusedParts, t0)...)
	for _, r := range append(before, after...) {
		c.keys = append(c.keys, string(r.Key))
	}
	c.out.untilSentinels(refusedParts)
	in := uint64(len(before) + 1 + len(after) + refusedParts)
	// Counts are published once per tick.
	eventually(t, 10*time.Second, "every record decided and counted", func() bool {
		p := a.p.Progress()
		return p.In >= in && p.Decided() == p.In
	})
}

// check asserts the output holds every key but the big one exactly once,
// and that the commit of partition 0 passes the big record.
func (c *refusedCase) check(t *testing.T, a *running) {
	t.Helper()
	c.checkOnce(t, c.out.untilSentinels(refusedParts))
	if err := a.p.Healthy(); err != nil {
		t.Errorf("Healthy() = %v: a refused record must not stop the partition", err)
	}
	if n := a.p.Progress().Forwarded; n != uint64(len(c.keys)+refusedParts) {
		t.Errorf("forwarded %d, want %d (the refused record is not forwarded)", n, len(c.keys)+refusedParts)
	}
	c.stopPassed(t, a)
}

func (c *refusedCase) outcome(a *running, outcome string) float64 {
	return metricValue(a.p.metrics.Messages.WithLabelValues(inTopic, "0", outcome))
}

// stopPassed stops a and asserts that the commit of partition 0 passes
// the big record.
func (c *refusedCase) stopPassed(t *testing.T, a *running) {
	t.Helper()
	if err := a.stop(t); err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	if cm := committed(t, c.e, c.o.GroupID, 0); cm <= c.bigAt {
		t.Errorf("committed offset %d of partition 0 does not pass the refused record at %d", cm, c.bigAt)
	}
}

// checkOnce asserts recs hold every key but the big one exactly once, and
// the big one not at all.
func (c *refusedCase) checkOnce(t *testing.T, recs []outRec) {
	t.Helper()
	seen := map[string]int{}
	for _, r := range withoutSentinels(recs) {
		seen[r.Key]++
	}
	for _, k := range c.keys {
		if seen[k] != 1 {
			t.Errorf("key %q in the output %d times, want once", k, seen[k])
		}
	}
	if seen["big"] != 0 {
		t.Errorf("the refused record is in the output %d times", seen["big"])
	}
}

// wantOutcomes checks partition 0's dedup_messages_total by outcome.
func (c *refusedCase) wantOutcomes(t *testing.T, a *running, want map[string]float64) {
	t.Helper()
	for outcome, n := range want {
		if got := c.outcome(a, outcome); got != n {
			t.Errorf("dedup_messages_total{outcome=%s} = %v, want %v", outcome, got, n)
		}
	}
}

// started starts the stage, waits until it is ready and produces the
// case's records with a big one of size bytes (produce).
func (c *refusedCase) started(t *testing.T, size int) *running {
	t.Helper()
	a := start(t, c.o)
	a.waitReady(t)
	c.produce(t, a, size)
	return a
}

// TestRefusedRecordSkipped: without DEAD_LETTER_TOPIC a record larger than
// the output topic's max.message.bytes is checked before it is written:
// not forwarded, counted refused (outcome and output error), one warning
// naming the partition, offset, size and the setting; the records after it
// are forwarded and the commit passes it.
func TestRefusedRecordSkipped(t *testing.T) {
	c := newRefusedCase(t, "refused-skipped", 2000, -1)
	a := c.started(t, 3000)
	if n := c.outcome(a, OutcomeRefused); n != 1 {
		t.Errorf("dedup_messages_total{outcome=refused} = %v, want 1", n)
	}
	if n := metricValue(a.p.metrics.OutputErrors.WithLabelValues(OutputRefused)); n != 1 {
		t.Errorf("dedup_output_errors_total{kind=refused} = %v, want 1", n)
	}
	if a.p.Progress().Refused != 1 {
		t.Errorf("Progress().Refused = %d, want 1", a.p.Progress().Refused)
	}
	lines := c.logs.lines("level=WARN", "record refused by the output", "partition=0", "offset="+strconv.FormatInt(c.bigAt, 10),
		"max.message.bytes=2000 of topic "+outTopic)
	if len(lines) != 1 {
		t.Errorf("want one warning naming partition 0, offset %d and max.message.bytes; log:\n%s", c.bigAt, c.logs)
	} else if !strings.Contains(lines[0], " bytes=31") || !strings.Contains(lines[0], "topic="+inTopic) {
		t.Errorf("warning does not name the size and input topic: %s", lines[0])
	}
	c.check(t, a)
}

// TestRefusedRecordBatchBytes: PRODUCE_BATCH_BYTES below the topic's
// limit is the setting the warning names.
func TestRefusedRecordBatchBytes(t *testing.T) {
	c := newRefusedCase(t, "refused-batch-bytes", 0, -1)
	c.o.BatchBytes = 2500
	a := c.started(t, 3000)
	if len(c.logs.lines("record refused by the output", "PRODUCE_BATCH_BYTES=2500")) != 1 {
		t.Errorf("want one warning naming PRODUCE_BATCH_BYTES=2500; log:\n%s", c.logs)
	}
	c.check(t, a)
}

// TestRefusedRecordDeadLettered: with DEAD_LETTER_TOPIC the refused record
// lands there with its key, value, timestamp and headers, the source
// headers and a dedup-error header naming the size, the limit and the
// setting; counted dead_lettered, never forwarded.
func TestRefusedRecordDeadLettered(t *testing.T) {
	c := newRefusedCase(t, "refused-dlq", 2000, 0)
	a := c.started(t, 3000)
	dl := readTopic(t, c.e, dlqTopic, 1)
	if len(dl) != 1 {
		t.Fatalf("%d records in the dead-letter topic, want 1", len(dl))
	}
	r := dl[0]
	if string(r.Key) != "big" || !bytes.Equal(r.Value, c.big.Value) || !r.Timestamp.Equal(c.big.Timestamp) {
		t.Errorf("dead-lettered record key %q, %d value bytes, time %v; want the input's", r.Key, len(r.Value), r.Timestamp)
	}
	h := map[string]string{}
	for _, x := range r.Headers {
		h[x.Key] = string(x.Value)
	}
	want := map[string]string{"trace": "t-1", HeaderSourceTopic: inTopic, HeaderSourcePartition: "0",
		HeaderSourceOffset: strconv.FormatInt(c.bigAt, 10)}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("header %s = %q, want %q", k, h[k], v)
		}
	}
	if e := h[HeaderError]; !strings.Contains(e, "exceeds output limit 1939") || !strings.Contains(e, "max.message.bytes=2000 of topic "+outTopic) {
		t.Errorf("dedup-error = %q, want the size, the limit and the setting", e)
	}
	c.wantOutcomes(t, a, map[string]float64{OutcomeDeadLettered: 1, OutcomeRefused: 0})
	c.check(t, a)
}

// TestDeadLetterRefusesToo: a record too large for the dead-letter topic
// as well is counted refused and logged, and the partition goes on.
func TestDeadLetterRefusesToo(t *testing.T) {
	c := newRefusedCase(t, "refused-dlq-too", 2000, 2500)
	a := c.started(t, 3000)
	c.wantOutcomes(t, a, map[string]float64{OutcomeRefused: 1, OutcomeDeadLettered: 0})
	if len(c.logs.lines("level=WARN", "dead-letter topic", "offset="+strconv.FormatInt(c.bigAt, 10), dlqTopic)) != 1 {
		t.Errorf("want one warning naming the dead-letter topic's refusal; log:\n%s", c.logs)
	}
	// The partition went on only after the dead-letter write settled.
	if n := endOffset(t, c.e, dlqTopic, 0); n != 0 {
		t.Errorf("dead-letter topic end offset %d, want 0 (nothing written)", n)
	}
	c.check(t, a)
}

// TestRefusedLimitLoweredAtRuntime: the output topic's max.message.bytes
// is lowered while the stage runs, so the check (made with the limit read
// at the generation's start) lets the big record through and the broker
// refuses it. The stage restores the partition with the limit read again,
// and the record goes to the dead-letter topic; everything else reaches
// the output exactly once, and the partition is not stopped.
func TestRefusedLimitLoweredAtRuntime(t *testing.T) {
	c := newRefusedCase(t, "refused-lowered", 0, 0)
	a := start(t, c.o)
	a.waitReady(t)
	setTopicMaxMessageBytes(t, c.e, outTopic, 2000)
	c.produce(t, a, 3000)
	c.out.untilSentinels(refusedParts)
	if dl := readTopic(t, c.e, dlqTopic, 1); len(dl) != 1 || string(dl[0].Key) != "big" {
		t.Fatalf("dead-letter topic holds %d records, want the big one", len(dl))
	}
	if n := metricValue(a.p.metrics.Stalled); n != 0 {
		t.Errorf("dedup_partitions_stalled = %v, want 0", n)
	}
	if n := metricValue(a.p.metrics.OutputErrors.WithLabelValues(OutputRefused)); n < 2 {
		t.Errorf("dedup_output_errors_total{kind=refused} = %v, want the broker's refusal and the check's", n)
	}
	eventually(t, 10*time.Second, "recovered", func() bool { return a.p.Healthy() == nil })
	// In input order on each output partition: no batch after the refused
	// one landed ahead of the records written again.
	last := map[int32]int64{}
	for _, r := range c.out.recs {
		if prev, ok := last[r.Partition]; ok && r.SrcOffset <= prev {
			t.Errorf("output partition %d: source offset %d after %d (%s): out of input order", r.Partition, r.SrcOffset, prev, r.Key)
		}
		last[r.Partition] = r.SrcOffset
	}
	c.checkOnce(t, c.out.recs)
	c.stopPassed(t, a)
}

// TestDeadLetterTopicMissing: a missing dead-letter topic is reported like
// a missing output topic: not ready, named, its gauge at 1; the stage
// starts once it exists.
func TestDeadLetterTopicMissing(t *testing.T) {
	e := newTestEnv(t, 1, 1)
	o := e.options("dlq-missing")
	o.DeadLetterTopic = dlqTopic
	a := start(t, o)
	eventually(t, 10*time.Second, "readiness naming the dead-letter topic", func() bool {
		err := a.p.Readiness()
		return errors.Is(err, ErrTopicMissing) && strings.Contains(err.Error(), dlqTopic)
	})
	if n := metricValue(a.p.metrics.Missing.WithLabelValues(dlqTopic)); n != 1 {
		t.Errorf("dedup_topic_missing{topic=%s} = %v, want 1", dlqTopic, n)
	}
	if _, err := kgoAdminCreate(e, dlqTopic); err != nil {
		t.Fatal(err)
	}
	a.waitReady(t)
	if n := metricValue(a.p.metrics.Missing.WithLabelValues(dlqTopic)); n != 0 {
		t.Errorf("dedup_topic_missing{topic=%s} = %v after creation, want 0", dlqTopic, n)
	}
}

// endOffset is the end offset of topic's partition.
func endOffset(t *testing.T, e *testEnv, topic string, partition int32) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := req.RequestWith(ctx, e.prod)
	if err != nil || len(res.Topics) != 1 || len(res.Topics[0].Partitions) != 1 {
		t.Fatalf("list offsets of %s/%d: %v", topic, partition, err)
	}
	p := res.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		t.Fatalf("list offsets of %s/%d: %v", topic, partition, err)
	}
	return p.Offset
}

func kgoAdminCreate(e *testEnv, topic string) (*kmsg.CreateTopicsResponse, error) {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := req.RequestWith(ctx, e.prod)
	if err != nil {
		return nil, err
	}
	for _, t := range res.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// TestRecordRefusedInvalid: the broker refuses, as INVALID_RECORD, every
// produce request holding one particular record, which the size check
// cannot know. The batch that held it fails; the partition is restored and
// writes its next outputs alone, so the refusal names the record, which
// goes to the dead-letter topic with the broker's answer in dedup-error.
// Every other record is in the output once, the partition is not stopped,
// and its commit passes the record.
func TestRecordRefusedInvalid(t *testing.T) {
	const marker = "refuse-me-as-invalid"
	c := newRefusedCase(t, "refused-invalid", 0, 0)
	c.e.cluster.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.e.cluster.KeepControl()
		req := kr.(*kmsg.ProduceRequest)
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				if rt.Topic == outTopic && bytes.Contains(rp.Records, []byte(marker)) {
					resp, _ := errorAnswer(kerr.InvalidRecord.Code)(req)
					return resp, nil, true
				}
			}
		}
		return nil, nil, false
	})
	a := start(t, c.o)
	a.waitReady(t)
	c.produce(t, a, 0, marker)
	dl := readTopic(t, c.e, dlqTopic, 1)
	if len(dl) != 1 || string(dl[0].Key) != "big" {
		t.Fatalf("dead-letter topic holds %d records, want the refused one", len(dl))
	}
	h := map[string]string{}
	for _, x := range dl[0].Headers {
		h[x.Key] = string(x.Value)
	}
	if e := h[HeaderError]; !strings.Contains(e, "output refused the record") || !strings.Contains(e, "Invalid Record") {
		t.Errorf("dedup-error = %q, want the broker's refusal", e)
	}
	if h[HeaderSourceOffset] != strconv.FormatInt(c.bigAt, 10) {
		t.Errorf("dead-letter source offset %q, want %d", h[HeaderSourceOffset], c.bigAt)
	}
	// Replays after the failure are read again: wait for them to be counted.
	eventually(t, 10*time.Second, "the dead-lettered record counted", func() bool { return c.outcome(a, OutcomeDeadLettered) >= 1 })
	eventually(t, 10*time.Second, "recovered", func() bool { return a.p.Healthy() == nil })
	if n := c.outcome(a, OutcomeDeadLettered); n != 1 {
		t.Errorf("dedup_messages_total{outcome=dead_lettered} = %v, want 1", n)
	}
	if n := metricValue(a.p.metrics.Stalled); n != 0 {
		t.Errorf("dedup_partitions_stalled = %v, want 0", n)
	}
	c.checkOnce(t, c.out.recs)
	c.stopPassed(t, a)
}

// TestDeadLetterWaitedForBeforeCommit: the dead-letter write of a refused
// record is held by the broker. Meanwhile the other partition goes on and
// commits, but partition 0 commits nothing past the refused record; once
// the write is acknowledged partition 0 goes on and its commit passes it.
func TestDeadLetterWaitedForBeforeCommit(t *testing.T) {
	c := newRefusedCase(t, "refused-dlq-held", 2000, 0)
	release := make(chan struct{})
	var held atomic.Bool
	c.e.cluster.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.e.cluster.KeepControl()
		req := kr.(*kmsg.ProduceRequest)
		if len(req.Topics) > 0 && req.Topics[0].Topic == dlqTopic && held.CompareAndSwap(false, true) {
			c.e.cluster.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	a := start(t, c.o)
	a.waitReady(t)
	before, after := aroundBig()
	c.e.produce(before...)
	c.out.until("records before the big one", func(rs []outRec) bool { return len(rs) >= len(before) })
	bigAt := int64(len(before) / refusedParts)
	c.e.produce(rec(0, "big", strings.Repeat("x", 3000), t0))
	c.e.produce(after...)
	c.e.produce(sentinels(refusedParts, t0)...)

	c.out.untilValue(sentinelValue(1))
	end1 := int64(len(before)/refusedParts + len(after)/refusedParts + 1)
	eventually(t, 10*time.Second, "partition 1 committed to its end", func() bool { return committed(t, c.e, c.o.GroupID, 1) == end1 })
	if !held.Load() {
		t.Fatal("the dead-letter write never reached the broker")
	}
	if cm := committed(t, c.e, c.o.GroupID, 0); cm > bigAt {
		t.Fatalf("partition 0 committed %d while the dead-letter write of offset %d is unacknowledged", cm, bigAt)
	}
	for _, r := range c.out.recs {
		if r.SrcPart == 0 && r.SrcOffset > bigAt {
			t.Fatalf("partition 0 forwarded offset %d past the unacknowledged dead-letter write at %d", r.SrcOffset, bigAt)
		}
	}

	close(release)
	c.out.untilValue(sentinelValue(0))
	if dl := readTopic(t, c.e, dlqTopic, 1); len(dl) != 1 || string(dl[0].Key) != "big" {
		t.Fatalf("dead-letter topic holds %d records, want the big one", len(dl))
	}
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	if cm := committed(t, c.e, c.o.GroupID, 0); cm <= bigAt {
		t.Errorf("committed offset %d of partition 0 does not pass the dead-lettered record at %d", cm, bigAt)
	}
}

// TestKeylessToCompactedOutput: the output topic is compacted, where a
// broker refuses a record without a key. Such a record (unkeyed input, its
// Kafka key null) is refused before it is written: it goes to the
// dead-letter topic with why, is counted dead_lettered and never
// forwarded or unkeyed, and the records around it land once.
func TestKeylessToCompactedOutput(t *testing.T) {
	c := newRefusedCase(t, "refused-keyless", 0, 0)
	testkit.SetTopicConfig(t, c.e.brokers[0], outTopic, "cleanup.policy", "compact")
	a := start(t, c.o)
	a.waitReady(t)
	var before, after []*kgo.Record
	for i := range 10 {
		k := fmt.Sprintf("before-%d", i)
		before = append(before, rec(int32(i%refusedParts), k, k, t0))
		k = fmt.Sprintf("after-%d", i)
		after = append(after, rec(int32(i%refusedParts), k, k, t0))
		c.keys = append(c.keys, string(before[i].Key), string(after[i].Key))
	}
	c.e.produce(before...)
	keyless := &kgo.Record{Partition: 0, Value: []byte("no key"), Timestamp: t0}
	c.e.produce(keyless)
	c.e.produce(after...)
	c.e.produce(sentinels(refusedParts, t0)...)
	c.out.untilSentinels(refusedParts)
	in := uint64(len(before) + 1 + len(after) + refusedParts)
	eventually(t, 10*time.Second, "every record decided and counted", func() bool {
		p := a.p.Progress()
		return p.In >= in && p.Decided() == p.In
	})
	if n := c.outcome(a, OutcomeDeadLettered); n != 1 {
		t.Errorf("dedup_messages_total{outcome=dead_lettered} = %v, want 1", n)
	}
	dl := readTopic(t, c.e, dlqTopic, 1)
	if len(dl) != 1 || dl[0].Key != nil || string(dl[0].Value) != "no key" {
		t.Fatalf("dead-letter topic holds %v, want the keyless record", dl)
	}
	var why string
	for _, h := range dl[0].Headers {
		if h.Key == HeaderError {
			why = string(h.Value)
		}
	}
	if !strings.Contains(why, "without a key") || !strings.Contains(why, "cleanup.policy=compact of topic "+outTopic) {
		t.Errorf("dedup-error = %q, want it to name the compacted output", why)
	}
	if n := c.outcome(a, OutcomeUnkeyed); n != 0 {
		t.Errorf("dedup_messages_total{outcome=unkeyed} = %v, want 0: the record was not written", n)
	}
	for _, r := range withoutSentinels(c.out.recs) {
		if r.Key == "" {
			t.Errorf("a record without a key reached the compacted output: %+v", r)
		}
	}
	c.check(t, a)
}
