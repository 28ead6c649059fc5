package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/internal/testkit"
	"dedup/processor"
)

// alterMaxMessageBytes sets a topic's max.message.bytes on the broker.
func alterMaxMessageBytes(t *testing.T, client []kgo.Opt, topic, value string) {
	t.Helper()
	cl, err := kgo.NewClient(client...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "max.message.bytes", kmsg.StringPtr(value)
	r.Configs = append(r.Configs, c)
	req.Resources = append(req.Resources, r)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := req.RequestWith(ctx, cl)
	if err == nil && len(res.Resources) == 1 {
		err = kerr.ErrorForCode(res.Resources[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("alter max.message.bytes of %s: %v", topic, err)
	}
}

// manual makes a producer write each record to its Partition.
func manual(client []kgo.Opt) []kgo.Opt {
	return append(append([]kgo.Opt(nil), client...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
}

// TestRefusedRecordDeadLetteredBinary: the built binary with
// DEAD_LETTER_TOPIC, on an output topic whose max.message.bytes is 2000: a
// record of 3000 bytes lands in the dead-letter topic with its key, value
// and headers, the source headers and a dedup-error header naming the
// size, the limit and the setting; it is counted dead_lettered and as a
// refusal of the output, never as forwarded; every other first occurrence
// is in the output once, and the commit passes the refused record.
func TestRefusedRecordDeadLetteredBinary(t *testing.T) {
	cluster := testkit.Cluster(t, 2, kfake.SeedTopics(1, "events-dlq"))
	addr := cluster.ListenAddrs()[0]
	client := []kgo.Opt{kgo.SeedBrokers(addr)}
	alterMaxMessageBytes(t, client, "events-deduped", "2000")
	bin, env := stageAgainst(t, cluster, testkit.Env{"DEAD_LETTER_TOPIC": "events-dlq"})
	metrics := env["METRICS_ADDR"]

	const keys = 10
	recs := keyedWithDuplicates("events", keys, 2)
	big := &kgo.Record{Topic: "events", Partition: 0, Key: []byte("big"), Value: []byte(strings.Repeat("x", 3000)),
		Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t-1")}}}
	testkit.Produce(t, manual(client), big)
	testkit.Produce(t, client, recs...)
	waitCommitted(t, cluster, int64(len(recs)+1))

	dl := testkit.ConsumeN(t, client, "events-dlq", 1)
	r := dl[0]
	if string(r.Key) != "big" || string(r.Value) != string(big.Value) {
		t.Errorf("dead-lettered record key %q with %d value bytes, want the big record", r.Key, len(r.Value))
	}
	for name, want := range map[string]string{"trace": "t-1", processor.HeaderSourceTopic: "events", processor.HeaderSourcePartition: "0"} {
		if v, _ := testkit.HeaderValue(r, name); v != want {
			t.Errorf("dead-letter header %s = %q, want %q", name, v, want)
		}
	}
	if v, _ := testkit.HeaderValue(r, processor.HeaderError); !strings.Contains(v, "exceeds output limit 1939") ||
		!strings.Contains(v, "max.message.bytes=2000 of topic events-deduped") {
		t.Errorf("dedup-error = %q, want the size, the limit and the setting", v)
	}
	waitMetric(t, metrics, "dedup_messages_total", 1, `outcome="dead_lettered"`)
	waitMetric(t, metrics, "dedup_messages_total", keys, `outcome="forwarded"`)
	waitMetric(t, metrics, "dedup_output_errors_total", 1, `kind="refused"`)
	checkExactlyOnce(t, addr, client, keys)
	if n := testkit.EndOffsets(t, addr, "events-dlq", 1); n != 1 {
		t.Errorf("dead-letter topic holds %d records, want 1", n)
	}
	checkHealthy(t, metrics)
	bin.stopOK(t, "")
}

// TestRefusedRecordSkippedBinary: without DEAD_LETTER_TOPIC, the record is
// skipped with one warning naming the partition, offset, size and
// PRODUCE_BATCH_BYTES (smaller than the topic's limit here), and counted
// refused.
func TestRefusedRecordSkippedBinary(t *testing.T) {
	cluster := testkit.Cluster(t, 2)
	addr := cluster.ListenAddrs()[0]
	client := []kgo.Opt{kgo.SeedBrokers(addr)}
	bin, env := stageAgainst(t, cluster, testkit.Env{"PRODUCE_BATCH_BYTES": "2500"})
	metrics := env["METRICS_ADDR"]

	const keys = 10
	recs := keyedWithDuplicates("events", keys, 2)
	testkit.Produce(t, manual(client), &kgo.Record{Topic: "events", Partition: 0, Key: []byte("big"), Value: []byte(strings.Repeat("x", 3000))})
	testkit.Produce(t, client, recs...)
	waitCommitted(t, cluster, int64(len(recs)+1))
	waitMetric(t, metrics, "dedup_messages_total", 1, `outcome="refused"`)
	waitMetric(t, metrics, "dedup_output_errors_total", 1, `kind="refused"`)
	waitMetric(t, metrics, "dedup_messages_total", keys, `outcome="forwarded"`)
	lines := logLines(bin.stderr.String(), "level=WARN", "record refused by the output", "topic=events", "partition=0", "offset=0", "PRODUCE_BATCH_BYTES=2500")
	if len(lines) != 1 {
		t.Errorf("%d warnings name the refused record and PRODUCE_BATCH_BYTES, want 1; log:\n%s", len(lines), bin.stderr.String())
	}
	checkExactlyOnce(t, addr, client, keys)
	bin.stopOK(t, "")
}

// TestEmbeddedDeadLetterTopic: the embedded broker creates
// DEAD_LETTER_TOPIC, so the stage (which is not ready while a topic it
// needs is missing) becomes ready, and the topic's gauge is 0.
func TestEmbeddedDeadLetterTopic(t *testing.T) {
	env := embeddedEnv(t, testkit.Env{"DEAD_LETTER_TOPIC": "events-dlq"})
	brokerAddr, metrics := env["EMBEDDED_BROKER_ADDR"], env["METRICS_ADDR"]
	bin := startBinary(t, env)
	waitReady(t, bin, metrics)
	waitMetric(t, metrics, "dedup_topic_missing", 0, `topic="events-dlq"`)
	if n := testkit.EndOffsets(t, brokerAddr, "events-dlq", 2); n != 0 {
		t.Errorf("new dead-letter topic holds %d records", n)
	}
	bin.stopOK(t, "")
}
