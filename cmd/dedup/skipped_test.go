package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// deleteRecords moves the log start of topic's partition p to offset, as
// retention or an operator's DeleteRecords does.
func deleteRecords(t *testing.T, opts []kgo.Opt, topic string, p int32, offset int64) {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 10_000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = p, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("delete records: %v", err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 || rp.LowWatermark != offset {
				t.Fatalf("delete records of %s/%d to %d: error code %d, log start %d", topic, rp.Partition, offset, rp.ErrorCode, rp.LowWatermark)
			}
		}
	}
}

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
	cluster := newTestCluster(t)
	addr := cluster.ListenAddrs()[0]
	client := []kgo.Opt{kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner())}

	bin, env := stageAgainst(t, cluster, nil)
	var before []*kgo.Record // k000-k009: offsets 0-4 of each partition
	for i := range 10 {
		before = append(before, onPartition(int32(i%2), fmt.Sprintf("k%03d", i), fmt.Sprintf("before-%d", i)))
	}
	produce(t, client, before...)
	waitCommitted(t, cluster, 10)
	if code := bin.stop(t, 30*time.Second); code != exitOK {
		t.Fatalf("exit %d after SIGTERM, want 0", code)
	}

	// While it is stopped: partition 0 gets n000-n009 twice (offsets
	// 5-24), partition 1 m000-m004 and a copy of k001 (offsets 5-10).
	var down []*kgo.Record
	for c := range 2 {
		for i := range 10 {
			down = append(down, onPartition(0, fmt.Sprintf("n%03d", i), fmt.Sprintf("n%03d-copy%d", i, c)))
		}
	}
	for i := range 5 {
		down = append(down, onPartition(1, fmt.Sprintf("m%03d", i), fmt.Sprintf("m%03d", i)))
	}
	down = append(down, onPartition(1, "k001", "k001-again"))
	produce(t, client, down...)
	// Offsets 5-9 of partition 0 (n000-n004's first copies) go.
	deleteRecords(t, client, "events", 0, 10)

	bin = startBinary(t, env)
	metrics := env["METRICS_ADDR"]
	waitReady(t, bin, metrics)
	waitLog(t, bin, "input skipped")
	waitCommitted(t, cluster, 25+11)
	waitMetric(t, metrics, "dedup_input_skipped_offsets_total", 5, `partition="0"`)
	waitMetric(t, metrics, "dedup_input_skipped_offsets_total", 0, `partition="1"`)

	lines := logLines(bin.stderr.String(), "input skipped")
	if len(lines) != 1 {
		t.Fatalf("%d lines say input was skipped, want 1:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, part := range []string{"level=WARN", "topic=events", "partition=0", "expected_offset=5",
		"log_start_offset=10", "skipped_offsets=5"} {
		if !strings.Contains(lines[0], part) {
			t.Errorf("the skipped-input line lacks %s: %s", part, lines[0])
		}
	}

	// k000-k009 from before, n000-n009 (n000-n004 with their second
	// copy), m000-m004; k001 again is a duplicate.
	want := map[string]string{}
	for i := range 10 {
		want[fmt.Sprintf("k%03d", i)] = fmt.Sprintf("before-%d", i)
		copyN := 0
		if i < 5 {
			copyN = 1 // the first copy was deleted
		}
		want[fmt.Sprintf("n%03d", i)] = fmt.Sprintf("n%03d-copy%d", i, copyN)
	}
	for i := range 5 {
		want[fmt.Sprintf("m%03d", i)] = fmt.Sprintf("m%03d", i)
	}
	out := consumeN(t, []kgo.Opt{kgo.SeedBrokers(addr)}, "events-deduped", len(want))
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
	if n := endOffsets(t, addr, "events-deduped", 2); n != int64(len(want)) {
		t.Errorf("output holds %d records, want %d", n, len(want))
	}
	if code := bin.stop(t, 30*time.Second); code != exitOK {
		t.Errorf("exit %d after SIGTERM, want 0", code)
	}
}
