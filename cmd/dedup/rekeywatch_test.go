package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/internal/testkit"
)

// A process with REPARTITION_HOPS=rekey runs hop 1 alone: the gauges the
// alerts read (dedup_broker_connected, dedup_topic_missing,
// dedup_assigned_partitions) and /readyz speak for hop 1's brokers, topics
// and group, and the gauges that describe only hop 2 are not exported.

// rekeyEnv is the environment of a rekey process against cluster.
func rekeyEnv(t *testing.T, cluster *kfake.Cluster) testkit.Env {
	return clusterEnv(t, cluster, testkit.Env{
		"REPARTITION_TOPIC": reTopic,
		"REPARTITION_HOPS":  "rekey",
		"LOG_LEVEL":         "info",
	})
}

// checkRekeyHealthy wants the gauges of a healthy rekey process holding
// partitions input partitions: brokers connected, neither of its topics
// missing, no series for topics it does not need, and hop 2's
// configuration and memory gauges absent.
func checkRekeyHealthy(t *testing.T, metrics string, partitions int) {
	t.Helper()
	waitMetric(t, metrics, "dedup_broker_connected", 1)
	waitMetric(t, metrics, "dedup_assigned_partitions", float64(partitions))
	for _, topic := range []string{"events", reTopic} {
		waitMetric(t, metrics, "dedup_topic_missing", 0, fmt.Sprintf(`topic=%q`, topic))
	}
	for _, topic := range []string{"events-deduped", "dedup-dedup-state"} {
		if _, err := testkit.MetricSum(metrics, "dedup_topic_missing", fmt.Sprintf(`topic=%q`, topic)); err == nil {
			t.Errorf("dedup_topic_missing has a series for %s, which a rekey process does not need", topic)
		}
	}
	for _, family := range []string{"dedup_filter_false_positive_target", "dedup_filter_expected_keys",
		"dedup_filter_window_seconds", "dedup_memory_predicted_bytes"} {
		_, err := testkit.MetricSum(metrics, family)
		if err == nil || !strings.Contains(err.Error(), "no sample") {
			t.Errorf("%s: exported by a rekey process (%v), want absent: it describes hop 2 only", family, err)
		}
	}
	if n, err := testkit.MetricSum(metrics, "dedup_group_generations_total"); err != nil || n < 1 {
		t.Errorf("dedup_group_generations_total = %v, %v; want hop 1's generations, at least 1", n, err)
	}
	checkHealthy(t, metrics)
}

// waitRekeyed waits until hop 1 has had n input records acknowledged.
func waitRekeyed(t *testing.T, metrics string, n int) {
	t.Helper()
	testkit.WaitFor(t, fmt.Sprintf("hop 1 re-keyed %d records", n), 30*time.Second, func() (bool, error) {
		v, err := testkit.MetricSum(metrics, "dedup_repartition_rekeyed_total")
		return err == nil && v >= float64(n), nil
	})
}

// TestRekeyReportsItsCluster: a rekey process reports what its own hop
// depends on. Healthy: brokers connected, both partitions of the input
// assigned, no topic missing. The network cut: dedup_broker_connected 0,
// /readyz 503 naming it, /healthz 200, and back. The repartition topic,
// then the input topic, deleted under it: dedup_topic_missing{topic} 1,
// /readyz 503 naming the topic (the input's deletion also takes its
// partitions away: dedup_assigned_partitions 0), and healthy again once
// the topic is created again, re-keying what arrives.
func TestRekeyReportsItsCluster(t *testing.T) {
	cluster, proxy := clusterBehindProxy(t)
	addr := cluster.ListenAddrs()[0] // the proxy
	env := rekeyEnv(t, cluster)
	metrics := env["METRICS_ADDR"]
	bin := startBinary(t, env)
	waitReady(t, bin, metrics)
	checkRekeyHealthy(t, metrics, 2)
	client := manual([]kgo.Opt{kgo.SeedBrokers(addr)})
	sent := 0
	produce := func(n int) {
		t.Helper()
		testkit.Produce(t, client, spreadDuplicates(n, 1, 2)...)
		sent += n
		waitRekeyed(t, metrics, sent)
	}
	produce(10)

	t.Run("brokers unreachable", func(t *testing.T) {
		proxy.Cut()
		waitLog(t, bin, "Kafka brokers unreachable")
		waitMetric(t, metrics, "dedup_broker_connected", 0)
		waitNotReadyNaming(t, metrics, "unreachable")
		checkHealthy(t, metrics)
		proxy.Restore()
		waitLog(t, bin, "Kafka brokers reachable again")
		waitReady(t, bin, metrics)
		checkRekeyHealthy(t, metrics, 2)
		produce(10)
	})

	for _, c := range []struct{ topic, role string }{{reTopic, "repartition"}, {"events", "input"}} {
		t.Run(c.role+" topic deleted", func(t *testing.T) {
			if err := cluster.DeleteTopic(c.topic); err != nil {
				t.Fatal(err)
			}
			waitLog(t, bin, "topic missing", "topic="+c.topic, "role="+c.role)
			waitMetric(t, metrics, "dedup_topic_missing", 1, fmt.Sprintf(`topic=%q`, c.topic))
			waitNotReadyNaming(t, metrics, c.topic)
			waitMetric(t, metrics, "dedup_broker_connected", 1)
			if c.role == "input" {
				// Its partitions are gone, and no generation is taken
				// while it is missing.
				waitMetric(t, metrics, "dedup_assigned_partitions", 0)
			}
			checkHealthy(t, metrics)
			recreateTopic(t, cluster, bin, metrics, c.topic)
			checkRekeyHealthy(t, metrics, 2)
			if c.role == "input" {
				// The input starts again at offset 0: the count restarts.
				sent = 0
				waitMetric(t, metrics, "dedup_repartition_input_lag", 0)
			}
		})
	}
	before, err := testkit.MetricSum(metrics, "dedup_repartition_rekeyed_total")
	if err != nil {
		t.Fatal(err)
	}
	testkit.Produce(t, client, spreadDuplicates(10, 1, 2)...)
	waitRekeyed(t, metrics, int(before)+10)
	bin.stopOK(t, "")
}

// TestRekeyInputMissingAtStart: a rekey process started while the input
// topic does not exist (the repartition topic does) is connected, names
// the input as missing, holds no partition and is not ready; once the
// input is created it is ready, holds its partitions and re-keys.
func TestRekeyInputMissingAtStart(t *testing.T) {
	cluster := testkit.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(2, reTopic),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	env := rekeyEnv(t, cluster)
	metrics := env["METRICS_ADDR"]
	bin := startBinary(t, env)
	waitLog(t, bin, "topic missing", "topic=events", "role=input")
	waitNotReadyNaming(t, metrics, "events")
	waitMetric(t, metrics, "dedup_topic_missing", 1, `topic="events"`)
	waitMetric(t, metrics, "dedup_topic_missing", 0, fmt.Sprintf(`topic=%q`, reTopic))
	waitMetric(t, metrics, "dedup_broker_connected", 1)
	waitMetric(t, metrics, "dedup_assigned_partitions", 0)
	checkHealthy(t, metrics)

	recreateTopic(t, cluster, bin, metrics, "events")
	checkRekeyHealthy(t, metrics, 2)
	testkit.Produce(t, manual([]kgo.Opt{kgo.SeedBrokers(cluster.ListenAddrs()[0])}), spreadDuplicates(10, 1, 2)...)
	waitRekeyed(t, metrics, 10)
	bin.stopOK(t, "")
}
