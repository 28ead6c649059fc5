package main

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/internal/testkit"
)

// onPartition is a record for partition p of the input.
func onPartition(p int32, key, value string) *kgo.Record {
	return &kgo.Record{Topic: "events", Partition: p, Key: []byte(key), Value: []byte(value)}
}

// TestSkippedInputAtRestart: input deleted while the stage is stopped,
// from below the offset it resumes at on partition 0. The restarted binary
// names the skip in one warning (partition, expected offset, log start,
// offsets skipped), counts it in dedup_input_skipped_offsets_total, and
// forwards every first occurrence among the records from the log start on
// exactly once: keys whose first copy was deleted are forwarded with their
// next copy, keys seen before the stop stay duplicates.
func TestSkippedInputAtRestart(t *testing.T) {
	cluster := testkit.Cluster(t, 2)
	addr := cluster.ListenAddrs()[0]
	client := []kgo.Opt{kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner())}

	bin, env := stageAgainst(t, cluster, nil)
	testkit.Produce(t, client, skippedBefore()...)
	waitCommitted(t, cluster, 10)
	bin.stopOK(t, "")

	testkit.Produce(t, client, skippedInput()...)
	// Offsets 5-9 of partition 0 (n000-n004's first copies) go.
	testkit.DeleteRecords(t, cluster.ListenAddrs()[0], "events", 0, 10)

	bin = startBinary(t, env)
	metrics := env["METRICS_ADDR"]
	waitReady(t, bin, metrics)
	waitLog(t, bin, "input skipped")
	waitCommitted(t, cluster, 25+11)
	waitMetric(t, metrics, "dedup_input_skipped_offsets_total", 5, `partition="0"`)
	waitMetric(t, metrics, "dedup_input_skipped_offsets_total", 0, `partition="1"`)

	checkSkipLine(t, bin.stderr.String(), `at="start from checkpoint"`)
	checkOutput(t, addr, skippedWant())
	bin.stopOK(t, "")
}

// skippedWant is the output of both skipped-input tests, key to value:
// k000-k009 from before, n000-n009 (n000-n004 with their second copy, the
// first was deleted), m000-m004; k001 again is a duplicate.
func skippedWant() map[string]string {
	want := map[string]string{}
	for i := range 10 {
		want[fmt.Sprintf("k%03d", i)] = fmt.Sprintf("before-%d", i)
		copyN := 0
		if i < 5 {
			copyN = 1
		}
		want[fmt.Sprintf("n%03d", i)] = fmt.Sprintf("n%03d-copy%d", i, copyN)
	}
	for i := range 5 {
		want[fmt.Sprintf("m%03d", i)] = fmt.Sprintf("m%03d", i)
	}
	return want
}

// skippedInput is what both skipped-input tests write while the stage
// cannot read it: partition 0 gets n000-n009 twice (offsets 5-24),
// partition 1 m000-m004 and a copy of k001 (offsets 5-10).
func skippedInput() []*kgo.Record {
	var recs []*kgo.Record
	for c := range 2 {
		for i := range 10 {
			recs = append(recs, onPartition(0, fmt.Sprintf("n%03d", i), fmt.Sprintf("n%03d-copy%d", i, c)))
		}
	}
	for i := range 5 {
		recs = append(recs, onPartition(1, fmt.Sprintf("m%03d", i), fmt.Sprintf("m%03d", i)))
	}
	return append(recs, onPartition(1, "k001", "k001-again"))
}

// skippedBefore is k000-k009, offsets 0-4 of each partition.
func skippedBefore() []*kgo.Record {
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, onPartition(int32(i%2), fmt.Sprintf("k%03d", i), fmt.Sprintf("before-%d", i)))
	}
	return recs
}

// checkOutput asserts the output holds exactly want, each key once.
func checkOutput(t *testing.T, addr string, want map[string]string) {
	t.Helper()
	out := testkit.ConsumeN(t, []kgo.Opt{kgo.SeedBrokers(addr)}, "events-deduped", len(want))
	got := map[string][]string{}
	for _, r := range out {
		got[string(r.Key)] = append(got[string(r.Key)], string(r.Value))
	}
	for k, v := range want {
		if len(got[k]) != 1 || got[k][0] != v {
			t.Errorf("key %s forwarded as %q, want once as %q", k, got[k], v)
		}
	}
	for k, vs := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("key %s forwarded as %q, want never", k, vs)
		}
	}
	if n := testkit.EndOffsets(t, addr, "events-deduped", 2); n != int64(len(want)) {
		t.Errorf("output holds %d records, want %d", n, len(want))
	}
}

// checkSkipLine asserts the log holds one skipped-input warning, with
// every one of parts.
func checkSkipLine(t *testing.T, log string, parts ...string) {
	t.Helper()
	lines := logLines(log, "input skipped")
	if len(lines) != 1 {
		t.Fatalf("%d lines say input was skipped, want 1:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, part := range append([]string{"level=WARN", "topic=events", "partition=0", "expected_offset=5",
		"log_start_offset=10", "skipped_offsets=5"}, parts...) {
		if !strings.Contains(lines[0], part) {
			t.Errorf("the skipped-input line lacks %s: %s", part, lines[0])
		}
	}
}

// TestSkippedInputAtRuntime: the running binary's fetches of the input are
// held (a stage stalled or far behind) while partition 0 gets input and
// loses its first offsets to a DeleteRecords. When the fetch goes through,
// kafka-go's reader jumps to the log start: the binary names the jump in
// one warning, counts it, and forwards every first occurrence from the log
// start on exactly once.
func TestSkippedInputAtRuntime(t *testing.T) {
	cluster := testkit.Cluster(t, 2)
	addr := cluster.ListenAddrs()[0]
	client := []kgo.Opt{kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	var hold atomic.Bool
	held := make(chan struct{}, 1)
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // before the cluster closes
	cluster.ControlKey(int16(kmsg.Fetch), func(r kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if !hold.Load() || !fetchesPartition(r.(*kmsg.FetchRequest), "events", 0) {
			return nil, nil, false
		}
		select {
		case held <- struct{}{}:
		default:
		}
		cluster.SleepControl(func() { <-release })
		return nil, nil, false
	})

	bin, env := stageAgainst(t, cluster, nil)
	metrics := env["METRICS_ADDR"]
	testkit.Produce(t, client, skippedBefore()...)
	waitCommitted(t, cluster, 10)

	hold.Store(true)
	select {
	case <-held:
	case <-time.After(15 * time.Second):
		t.Fatal("no fetch of events/0 within 15s")
	}
	testkit.Produce(t, client, skippedInput()...)
	testkit.DeleteRecords(t, cluster.ListenAddrs()[0], "events", 0, 10)
	hold.Store(false)
	releaseOnce.Do(func() { close(release) })

	waitLog(t, bin, "input skipped")
	waitCommitted(t, cluster, 25+11)
	waitMetric(t, metrics, "dedup_input_skipped_offsets_total", 5, `partition="0"`)
	waitMetric(t, metrics, "dedup_input_skipped_offsets_total", 0, `partition="1"`)
	checkSkipLine(t, bin.stderr.String(), `at="reader: `)
	checkOutput(t, addr, skippedWant())
	bin.stopOK(t, "")
}

// fetchesPartition reports whether req fetches partition p of topic
// (kafka-go's readers send Fetch versions that name topics).
func fetchesPartition(req *kmsg.FetchRequest, topic string, p int32) bool {
	for _, t := range req.Topics {
		if t.Topic != topic {
			continue
		}
		for _, fp := range t.Partitions {
			if fp.Partition == p {
				return true
			}
		}
	}
	return false
}
