package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/internal/kfaketest"
	"dedup/internal/testkit"
)

// The two hops of REPARTITION_TOPIC as the binary runs them: hop 1's
// health in the probes, and the hops deployed as separate processes
// (REPARTITION_HOPS).

const reTopic = "events-repartition"

// spreadDuplicates is n ids, each sent copies times, copy c to input
// partition (id+c) mod parts: every id's copies arrive on different input
// partitions, which only the repartition hop brings together.
func spreadDuplicates(n, copies, parts int) []*kgo.Record {
	var recs []*kgo.Record
	for c := range copies {
		for i := range n {
			recs = append(recs, &kgo.Record{
				Topic:     "events",
				Partition: int32((i + c) % parts),
				Key:       fmt.Appendf(nil, "k%03d", i),
				Value:     fmt.Appendf(nil, "v%03d-copy%d", i, c),
			})
		}
	}
	return recs
}

// checkOncePerKey wants out to hold each of the keys k000.. exactly once.
func checkOncePerKey(t *testing.T, out []*kgo.Record, keys int) {
	t.Helper()
	seen := map[string]int{}
	for _, r := range out {
		seen[string(r.Key)]++
	}
	for i := range keys {
		if k := fmt.Sprintf("k%03d", i); seen[k] != 1 {
			t.Errorf("key %s forwarded %d times, want once", k, seen[k])
		}
	}
	if len(seen) != keys {
		t.Errorf("forwarded %d distinct keys, want %d", len(seen), keys)
	}
}

// TestRepartitionHopHealth: with REPARTITION_TOPIC, /readyz waits for
// hop 1 to join its group (its joins refused: 503 naming the re-key hop),
// and while the repartition topic refuses every produce /healthz turns
// 503 after PRODUCE_RECOVERY_TIMEOUT, naming the re-key hop, with
// dedup_repartition_unhealthy 1 and an error line; once the fault is
// lifted it is 200 again and every id is forwarded once.
func TestRepartitionHopHealth(t *testing.T) {
	cluster := testkit.Cluster(t, 2)
	addr := cluster.ListenAddrs()[0]
	joins := kfaketest.RefuseJoin(cluster, "dedup-repartition", kerr.CoordinatorLoadInProgress.Code)
	const recovery = 3 * time.Second
	env := clusterEnv(t, cluster, testkit.Env{
		"REPARTITION_TOPIC":        reTopic,
		"PRODUCE_RECOVERY_TIMEOUT": recovery.String(),
		"LOG_LEVEL":                "info",
	})
	metrics := env["METRICS_ADDR"]
	bin := startBinary(t, env)
	waitNotReadyNaming(t, metrics, "re-key hop not in a generation")
	joins.Lift()
	waitReady(t, bin, metrics)
	checkHealthy(t, metrics)

	produces := kfaketest.RefuseProduceTo(cluster, reTopic, kerr.NotEnoughReplicas.Code)
	const keys = 30
	recs := spreadDuplicates(keys, 2, 2)
	testkit.Produce(t, manual([]kgo.Opt{kgo.SeedBrokers(addr)}), recs...)
	testkit.WaitFor(t, "/healthz 503 naming the re-key hop", 30*time.Second, func() (bool, error) {
		if code, ok := bin.exited(); ok {
			t.Fatalf("dedup exited with %d", code)
		}
		code, body, err := healthz(metrics)
		return code == http.StatusServiceUnavailable && strings.Contains(body, "re-key hop") && strings.Contains(body, "batches failing"), err
	})
	first := produces.FirstRefused()
	if since := time.Since(first); first.IsZero() || since < recovery {
		t.Errorf("/healthz failed %s after the first refused produce, before PRODUCE_RECOVERY_TIMEOUT %s", since, recovery)
	}
	waitMetric(t, metrics, "dedup_repartition_unhealthy", 1)
	waitLog(t, bin, "re-key hop unhealthy", "level=ERROR")

	produces.Lift()
	testkit.WaitFor(t, "/healthz 200 again", 30*time.Second, func() (bool, error) {
		code, _, err := healthz(metrics)
		return code == http.StatusOK, err
	})
	waitMetric(t, metrics, "dedup_repartition_unhealthy", 0)
	waitBothHopsDone(t, cluster, addr, len(recs))
	checkOutputOncePerKey(t, addr, keys)
	bin.stopOK(t, "")
}

// waitBothHopsDone waits until hop 1 has committed all n input records and
// hop 2 everything in the repartition topic (re-sends included).
func waitBothHopsDone(t *testing.T, cluster *kfake.Cluster, addr string, n int) {
	t.Helper()
	committed := func(group, topic string) int64 {
		g := cluster.GroupInfo(group)
		if g == nil {
			return -1
		}
		var sum int64
		for _, c := range g.Commits[topic] {
			sum += c.Offset
		}
		return sum
	}
	testkit.WaitFor(t, "both hops committed everything", 60*time.Second, func() (bool, error) {
		if committed("dedup-repartition", "events") != int64(n) {
			return false, nil
		}
		end, err := testkit.SumEndOffsets(addr, reTopic, 2)
		return err == nil && end >= int64(n) && committed("dedup", reTopic) == end, err
	})
}

// checkOutputOncePerKey reads the whole output and wants each key once.
func checkOutputOncePerKey(t *testing.T, addr string, keys int) {
	t.Helper()
	n := testkit.EndOffsets(t, addr, "events-deduped", 2)
	checkOncePerKey(t, testkit.ConsumeN(t, []kgo.Opt{kgo.SeedBrokers(addr)}, "events-deduped", int(n)), keys)
}

// sumOrZero is testkit.MetricSum with a family without samples as 0.
func sumOrZero(t *testing.T, addr, family string) float64 {
	t.Helper()
	n, err := testkit.MetricSum(addr, family)
	if err != nil && !strings.Contains(err.Error(), "no sample") {
		t.Fatal(err)
	}
	return n
}

// topicExists asks the broker's metadata for topic.
func topicExists(t *testing.T, addr, topic string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := testkit.KafkaClient(t, addr).Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range md.Topics {
		if tp.Name == topic && tp.Error == nil {
			return true
		}
	}
	return false
}

// TestHopsDeployedApart: one process with REPARTITION_HOPS=rekey and one
// with REPARTITION_HOPS=dedup, same GROUP_ID, against one broker. The
// rekey process starts while the output topic does not exist, becomes
// ready and sends the whole input, each id's copies on different input
// partitions, to the repartition topic without opening a checkpoint store;
// the dedup process, started once the output exists, forwards every id
// exactly once. Each process shows only its own hop in its metrics.
func TestHopsDeployedApart(t *testing.T) {
	cluster := testkit.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "events"),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	addr := cluster.ListenAddrs()[0]

	rekeyEnv := clusterEnv(t, cluster, testkit.Env{"REPARTITION_TOPIC": reTopic, "REPARTITION_HOPS": "rekey"})
	rekey := startBinary(t, rekeyEnv)
	waitReady(t, rekey, rekeyEnv["METRICS_ADDR"])
	const keys = 60
	recs := spreadDuplicates(keys, 3, 2)
	testkit.Produce(t, manual([]kgo.Opt{kgo.SeedBrokers(addr)}), recs...)
	testkit.WaitFor(t, "hop 1 sent the whole input", 30*time.Second, func() (bool, error) {
		n, err := testkit.MetricSum(rekeyEnv["METRICS_ADDR"], "dedup_repartition_rekeyed_total")
		return n >= float64(len(recs)), err
	})
	for _, topic := range []string{"events-deduped", "dedup-dedup-state"} {
		if topicExists(t, addr, topic) {
			t.Errorf("%s exists with the rekey process alone", topic)
		}
	}
	if n := sumOrZero(t, rekeyEnv["METRICS_ADDR"], "dedup_messages_total"); n != 0 {
		t.Errorf("rekey process decided %v records, want none", n)
	}

	if err := cluster.CreateTopic("events-deduped", 2, nil); err != nil {
		t.Fatal(err)
	}
	dedupEnv := clusterEnv(t, cluster, testkit.Env{"REPARTITION_TOPIC": reTopic, "REPARTITION_HOPS": "dedup"})
	dedup := startBinary(t, dedupEnv)
	waitReady(t, dedup, dedupEnv["METRICS_ADDR"])
	waitBothHopsDone(t, cluster, addr, len(recs))
	checkOutputOncePerKey(t, addr, keys)
	if n := sumOrZero(t, dedupEnv["METRICS_ADDR"], "dedup_repartition_rekeyed_total"); n != 0 {
		t.Errorf("dedup process re-keyed %v records, want none", n)
	}
	if n, err := testkit.MetricSum(dedupEnv["METRICS_ADDR"], "dedup_messages_total", `outcome="duplicate"`); err != nil || n != float64(len(recs)-keys) {
		t.Errorf("dedup process dropped %v duplicates (%v), want %d", n, err, len(recs)-keys)
	}
	rekey.stopOK(t, "rekey")
	dedup.stopOK(t, "dedup")
}
