package e2e_test

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"dedup/internal/kfaketest"
	"dedup/internal/testkit"
)

// brokerRelease is one row of the broker compatibility matrix: kfake
// capped at a Kafka release's API versions, refusing the versions that
// release removed (none before 4.0).
type brokerRelease struct {
	name     string
	versions func() *kversion.Versions
	// repartition is the checkpoint store of a second run with
	// REPARTITION_TOPIC; empty for none.
	repartition string
}

// brokerMatrix: the oldest release the stage supports, the 2.8 and 3.x
// that managed services run, 4.0, the first to remove versions (KIP-896),
// and the newest release kversion has.
var brokerMatrix = []brokerRelease{
	{"2.1", kversion.V2_1_0, "file"},
	{"2.8", kversion.V2_8_0, ""},
	{"3.0", kversion.V3_0_0, ""},
	{"3.9", kversion.V3_9_0, ""},
	{"4.0", kversion.V4_0_0, "kafka"},
	{"4.4", kversion.V4_4_0, "kafka"},
}

// TestBrokerVersions runs the binary against each release of the matrix:
// dedup check exits 0; a stage with the Kafka checkpoint store consumes,
// produces, commits and checkpoints, is stopped mid-stream and restores
// from its checkpoints, and forwards every first occurrence exactly once;
// at the oldest release, 4.0 and the newest the repartition hop does the
// same. No request may fall below the release's floors or above its
// maximum.
func TestBrokerVersions(t *testing.T) {
	for _, rel := range brokerMatrix {
		t.Run(rel.name, func(t *testing.T) {
			testBrokerRelease(t, rel)
			if rel.repartition != "" {
				t.Run("repartition-"+rel.repartition, func(t *testing.T) { testBrokerRepartition(t, rel) })
			}
		})
	}
	// The floor check refuses the stage's own requests: JoinGroup v2,
	// the highest kafka-go's group sends, refused as a broker without it
	// would refuse it, keeps the stage out of the group.
	t.Run("floor-above-joingroup-v2", func(t *testing.T) {
		floors := kfaketest.Floors(kversion.V4_0_0())
		floors[int16(kmsg.JoinGroup)] = 3
		c, brokers := newCluster(t, kfake.MaxVersions(kversion.V4_0_0()))
		vs := kfaketest.EnforceFloors(c, floors)
		p := startProc(t, "dedup", stageEnv(t, brokers, "file"))
		joinV2 := kfaketest.KeyVersion{Key: int16(kmsg.JoinGroup), Version: 2}
		waitFor(t, 30*time.Second, "two JoinGroup v2 requests refused", func() error {
			if err := alive(p); err != nil {
				return err
			}
			if n := vs.Refused()[joinV2]; n < 2 {
				return fmt.Errorf("%w: %d refused", errNotYet, n)
			}
			return nil
		})
		samples := mustScrape(t, p)
		if n, _ := sum(samples, "dedup_group_generations_total", nil); n != 0 {
			t.Errorf("dedup_group_generations_total %v with every JoinGroup refused, want 0", n)
		}
		if n, _ := sum(samples, "dedup_group_join_failures_total", nil); n < 1 {
			t.Errorf("dedup_group_join_failures_total %v after %d refused joins, want at least 1", n, vs.Refused()[joinV2])
		}
		if v := vs.Seen(); v[joinV2] != 0 {
			t.Errorf("%d JoinGroup v2 let through", v[joinV2])
		}
		p.termOK(t)
	})
}

// releaseCluster starts kfake capped at rel and refusing its floors.
func releaseCluster(t *testing.T, rel brokerRelease) (string, *kfaketest.Versions) {
	t.Helper()
	c, brokers := newCluster(t, kfake.MaxVersions(rel.versions()))
	vs := kfaketest.EnforceFloors(c, kfaketest.Floors(rel.versions()))
	t.Cleanup(func() {
		for kv, n := range vs.Refused() {
			t.Errorf("%d %s requests refused: below Kafka %s's floor", n, kv, rel.name)
		}
		// kfake refuses these itself, closing the connection: a client
		// that chose them misread the broker's versions.
		for kv := range vs.Seen() {
			top, ok := rel.versions().LookupMaxKeyVersion(kv.Key)
			if kv.Key != int16(kmsg.ApiVersions) && (!ok || kv.Version > top) {
				t.Errorf("%s sent: above Kafka %s's v%d", kv, rel.name, top)
			}
		}
		t.Logf("Kafka %s, versions sent (the stage's and the test's clients'): %s", rel.name, vs.Summary())
	})
	return brokers, vs
}

func testBrokerRelease(t *testing.T, rel brokerRelease) {
	const records = 1000
	rng := newRand(testSeed(t))
	brokers, _ := releaseCluster(t, rel)
	env := stageEnv(t, brokers, "kafka")
	runCheck(t, env)

	obs := startObserver(t, brokers)
	w := newWorkload(rng, records, time.Now().Truncate(time.Millisecond))
	var names procSet
	p := startProc(t, names.next("dedup"), env)
	// Held a little ahead of the output, so that the second half of
	// the input, duplicates of the first half's keys among it, comes
	// after the restart.
	pr := startProducer(t, brokers, w, obs, 150)
	guard := func() error { return alive(p) }
	obs.waitProgress(t, 60*time.Second, int64(w.nFirsts/2), "half the first occurrences forwarded", guard)
	p.termOK(t)

	// The successor finds every partition's state in the checkpoint
	// topic and its place in the committed offsets.
	p = startProc(t, names.next("dedup"), env)
	waitReady(t, p, 30*time.Second)
	if n, _ := sum(mustScrape(t, p), "dedup_restores_total", map[string]string{"source": "latest"}); n != numPartitions {
		t.Errorf("dedup_restores_total{source=latest} %v after the restart, want %d", n, numPartitions)
	}
	pr.waitDone(t, 60*time.Second, guard)
	obs.waitSentinels(t, 60*time.Second, guard)
	waitLagZero(t, p)
	p.termOK(t)
	verify(t, w, obs.drain(t, brokers))
	assertCommittedEnds(t, brokers, "e2e")
}

func testBrokerRepartition(t *testing.T, rel brokerRelease) {
	rng := newRand(testSeed(t))
	brokers, _ := releaseCluster(t, rel)
	obs := startObserver(t, brokers)
	in := newRepartitionInput(rng, 300, 60, 10, time.Now().Truncate(time.Millisecond))
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)

	env := stageEnv(t, brokers, rel.repartition)
	env["REPARTITION_TOPIC"] = repartitionTopic
	env["DEDUP_KEY"] = "json:id"
	env["DEDUP_RETRACT_HEADER"] = retractHeader
	runCheck(t, env)
	p := startProc(t, "dedup", env)
	guard := func() error { return alive(p) }
	hop1Settled(t, guard, p)
	in.produce(t, cl, len(in.recs))

	// Sentinels written straight to the repartition topic come after
	// every record of the input there once hop 1 has committed it all.
	ends, err := endOffsets(brokers, inputTopic)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "hop 1 to commit the end of the input", func() error {
		if err := guard(); err != nil {
			return err
		}
		c := committed(t, brokers, "e2e-repartition")
		for part, end := range ends {
			if c[part] < end {
				return fmt.Errorf("%w: partition %d committed %d of %d", errNotYet, part, c[part], end)
			}
		}
		return nil
	})
	for part := range int32(numPartitions) {
		s := &kgo.Record{Topic: repartitionTopic, Partition: part, Key: fmt.Appendf(nil, "%s%d", sentinelPrefix, part),
			Value: fmt.Appendf(nil, `{"id":"sentinel-%d"}`, part)}
		if err := cl.ProduceSync(context.Background(), s).FirstErr(); err != nil {
			t.Fatalf("produce sentinel: %v", err)
		}
	}
	obs.waitSentinels(t, 60*time.Second, guard)
	p.termOK(t)
	in.verify(t, obs.drain(t, brokers))
}

// runCheck runs dedup check with the stage's environment: it must exit 0.
func runCheck(t *testing.T, env map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "check")
	cmd.Env = testkit.EnvList(env)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("dedup check: %v, want exit 0:\n%s", err, out)
	}
}

// assertCommittedEnds asserts that group committed the end of every input
// partition.
func assertCommittedEnds(t *testing.T, brokers, group string) {
	t.Helper()
	ends, err := endOffsets(brokers, inputTopic)
	if err != nil {
		t.Fatal(err)
	}
	c := committed(t, brokers, group)
	for part, end := range ends {
		if c[part] != end {
			t.Errorf("group %s committed %d of input partition %d, want its end %d", group, c[part], part, end)
		}
	}
}
