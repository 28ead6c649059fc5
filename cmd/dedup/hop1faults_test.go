package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/internal/testkit"
)

// Faults under hop 1 of a two-hop stage (REPARTITION_TOPIC, both hops in
// one process): its output, the repartition topic, created again under it;
// its input created again under it; and its input missing.

// repartitionedPartitions reads the repartition topic's n records from its
// start and returns the partitions that hold any.
func repartitionedPartitions(t *testing.T, addr string, n int) map[int32]bool {
	t.Helper()
	parts := map[int32]bool{}
	for _, r := range testkit.ConsumeN(t, []kgo.Opt{kgo.SeedBrokers(addr)}, reTopic, n) {
		parts[r.Partition] = true
	}
	return parts
}

// twoHopsThrough starts the binary with both hops and has keys keys, each
// on both input partitions, decided by both; it returns the cluster, the
// binary and its metrics address.
func twoHopsThrough(t *testing.T, keys int) (*kfake.Cluster, *binary, string) {
	t.Helper()
	cluster := testkit.Cluster(t, 2)
	bin, env := stageAgainst(t, cluster, testkit.Env{"REPARTITION_TOPIC": reTopic})
	addr := cluster.ListenAddrs()[0]
	testkit.Produce(t, manual([]kgo.Opt{kgo.SeedBrokers(addr)}), spreadDuplicates(keys, 1, 2)...)
	waitBothHopsDone(t, cluster, addr, keys)
	return cluster, bin, env["METRICS_ADDR"]
}

// TestRepartitionTopicRecreatedUnderHop1: the repartition topic deleted and
// created again under a running two-hop stage loses what hop 1 wrote and
// had acknowledged, its input committed past it. Hop 1's next acknowledged
// produce to a partition it wrote before gets a base offset at or below the
// one before: each such partition is counted in
// dedup_output_truncations_total{topic=<repartition topic>} and named at
// error with the offsets, once per input partition of hop 1 that wrote to
// it before and after (each compares its own produces), and no other is.
func TestRepartitionTopicRecreatedUnderHop1(t *testing.T) {
	const keys = 10 // 5 per input partition
	cluster, bin, metrics := twoHopsThrough(t, keys)
	addr := cluster.ListenAddrs()[0]
	client := manual([]kgo.Opt{kgo.SeedBrokers(addr)})
	before := repartitionedPartitions(t, addr, keys)

	if err := cluster.DeleteTopic(reTopic); err != nil {
		t.Fatal(err)
	}
	waitLog(t, bin, "topic missing", "topic="+reTopic)
	recreateTopic(t, cluster, bin, metrics, reTopic)
	var fresh []*kgo.Record
	for i := range keys {
		fresh = append(fresh, &kgo.Record{Topic: "events", Partition: int32(i % 2), Key: fmt.Appendf(nil, "new%03d", i), Value: []byte("v")})
	}
	testkit.Produce(t, client, fresh...)
	waitRekeyed(t, metrics, 2*keys)
	after := repartitionedPartitions(t, addr, keys)

	both := 0
	for p := range int32(2) {
		match := fmt.Sprintf(`partition="%d"`, p)
		if !before[p] || !after[p] {
			if got, err := testkit.MetricSum(metrics, "dedup_output_truncations_total", `topic="`+reTopic+`"`, match); err == nil && got != 0 {
				t.Errorf("dedup_output_truncations_total{%s} = %v, want 0: not written both before and after", match, got)
			}
			continue
		}
		both++
		lines := logLines(bin.stderr.String(), "level=ERROR", "repartition partition truncated", "topic="+reTopic,
			fmt.Sprintf(" partition=%d ", p), "input_partition=", "acknowledged_base_offset=", "offsets_lost_at_least=")
		if len(lines) < 1 || len(lines) > 2 {
			t.Errorf("%d error lines name repartition partition %d truncated, want one per input partition (1 or 2)", len(lines), p)
		}
		waitMetric(t, metrics, "dedup_output_truncations_total", float64(len(lines)), `topic="`+reTopic+`"`, match)
	}
	if both == 0 {
		t.Fatal("no repartition partition written both before and after: the test would prove nothing")
	}
	// Hop 2's output is another topic: its series say nothing of this.
	if got, err := testkit.MetricSum(metrics, "dedup_output_truncations_total", `topic="events-deduped"`); err == nil && got != 0 {
		t.Errorf("dedup_output_truncations_total{topic=events-deduped} = %v, want 0", got)
	}
	bin.stopOK(t, "")
}

// TestInputRecreatedUnderHop1: the input topic deleted and created again
// under a running two-hop stage ends below the offsets hop 1 committed.
// Hop 1 names each partition at error, counts it in
// dedup_input_truncations_total{topic=<input>} and reads on from the new
// log's end: records written there afterwards are re-keyed and forwarded
// (waiting for the log to pass the old offsets, they would not be). Before
// it sends them, hop 1 has a reset acknowledged on every repartition
// partition, and hop 2 lowers its high-water marks of the old log: the new
// log's records, their offsets at or below the marks, are forwarded once,
// not dropped as re-sends (docs/faults.md, "Input truncated").
func TestInputRecreatedUnderHop1(t *testing.T) {
	const keys = 10 // 5 per input partition
	cluster, bin, metrics := twoHopsThrough(t, keys)
	addr := cluster.ListenAddrs()[0]
	client := manual([]kgo.Opt{kgo.SeedBrokers(addr)})

	if err := cluster.DeleteTopic("events"); err != nil {
		t.Fatal(err)
	}
	if err := cluster.CreateTopic("events", 2, nil); err != nil {
		t.Fatal(err)
	}
	for p := range 2 {
		match := fmt.Sprintf(`partition="%d"`, p)
		testkit.WaitFor(t, "input truncation of partition "+match, 45*time.Second, func() (bool, error) {
			v, err := testkit.MetricSum(metrics, "dedup_input_truncations_total", `topic="events"`, match)
			return err == nil && v == 1, nil
		})
		if lines := logLines(bin.stderr.String(), "level=ERROR", "input truncated", "topic=events ", fmt.Sprintf("partition=%d ", p),
			"expected_offset=5 ", "end_offset=0"); len(lines) != 1 {
			t.Errorf("%d error lines name input partition %d truncated below offset 5 at end 0, want 1", len(lines), p)
		}
	}
	// Fewer than the old offsets: re-keyed only if hop 1 went on from the
	// end.
	var fresh []*kgo.Record
	for i := range 4 {
		fresh = append(fresh, &kgo.Record{Topic: "events", Partition: int32(i % 2), Key: fmt.Appendf(nil, "new%03d", i), Value: []byte("v")})
	}
	testkit.Produce(t, client, fresh...)
	waitRekeyed(t, metrics, keys+len(fresh))
	testkit.WaitFor(t, "hop 1 committed the new log's records", 30*time.Second, func() (bool, error) {
		var sum int64
		for _, c := range cluster.GroupInfo("dedup-repartition").Commits["events"] {
			sum += c.Offset
		}
		return sum == int64(len(fresh)), nil
	})
	// Hop 2 read hop 1's resets, one per input partition on each
	// repartition partition, ahead of the new log, and forwarded the new
	// log's records once: offsets 0 and 1 of each input partition, at or
	// below its marks of the old log.
	waitMetric(t, metrics, "dedup_repartition_control_records_total", 4, `kind="reset"`)
	testkit.WaitFor(t, "hop 2 committed the repartition topic's end", 30*time.Second, func() (bool, error) {
		end, err := testkit.SumEndOffsets(addr, reTopic, 2)
		var sum int64
		if g := cluster.GroupInfo("dedup"); g != nil {
			for _, c := range g.Commits[reTopic] {
				sum += c.Offset
			}
		}
		return err == nil && end == int64(keys+len(fresh)+4) && sum == end, err
	})
	out := testkit.ConsumeN(t, []kgo.Opt{kgo.SeedBrokers(addr)}, "events-deduped", keys+len(fresh))
	seen := map[string]int{}
	for _, r := range out {
		seen[string(r.Key)]++
	}
	for _, r := range append(spreadDuplicates(keys, 1, 2), fresh...) {
		if seen[string(r.Key)] != 1 {
			t.Errorf("key %s forwarded %d times, want once", r.Key, seen[string(r.Key)])
		}
	}
	if n := testkit.EndOffsets(t, addr, "events-deduped", 2); n != int64(keys+len(fresh)) {
		t.Errorf("%d records in the output, want %d", n, keys+len(fresh))
	}
	if lines := logLines(bin.stderr.String(), "input partition reset by the re-key hop", "input_topic=events", "input_offset=0"); len(lines) != 4 {
		t.Errorf("%d lines name a reset, want 4", len(lines))
	}
	bin.stopOK(t, "")
}

// TestBothHopsInputMissing: a process running both hops has one cluster
// watch, hop 2's, and it covers hop 1's input too. The input deleted under
// it is named once (role input), sets dedup_topic_missing{topic=<input>}
// (the repartition topic's series stays 0, role repartition), makes
// /readyz 503 naming it and leaves /healthz 200; once the input is created
// again the process is ready and says so.
func TestBothHopsInputMissing(t *testing.T) {
	cluster := testkit.Cluster(t, 2)
	bin, env := stageAgainst(t, cluster, testkit.Env{"REPARTITION_TOPIC": reTopic})
	metrics := env["METRICS_ADDR"]
	for _, topic := range []string{"events", reTopic, "events-deduped"} {
		waitMetric(t, metrics, "dedup_topic_missing", 0, fmt.Sprintf(`topic=%q`, topic))
	}

	if err := cluster.DeleteTopic("events"); err != nil {
		t.Fatal(err)
	}
	waitLog(t, bin, "topic missing", "topic=events ", "role=input")
	waitMetric(t, metrics, "dedup_topic_missing", 1, `topic="events"`)
	waitNotReadyNaming(t, metrics, "topic missing: [events]")
	waitMetric(t, metrics, "dedup_topic_missing", 0, fmt.Sprintf(`topic=%q`, reTopic))
	checkHealthy(t, metrics)

	recreateTopic(t, cluster, bin, metrics, "events")
	waitMetric(t, metrics, "dedup_topic_missing", 0, `topic="events"`)
	if n := len(logLines(bin.stderr.String(), "topic missing")); n != 1 {
		t.Errorf("%d lines say a topic is missing, want 1: one watch", n)
	}
	bin.stopOK(t, "")
}
