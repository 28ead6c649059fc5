package explain_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/checkpoint"
	"dedup/internal/explain"
	"dedup/internal/testkit"
	"dedup/key"
	"dedup/processor"
	"dedup/processor/partition"
	"dedup/rotation"
)

// TestExplainAgreesWithTheStage runs the stage over 10,000 distinct keys,
// asks its live filters (the key probe's path) and, once it stopped, its
// checkpoints (dedup explain's): every key it forwarded is held, in the
// current generation, and of 10,000 keys never produced the count read as
// held is within four standard deviations of the false-positive rates
// explain prints. The filters are sized for the keys at ε = 0.01, so that
// about a hundred false positives are expected and the bound means
// something; live and checkpointed answers are the same.
func TestExplainAgreesWithTheStage(t *testing.T) {
	const parts, keys = 2, 10000
	cluster := testkit.Cluster(t, parts)
	addr := cluster.ListenAddrs()[0]
	store, err := checkpoint.NewFileStore(checkpoint.FileOptions{Dir: t.TempDir(), Keep: 3, Group: "explain"})
	if err != nil {
		t.Fatal(err)
	}
	filter := rotation.Options{ExpectedKeys: keys / parts, FPRate: 0.01, Window: time.Hour, Mode: rotation.Fingerprint}
	ts := time.Now().Add(-time.Minute)
	recs := make([]*kgo.Record, keys)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "events", Partition: int32(i % parts), Key: fmt.Appendf(nil, "sent-%d", i), Value: []byte("v"), Timestamp: ts}
	}
	testkit.Produce(t, []kgo.Opt{kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner())}, recs...)

	src, err := key.Parse("key")
	if err != nil {
		t.Fatal(err)
	}
	proc, err := processor.New(processor.Options{
		Brokers: []string{addr}, Transport: testkit.KafkaTransport(t), GroupID: "explain",
		InputTopic: "events", OutputTopic: "events-deduped", SessionTimeout: time.Second,
		Key: src, Filter: filter, CheckpointInterval: 200 * time.Millisecond, Store: store,
		Metrics: processor.NewMetrics(prometheus.NewRegistry()), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- proc.Run(ctx) }()
	testkit.WaitFor(t, "every record decided", 60*time.Second, func() (bool, error) {
		return proc.Progress().Decided() == keys, nil
	})
	forwarded := proc.Progress().Forwarded
	out := testkit.ConsumeN(t, []kgo.Opt{kgo.SeedBrokers(addr)}, "events-deduped", int(forwarded))

	// The live filters, asked as the key probe asks them, for a sample,
	// by concurrent askers.
	type asked struct {
		key  string
		part int
	}
	live := map[asked]partition.KeyAnswer{}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for i := range 100 {
		k := fmt.Sprintf("sent-%d", i)
		if i%2 == 1 {
			k = fmt.Sprintf("never-%d", i)
		}
		wg.Go(func() {
			got := proc.AskKey(context.Background(), []byte(k))
			mu.Lock()
			defer mu.Unlock()
			if len(got.Answers) != parts || got.Partitions != parts {
				t.Errorf("AskKey(%s): %d answers of %d partitions, want %d", k, len(got.Answers), got.Partitions, parts)
			}
			for _, a := range got.Answers {
				if a.Err != nil {
					t.Errorf("AskKey(%s): partition %d: %v", k, a.Partition, a.Err)
				}
				live[asked{k, a.Partition}] = a.KeyAnswer
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("stage stopped with %v", err)
	}

	f, err := explain.Load(context.Background(), store, explain.Options{Group: "explain", Topic: "events", Partitions: parts,
		Partition: -1, Filter: filter, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range out {
		res := f.Ask(r.Key)
		a := res.Answers[r.Partition]
		if !a.Held || a.Generation != partition.GenCurrent {
			t.Fatalf("forwarded key %s of partition %d: held %v (%s), want held by the current generation; %+v", r.Key, r.Partition, a.Held, a.Generation, a)
		}
		if a.Checkpoint == nil || a.Checkpoint.Offset != keys/parts {
			t.Fatalf("key %s: checkpoint %+v, want one at offset %d", r.Key, a.Checkpoint, keys/parts)
		}
	}
	var held, expected, variance float64
	for i := range keys {
		for _, a := range f.Ask(fmt.Appendf(nil, "never-%d", i)).Answers {
			if a.Held {
				held++
			}
			expected += a.FalsePositive
			variance += a.FalsePositive * (1 - a.FalsePositive)
		}
	}
	bound := 4 * math.Sqrt(variance)
	t.Logf("%d forwarded; never produced: %v read as held of %d asked, %.1f expected (±%.1f)", forwarded, held, keys*parts, expected, bound)
	if expected < 20 {
		t.Fatalf("expected %.1f false positives: too few for the bound to mean anything", expected)
	}
	if math.Abs(held-expected) > bound {
		t.Errorf("never-produced keys read as held: %v, explain's rates say %.1f ± %.1f", held, expected, bound)
	}

	for q, want := range live {
		got := explain.NewAnswer("events", q.part, want)
		cp := f.Ask([]byte(q.key)).Answers[q.part]
		if cp.Held != got.Held || cp.Generation != got.Generation {
			t.Errorf("%s on partition %d: the checkpoint says held %v (%s), the live filters said %v (%s)",
				q.key, q.part, cp.Held, cp.Generation, got.Held, got.Generation)
		}
		if cp.Checkpoint.Offset != want.Offset {
			t.Errorf("%s on partition %d: checkpoint at offset %d, the live filters were at %d", q.key, q.part, cp.Checkpoint.Offset, want.Offset)
		}
	}
}
