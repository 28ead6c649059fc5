package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/internal/testkit"
)

// TestExplainCLI: the built binary deduplicates keys into Kafka-stored
// checkpoints and stops on SIGTERM; `dedup explain` run as another process
// with the same environment then says, for each produced key, that the
// partition it was produced to holds it (and no other), and that a key
// never produced is held nowhere.
func TestExplainCLI(t *testing.T) {
	_, brokers := newCluster(t)
	n := namesOf(t)
	env := stageEnv(t, brokers, "kafka")
	p := startProc(t, "stage", env)
	waitReady(t, p, 60*time.Second)
	const keys = 30
	var recs []*kgo.Record
	for i := range keys {
		recs = append(recs, &kgo.Record{Topic: n.input, Partition: int32(i % numPartitions), Key: fmt.Appendf(nil, "explain-%d", i), Value: []byte("v")})
	}
	testkit.Produce(t, []kgo.Opt{seedBrokers(brokers), kgo.RecordPartitioner(kgo.ManualPartitioner())}, recs...)
	waitFor(t, 60*time.Second, "every key forwarded", func() error {
		if got := metric(t, p, "dedup_messages_total", map[string]string{"outcome": "forwarded"}); got != keys {
			return fmt.Errorf("%w: %v of %d forwarded", errNotYet, got, keys)
		}
		return nil
	})
	p.termOK(t)

	explain := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, binPath, append([]string{"explain"}, args...)...)
		cmd.Env = testkit.EnvList(env)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("dedup explain %q: %v, want exit 0\n%s", args, err, stderr.String())
		}
		return string(out)
	}
	held := func(k string) map[int]bool {
		t.Helper()
		parts := map[int]bool{}
		for _, l := range strings.Split(strings.TrimSpace(explain("--json", k)), "\n") {
			var a struct {
				Partition  int
				Held       bool
				Checkpoint *struct{ Offset int64 }
			}
			if err := json.Unmarshal([]byte(l), &a); err != nil {
				t.Fatalf("explain --json %s: line %q: %v", k, l, err)
			}
			if a.Checkpoint == nil {
				t.Errorf("explain --json %s: partition %d answers without a checkpoint: %s", k, a.Partition, l)
			}
			parts[a.Partition] = a.Held
		}
		if len(parts) != numPartitions {
			t.Fatalf("explain --json %s: %d partitions answered, want %d", k, len(parts), numPartitions)
		}
		return parts
	}
	for i, r := range recs {
		for part, h := range held(string(r.Key)) {
			if h != (int32(part) == r.Partition) {
				t.Errorf("key %d (%s), produced to partition %d: partition %d says held %v", i, r.Key, r.Partition, part, h)
			}
		}
	}
	for part, h := range held("explain-never-produced") {
		if h {
			t.Errorf("a key never produced is held by partition %d", part)
		}
	}
	if out := explain(string(recs[1].Key)); !strings.Contains(out, fmt.Sprintf("%s/1: HELD (current)", n.input)) {
		t.Errorf("explain %s:\n%s", recs[1].Key, out)
	}
}
