package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/internal/testkit"
)

// repartitionCheckEnv starts a one-broker cluster holding topics, two
// partitions each, and returns it with the environment of a check against
// it with REPARTITION_TOPIC events-by-id.
func repartitionCheckEnv(t *testing.T, topics ...string) (*kfake.Cluster, testkit.Env) {
	t.Helper()
	cluster := testkit.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(2, topics...))
	return cluster, clusterEnv(t, cluster, testkit.Env{"REPARTITION_TOPIC": "events-by-id"})
}

// TestCheckRepartitionTopic: with REPARTITION_TOPIC, dedup check says a
// missing repartition topic will be created (warn), and fails a compacted
// one, warning about a partition count other than the output's and a
// retention shorter than a day.
func TestCheckRepartitionTopic(t *testing.T) {
	cluster, env := repartitionCheckEnv(t, "events", "events-deduped")

	var stdout, stderr bytes.Buffer
	run(context.Background(), []string{"check"}, env.Lookup, &stdout, &stderr)
	out := stdout.String()
	wantCheck(t, out, "warn", "repartition topic")
	if l := checkLine(out, "repartition topic"); !strings.Contains(l, "the stage creates it") || !strings.Contains(l, "cleanup.policy=delete") {
		t.Errorf("missing repartition topic: %q", l)
	}

	if err := cluster.CreateTopic("events-by-id", 3, map[string]string{"cleanup.policy": "compact", "retention.ms": "3600000"}); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"check"}, env.Lookup, &stdout, &stderr); code != exitFailure {
		t.Fatalf("exit %d, want 1:\n%s%s", code, &stdout, &stderr)
	}
	out = stdout.String()
	wantCheck(t, out, "warn", "repartition topic")
	wantCheck(t, out, "FAIL", "repartition cleanup.policy")
	wantCheck(t, out, "warn", "repartition retention")
	if want := "repartition cleanup.policy"; !strings.Contains(lastLine(out), want) {
		t.Errorf("verdict %q, want it to name %q", lastLine(out), want)
	}

	// The checkpoint topic mirrors what hop 2 reads, the repartition
	// topic's 3 partitions, not the input's 2.
	if err := cluster.CreateTopic("dedup-dedup-state", 2, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	run(context.Background(), []string{"check"}, env.Lookup, &stdout, &stderr)
	if l := checkLine(stdout.String(), "checkpoint topic"); !strings.HasPrefix(l, "warn ") || !strings.Contains(l, "2 partition(s), the repartition topic 3") {
		t.Errorf("checkpoint topic of the input's count: %q, want a warning naming the repartition topic's 3", l)
	}
}

// TestCheckHopRoles: dedup check checks what REPARTITION_HOPS's role uses.
// Against a cluster with the input alone, rekey holds (input and
// repartition topic checked, hop 1's group's offsets; no output,
// checkpoint topic, store or sizing), and dedup fails naming the output.
func TestCheckHopRoles(t *testing.T) {
	_, env := repartitionCheckEnv(t, "events", "events-by-id")

	env["REPARTITION_HOPS"] = "rekey"
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"check"}, env.Lookup, &stdout, &stderr); code != exitOK {
		t.Fatalf("rekey: exit %d, want 0:\n%s%s", code, &stdout, &stderr)
	}
	out := stdout.String()
	wantCheck(t, out, "ok", "input topic")
	wantCheck(t, out, "ok", "repartition topic")
	if l := checkLine(out, "committed offsets"); !strings.Contains(l, "dedup-repartition") {
		t.Errorf("rekey: committed offsets %q, want hop 1's group dedup-repartition", l)
	}
	for _, name := range []string{"output topic", "checkpoint topic", "checkpoint store", "checkpoint cleanup.policy", "sizing"} {
		if l := checkLine(out, name); l != "" {
			t.Errorf("rekey checked %s: %q", name, l)
		}
	}

	env["REPARTITION_HOPS"] = "dedup"
	stdout.Reset()
	if code := run(context.Background(), []string{"check"}, env.Lookup, &stdout, &stderr); code != exitFailure {
		t.Fatalf("dedup: exit %d, want 1:\n%s%s", code, &stdout, &stderr)
	}
	wantCheck(t, stdout.String(), "FAIL", "output topic")
}

// TestCheckRepartitionOffsets: with REPARTITION_TOPIC each group's offsets
// are checked on the topic it commits to: hop 1's group
// (dedup-repartition) on the input, as "committed offsets", with roles
// both and rekey; GROUP_ID on the repartition topic, as "repartition
// offsets", with roles both and dedup. GROUP_ID's offsets on the input,
// which no hop commits, are not looked at: a stale commit there below the
// log start warns of nothing.
func TestCheckRepartitionOffsets(t *testing.T) {
	cluster, env := repartitionCheckEnv(t, "events", "events-deduped", "events-by-id")
	addr := cluster.ListenAddrs()[0]
	client := []kgo.Opt{kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: "events", Partition: 0, Key: []byte{byte(i)}},
			&kgo.Record{Topic: "events-by-id", Partition: 1, Key: []byte{byte(i)}})
	}
	testkit.Produce(t, client, recs...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kc := testkit.KafkaClient(t, addr)
	for group, commits := range map[string]map[string][]kafka.OffsetCommit{
		"dedup-repartition": {"events": {{Partition: 0, Offset: 2}}},
		"dedup":             {"events-by-id": {{Partition: 1, Offset: 1}}, "events": {{Partition: 0, Offset: 1}}},
	} {
		if _, err := kc.OffsetCommit(ctx, &kafka.OffsetCommitRequest{GroupID: group, GenerationID: -1, Topics: commits}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cluster.DeleteRecords("events", 0, 5); err != nil {
		t.Fatal(err)
	}
	if err := cluster.DeleteRecords("events-by-id", 1, 4); err != nil {
		t.Fatal(err)
	}
	const (
		hop1 = "group dedup-repartition: 3 record(s) of events will be skipped, deleted before they were read: partition 0 (committed 2, log start 5)"
		hop2 = "group dedup: 3 record(s) of events-by-id will be skipped, deleted before they were read: partition 1 (committed 1, log start 4)"
	)
	for _, tc := range []struct {
		hops        string
		committed   string // the "committed offsets" line's end; "" none
		repartition string // the "repartition offsets" line's end; "" none
	}{
		{"both", hop1, hop2},
		{"rekey", hop1, ""},
		{"dedup", "", hop2},
	} {
		env["REPARTITION_HOPS"] = tc.hops
		var stdout, stderr bytes.Buffer
		if code := run(ctx, []string{"check"}, env.Lookup, &stdout, &stderr); code != exitOK {
			t.Fatalf("%s: exit %d, want 0 (warnings):\n%s%s", tc.hops, code, &stdout, &stderr)
		}
		out := stdout.String()
		for _, c := range []struct{ name, want string }{{"committed offsets", tc.committed}, {"repartition offsets", tc.repartition}} {
			l := checkLine(out, c.name)
			switch {
			case c.want == "" && l != "":
				t.Errorf("%s: checked %s: %q", tc.hops, c.name, l)
			case c.want != "" && (!strings.HasPrefix(l, "warn ") || !strings.HasSuffix(l, c.want)):
				t.Errorf("%s: %s %q, want a warning ending %q", tc.hops, c.name, l, c.want)
			}
		}
		// The sizing is hop 2's, over the repartition topic's partitions,
		// hop 1 counted where the role runs it.
		if sizing := map[string]string{"both": "--partitions 2 --mode fingerprint --repartition --instances N",
			"dedup": "--partitions 2 --mode fingerprint --repartition --hops dedup --instances N"}[tc.hops]; sizing != "" &&
			(!strings.Contains(out, "one instance holding all 2 partitions of events-by-id") || !strings.Contains(out, sizing)) {
			t.Errorf("%s: sizing does not name the repartition topic's partitions and %q:\n%s", tc.hops, sizing, out)
		}
		if strings.Contains(out, "of events will be skipped") && !strings.Contains(out, "group dedup-repartition: 3 record(s) of events") ||
			strings.Contains(out, "group dedup: 4 record(s) of events ") {
			t.Errorf("%s: GROUP_ID's offsets on the input were checked:\n%s", tc.hops, out)
		}
	}
}
