package processor

import (
	"dedup/internal/testkit"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTruncatedAtRuntime: the input partition's log is replaced under a
// running stage by a shorter one, as an unclean leader election truncates
// a log, without the topic ever going missing for the stage (deleted and
// created again while its metadata requests are held). kafka-go's reader,
// asked for offset 10 of a log ending at 0, would wait until the log passed
// 10 and never read what was written below it. The worker reads on from the
// new end at once, within the same generation: the truncation is named and
// counted once, and the records produced to the new log are forwarded once.
// Offsets 10, 20 and 30 stand for different amounts of old log.
func TestTruncatedAtRuntime(t *testing.T) {
	for _, old := range []int{10, 20, 30} {
		t.Run(fmt.Sprintf("old-%d", old), func(t *testing.T) { testTruncatedAtRuntime(t, old) })
	}
}

func testTruncatedAtRuntime(t *testing.T, old int) {
	e := newTestEnv(t, 1, 1)
	out := e.collect()
	o, buf := e.loggedOptions(t, "truncated-runtime")
	// Metadata requests wait while the topic is swapped, so that neither
	// the cluster watch nor the group's partition watch sees it missing.
	metadata := holdRequests(t, e, kmsg.Metadata.Int16(), func(kmsg.Request) bool { return true })

	r := start(t, o)
	r.waitReady(t)
	e.produceNumbered(0, old)
	out.untilValue(fmt.Sprintf("v-%03d", old-1))
	epoch := e.cluster.GroupInfo(o.GroupID).Epoch

	e.recreateUnseen(t, metadata, inTopic)

	truncations := o.Metrics.InputTruncations.WithLabelValues(inTopic, "0")
	defer func() {
		if t.Failed() {
			t.Log(buf.String())
		}
	}()
	eventually(t, 30*time.Second, "the truncation counted", func() bool { return metricValue(truncations) >= 1 })
	// The new log: offsets 0-4, keys never seen (by a producer that
	// forgets the old topic's ID).
	e.prod.PurgeTopicsFromClient(inTopic)
	e.produceNumbered(old, old+5)
	recs := out.untilValue(fmt.Sprintf("v-%03d", old+4))
	checkForwardedOnce(t, recs, span(0, old+5))

	checkCountedOnce(t, truncations, buf.String(), "input truncated",
		"partition=0", fmt.Sprintf("expected_offset=%d", old), "end_offset=0", `at="reader: fetch past the log end"`)
	if got := e.cluster.GroupInfo(o.GroupID).Epoch; got != epoch {
		t.Errorf("group generation %d -> %d: the partition restarted instead of reading on", epoch, got)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestOutputTruncatedWrittenPast: the output partition's log is replaced
// under a running stage (the topic deleted and created again unseen, as an
// unclean leader election truncates a log), and another producer writes to
// it, first below the offsets the stage had written, later past them. The
// stage writes nothing meanwhile (no input), so no produce of its own can
// find the truncation; the end offsets it reads every few seconds do, before
// the log is written past: counted and logged once. Its next output lands
// on the new log, and is not counted again. Old logs of 10, 20 and 30
// records.
func TestOutputTruncatedWrittenPast(t *testing.T) {
	for _, old := range []int{10, 20, 30} {
		t.Run(fmt.Sprintf("old-%d", old), func(t *testing.T) { testOutputTruncatedWrittenPast(t, old) })
	}
}

func testOutputTruncatedWrittenPast(t *testing.T, old int) {
	e := newTestEnv(t, 1, 1)
	o, buf := e.loggedOptions(t, "output-truncated")
	metadata := holdRequests(t, e, kmsg.Metadata.Int16(), func(kmsg.Request) bool { return true })
	r := start(t, o)
	r.waitReady(t)
	e.produceNumbered(0, old)
	client := []kgo.Opt{kgo.SeedBrokers(e.brokers...)}
	testkit.ConsumeN(t, client, outTopic, old)

	e.recreateUnseen(t, metadata, outTopic)
	foreign := func(n int) { produceForeign(t, client, outTopic, n) }
	foreign(old / 2) // below the stage's last output, at old-1

	truncations := o.Metrics.OutputTruncations.WithLabelValues(outTopic, "0")
	eventually(t, 30*time.Second, "the output truncation counted", func() bool { return metricValue(truncations) >= 1 })
	foreign(old) // past it now
	e.produceNumbered(old, old+1)
	recs := testkit.ConsumeN(t, client, outTopic, old/2+old+1)
	if last := recs[len(recs)-1]; string(last.Value) != fmt.Sprintf("v-%03d", old) {
		t.Errorf("last output %q at %d, want the new input's v-%03d", last.Value, last.Offset, old)
	}
	checkCountedOnce(t, truncations, buf.String(), "output partition truncated",
		"partition=0", fmt.Sprintf("end_offset=%d", old/2), fmt.Sprintf("offsets_lost_at_least=%d", old/2))
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// produceForeign writes n records to topic as another producer than the
// stage would.
func produceForeign(t *testing.T, client []kgo.Opt, topic string, n int) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "foreign-%d", i), Value: []byte("f")}
	}
	testkit.Produce(t, client, recs...)
}

// recreateUnseen deletes topic and creates it again, with one partition,
// while metadata holds every metadata request: the stage never sees the
// topic missing, as when an unclean leader election truncates its log.
func (e *testEnv) recreateUnseen(t *testing.T, metadata *holder, topic string) {
	t.Helper()
	metadata.on.Store(true)
	if err := e.cluster.DeleteTopic(topic); err != nil {
		t.Fatal(err)
	}
	if err := e.cluster.CreateTopic(topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	metadata.let()
}

// checkCountedOnce asserts that c counted one truncation and that log has
// exactly one error line saying msg, holding every part.
func checkCountedOnce(t *testing.T, c prometheus.Counter, log, msg string, parts ...string) {
	t.Helper()
	if got := metricValue(c); got != 1 {
		t.Errorf("counted %v truncations, want 1", got)
	}
	var lines []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=ERROR") && strings.Contains(l, msg) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d %q error lines, want 1:\n%s", len(lines), msg, strings.Join(lines, "\n"))
	}
	for _, part := range parts {
		if !strings.Contains(lines[0], part) {
			t.Errorf("%q line lacks %q: %s", msg, part, lines[0])
		}
	}
}

// TestDropTopicTruncatedWrittenPast is TestOutputTruncatedWrittenPast for
// DROPPED_TOPIC: its partition's log replaced under a running stage and
// written below, then past, the drops the stage had written, while the
// stage writes nothing. The end offsets read every few seconds find it:
// counted (dedup_output_truncations_total of the drop topic) and logged
// once; the next drop lands on the new log and is not counted again.
func TestDropTopicTruncatedWrittenPast(t *testing.T) {
	for _, old := range []int{10, 20, 30} {
		t.Run(fmt.Sprintf("old-%d", old), func(t *testing.T) { testDropTopicTruncatedWrittenPast(t, old) })
	}
}

func testDropTopicTruncatedWrittenPast(t *testing.T, old int) {
	e, o := droppedEnv(t, 1, "drop-truncated")
	log, buf := capturedLogger()
	o.Logger = log
	metadata := holdRequests(t, e, kmsg.Metadata.Int16(), func(kmsg.Request) bool { return true })
	r := start(t, o)
	r.waitReady(t)
	// One key, old+1 times: one output and old drops.
	dup := func(i int) {
		e.produce(rec(0, "the-key", fmt.Sprintf("d-%03d", i), t0.Add(time.Duration(i)*time.Millisecond)))
	}
	for i := range old + 1 {
		dup(i)
	}
	client := []kgo.Opt{kgo.SeedBrokers(e.brokers...)}
	testkit.ConsumeN(t, client, dropTopic, old)

	e.recreateUnseen(t, metadata, dropTopic)
	foreign := func(n int) { produceForeign(t, client, dropTopic, n) }
	foreign(old / 2) // below the stage's last drop, at old-1

	truncations := o.Metrics.OutputTruncations.WithLabelValues(dropTopic, "0")
	eventually(t, 30*time.Second, "the drop topic's truncation counted", func() bool { return metricValue(truncations) >= 1 })
	foreign(old) // past it now
	dup(old + 1)
	recs := testkit.ConsumeN(t, client, dropTopic, old/2+old+1)
	if last := recs[len(recs)-1]; string(last.Value) != fmt.Sprintf("d-%03d", old+1) {
		t.Errorf("last drop %q at %d, want the new input's d-%03d", last.Value, last.Offset, old+1)
	}
	checkCountedOnce(t, truncations, buf.String(), "drop topic partition truncated",
		"partition=0", fmt.Sprintf("end_offset=%d", old/2), fmt.Sprintf("offsets_lost_at_least=%d", old/2))
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
