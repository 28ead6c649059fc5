package main

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/internal/tcpproxy"
	"dedup/internal/testkit"
)

// Faults injected into the built binary (the test binary run as dedup)
// against a kfake broker: each is named in the log once when it starts and
// once when it ends, shows in a metric and in /readyz, leaves /healthz at
// 200 (a restart would not help), and the output afterwards holds every
// first occurrence once. The group's faults (joins refused, leaders and the
// coordinator moving) close the file.

// readyz returns /readyz's status and body.
func readyz(addr string) (int, string, error) { return testkit.Get("http://" + addr + "/readyz") }

// waitNotReadyNaming waits until /readyz answers 503 with a body that
// contains what.
func waitNotReadyNaming(t *testing.T, addr, what string) {
	t.Helper()
	testkit.WaitFor(t, "/readyz 503 naming "+what, 15*time.Second, func() (bool, error) {
		code, body, err := readyz(addr)
		return code == http.StatusServiceUnavailable && strings.Contains(body, what), err
	})
}

// waitMetric waits until the family's samples matching match sum to want.
func waitMetric(t *testing.T, addr, family string, want float64, match ...string) {
	t.Helper()
	testkit.WaitFor(t, fmt.Sprintf("%s%v = %v", family, match, want), 15*time.Second, func() (bool, error) {
		v, err := testkit.MetricSum(addr, family, match...)
		return err == nil && v == want, err
	})
}

// logLines returns the lines of log that contain every one of parts.
func logLines(log string, parts ...string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// recreateTopic creates topic again (2 partitions) and waits until the
// stage is ready and has said the topic is present again.
func recreateTopic(t *testing.T, cluster *kfake.Cluster, bin *binary, metrics, topic string) {
	t.Helper()
	if err := cluster.CreateTopic(topic, 2, nil); err != nil {
		t.Fatal(err)
	}
	waitReady(t, bin, metrics)
	waitLog(t, bin, "topic present again", "topic="+topic)
}

// waitLog waits until log holds a line with every one of parts.
func waitLog(t *testing.T, b *binary, parts ...string) {
	t.Helper()
	testkit.WaitFor(t, fmt.Sprintf("a log line with %q", parts), 15*time.Second, func() (bool, error) {
		return len(logLines(b.stderr.String(), parts...)) > 0, nil
	})
}

// waitCommitted waits until the group's commits on the input sum to n:
// every input record has been decided.
func waitCommitted(t *testing.T, cluster *kfake.Cluster, n int64) {
	t.Helper()
	testkit.WaitFor(t, fmt.Sprintf("%d input records committed", n), 30*time.Second, func() (bool, error) {
		g := cluster.GroupInfo("dedup")
		if g == nil {
			return false, nil
		}
		var sum int64
		for _, c := range g.Commits["events"] {
			sum += c.Offset
		}
		return sum == n, nil
	})
}

// checkHealthy asserts /healthz answers 200.
func checkHealthy(t *testing.T, addr string) {
	t.Helper()
	if code, err := testkit.HTTPStatus("http://" + addr + "/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("/healthz = %d, %v; want 200: a restart does not bring a topic or a broker back", code, err)
	}
}

// checkExactlyOnce reads the output and checks that it holds one record
// per key, the first occurrence, and nothing more.
func checkExactlyOnce(t *testing.T, addr string, client []kgo.Opt, keys int) {
	t.Helper()
	out := testkit.ConsumeN(t, client, "events-deduped", keys)
	checkForwarded(t, out, keys)
	if n := testkit.EndOffsets(t, addr, "events-deduped", 2); n != int64(keys) {
		t.Errorf("output holds %d records, want %d", n, keys)
	}
}

// TestTopicMissingAtStart: with the input or the output topic missing, the
// stage says so once, is not ready (naming the topic), reports the gauge,
// joins no group, and proceeds once the topic is created.
func TestTopicMissingAtStart(t *testing.T) {
	for _, missing := range []string{"events", "events-deduped"} {
		t.Run(missing, func(t *testing.T) {
			present := "events"
			if missing == "events" {
				present = "events-deduped"
			}
			cluster := testkit.Cluster(t, 2, kfake.SeedTopics(2, present))
			if err := cluster.DeleteTopic(missing); err != nil && cluster.TopicInfo(missing) != nil {
				t.Fatal(err)
			}
			env := testEnv(t)
			env["KAFKA_BROKERS"] = cluster.ListenAddrs()[0]
			env["LOG_LEVEL"] = "info"
			metrics := env["METRICS_ADDR"]
			bin := startBinary(t, env)

			waitLog(t, bin, "topic missing", "topic="+missing)
			waitNotReadyNaming(t, metrics, missing)
			waitMetric(t, metrics, "dedup_topic_missing", 1, `topic="`+missing+`"`)
			checkHealthy(t, metrics)
			if g := cluster.GroupInfo("dedup"); g != nil && g.Epoch > 0 {
				t.Errorf("the group is at generation %d while %s is missing: want no member joined", g.Epoch, missing)
			}

			if err := cluster.CreateTopic(missing, 2, nil); err != nil {
				t.Fatal(err)
			}
			waitReady(t, bin, metrics)
			waitMetric(t, metrics, "dedup_topic_missing", 0, `topic="`+missing+`"`)
			waitLog(t, bin, "topic present again", "topic="+missing)

			const keys = 20
			client := []kgo.Opt{kgo.SeedBrokers(cluster.ListenAddrs()[0])}
			testkit.Produce(t, client, keyedWithDuplicates("events", keys, 2)...)
			waitCommitted(t, cluster, 2*keys)
			checkExactlyOnce(t, cluster.ListenAddrs()[0], client, keys)
			if n := len(logLines(bin.stderr.String(), "topic missing")); n != 1 {
				t.Errorf("%d lines say the topic is missing, want 1", n)
			}
			bin.stopOK(t, "")
		})
	}
}

// TestOutputTopicDeletedAtRuntime: the output topic deleted under a running
// stage is named once, makes it not ready and sets the gauge, and the
// member stays in its generation (no rebalance loop); once the topic is
// created again, new input is forwarded exactly once.
func TestOutputTopicDeletedAtRuntime(t *testing.T) {
	cluster := testkit.Cluster(t, 2)
	bin, env := stageAgainst(t, cluster, nil)
	metrics := env["METRICS_ADDR"]
	addr := cluster.ListenAddrs()[0]
	client := []kgo.Opt{kgo.SeedBrokers(addr)}
	const keys = 10
	testkit.Produce(t, client, keyedWithDuplicates("events", keys, 2)...)
	before := map[int32]bool{} // output partitions written before the deletion
	for _, r := range testkit.ConsumeN(t, client, "events-deduped", keys) {
		before[r.Partition] = true
	}
	generations, err := testkit.MetricSum(metrics, "dedup_group_generations_total")
	if err != nil {
		t.Fatal(err)
	}
	epoch := cluster.GroupInfo("dedup").Epoch

	if err := cluster.DeleteTopic("events-deduped"); err != nil {
		t.Fatal(err)
	}
	waitLog(t, bin, "topic missing", "topic=events-deduped")
	waitNotReadyNaming(t, metrics, "events-deduped")
	waitMetric(t, metrics, "dedup_topic_missing", 1, `topic="events-deduped"`)
	checkHealthy(t, metrics)
	// Several cluster checks and group heartbeats pass while it is missing.
	testkit.Consistently(t, 5*time.Second, func() error {
		if g, err := testkit.MetricSum(metrics, "dedup_group_generations_total"); err != nil || g != generations {
			return fmt.Errorf("generations %v -> %v (%v) while the output topic is missing: want none", generations, g, err)
		}
		if e := cluster.GroupInfo("dedup").Epoch; e != epoch {
			return fmt.Errorf("group generation %d -> %d while the output topic is missing: want none", epoch, e)
		}
		return nil
	})
	recreateTopic(t, cluster, bin, metrics, "events-deduped")
	// New keys and repeats of the old ones: only the new keys reach the
	// new output topic, once each.
	var recs []*kgo.Record
	for c := range 2 {
		for i := range 2 * keys {
			recs = append(recs, &kgo.Record{Topic: "events", Key: fmt.Appendf(nil, "k%03d", i), Value: fmt.Appendf(nil, "v%03d-copy%d", i, c)})
		}
	}
	testkit.Produce(t, client, recs...)
	waitCommitted(t, cluster, int64(2*keys+len(recs)))
	out := testkit.ConsumeN(t, client, "events-deduped", keys)
	for _, r := range out {
		if string(r.Key) < fmt.Sprintf("k%03d", keys) {
			t.Errorf("key %s forwarded again after the output topic came back", r.Key)
		}
	}
	if n := testkit.EndOffsets(t, addr, "events-deduped", 2); n != keys {
		t.Errorf("new output topic holds %d records, want %d", n, keys)
	}
	if n := len(logLines(bin.stderr.String(), "topic missing")); n != 1 {
		t.Errorf("%d lines say the topic is missing, want 1", n)
	}
	// The new topic's offsets start again at 0: each output partition
	// written before and after is found truncated, once, and named.
	after := map[int32]bool{}
	for _, r := range out {
		after[r.Partition] = true
	}
	both := 0
	for p := range int32(2) {
		want := 0.0
		if before[p] && after[p] {
			want = 1
			both++
		}
		match := fmt.Sprintf(`partition="%d"`, p)
		if got, err := testkit.MetricSum(metrics, "dedup_output_truncations_total", `topic="events-deduped"`, match); err != nil || got != want {
			t.Errorf("dedup_output_truncations_total{%s} = %v (%v), want %v", match, got, err, want)
		}
		lines := logLines(bin.stderr.String(), "level=ERROR", "output partition truncated", fmt.Sprintf("partition=%d ", p))
		if float64(len(lines)) != want {
			t.Errorf("%d error lines name output partition %d truncated, want %v", len(lines), p, want)
		}
	}
	if both == 0 {
		t.Fatal("no output partition written both before and after: the test would prove nothing")
	}
}

// advertised is a listener that kfake advertises under another address:
// the proxy's, so that every client connection goes through the proxy.
type advertised struct {
	net.Listener
	addr net.Addr
}

func (a advertised) Addr() net.Addr { return a.addr }

// clusterBehindProxy starts a kfake broker that clients reach only through
// the returned proxy.
func clusterBehindProxy(t *testing.T) (*kfake.Cluster, *tcpproxy.Proxy) {
	t.Helper()
	proxy, err := tcpproxy.Listen("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	cluster := testkit.Cluster(t, 2, kfake.ListenFn(func(network, _ string) (net.Listener, error) {
		ln, err := net.Listen(network, "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		proxy.SetTarget(ln.Addr().String())
		return advertised{Listener: ln, addr: proxy.Addr()}, nil
	}))
	return cluster, proxy
}

// TestBrokerLossAtRuntime: the network to the broker cut for a few seconds
// under a running stage: one warning when it is lost, one line when it is
// back, the connectivity gauge, /readyz 503 naming it, /healthz 200, few
// lines meanwhile, and every first occurrence forwarded once.
func TestBrokerLossAtRuntime(t *testing.T) {
	cluster, proxy := clusterBehindProxy(t)
	addr := cluster.ListenAddrs()[0] // the proxy
	bin, env := stageAgainst(t, cluster, nil)
	metrics := env["METRICS_ADDR"]
	client := []kgo.Opt{kgo.SeedBrokers(addr)}
	const keys = 20
	first := keyedWithDuplicates("events", keys, 2)
	testkit.Produce(t, client, first[:keys+keys/2]...) // the first half of the copies now
	testkit.ConsumeN(t, client, "events-deduped", keys)
	waitMetric(t, metrics, "dedup_broker_connected", 1)

	logBefore := len(bin.stderr.String())
	proxy.Cut()
	cutAt := time.Now()
	waitLog(t, bin, "Kafka brokers unreachable")
	waitMetric(t, metrics, "dedup_broker_connected", 0)
	waitNotReadyNaming(t, metrics, "unreachable")
	checkHealthy(t, metrics)
	// Hold the cut long enough for several retries of every client.
	for time.Since(cutAt) < 6*time.Second {
		time.Sleep(100 * time.Millisecond) // the fault's duration, not synchronisation
	}
	proxy.Restore()
	cut := time.Since(cutAt)

	waitLog(t, bin, "Kafka brokers reachable again")
	waitMetric(t, metrics, "dedup_broker_connected", 1)
	waitReady(t, bin, metrics)
	testkit.Produce(t, client, first[keys+keys/2:]...)
	waitCommitted(t, cluster, int64(len(first)))
	checkExactlyOnce(t, addr, client, keys)

	during := bin.stderr.String()[logBefore:]
	if n := len(logLines(during, "Kafka brokers unreachable")); n != 1 {
		t.Errorf("%d lines say the brokers are unreachable, want 1", n)
	}
	if n := len(logLines(during, "Kafka brokers reachable again")); n != 1 {
		t.Errorf("%d lines say the brokers are back, want 1", n)
	}
	// Each client that meets the cut may say so before the watch does;
	// from the watch's line on, about one line per 2 s at most, and no
	// error once the brokers are back.
	var loud, afterBack []string
	lost, back := false, false
	for _, l := range strings.Split(during, "\n") {
		switch {
		case strings.Contains(l, "Kafka brokers unreachable"):
			lost = true
			continue
		case strings.Contains(l, "Kafka brokers reachable again"):
			back = true
			continue
		}
		if lost && !back && (strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR")) {
			loud = append(loud, l)
		}
		if back && strings.Contains(l, "level=ERROR") {
			afterBack = append(afterBack, l)
		}
	}
	if limit := int(cut / (2 * time.Second)); len(loud) > limit {
		t.Errorf("%d warnings and errors while the brokers were unreachable for %v, want at most %d (one per 2s):\n%s",
			len(loud), cut.Round(time.Second), limit, strings.Join(loud, "\n"))
	}
	if len(afterBack) > 0 {
		t.Errorf("errors after the brokers were back:\n%s", strings.Join(afterBack, "\n"))
	}
	bin.stopOK(t, "")
}

// TestInputTopicDeletedAtRuntime: the input topic deleted under a running
// stage is named once, makes it not ready and sets the gauge, and the
// member takes no new generation while it is missing (kafka-go's partition
// watch would otherwise end one after another); once the topic is created
// again the stage is ready again.
func TestInputTopicDeletedAtRuntime(t *testing.T) {
	cluster := testkit.Cluster(t, 2)
	bin, env := stageAgainst(t, cluster, nil)
	metrics := env["METRICS_ADDR"]
	client := []kgo.Opt{kgo.SeedBrokers(cluster.ListenAddrs()[0])}
	const keys = 10
	testkit.Produce(t, client, keyedWithDuplicates("events", keys, 2)...)
	testkit.ConsumeN(t, client, "events-deduped", keys)
	epoch := cluster.GroupInfo("dedup").Epoch

	if err := cluster.DeleteTopic("events"); err != nil {
		t.Fatal(err)
	}
	waitLog(t, bin, "topic missing", "topic=events", "role=input")
	waitNotReadyNaming(t, metrics, "events")
	waitMetric(t, metrics, "dedup_topic_missing", 1, `topic="events"`)
	checkHealthy(t, metrics)
	// The generation in place ends (its partitions are gone); kafka-go
	// prepares one more and waits: at most two generations while missing.
	testkit.Consistently(t, 6*time.Second, func() error {
		if e := cluster.GroupInfo("dedup").Epoch; e > epoch+2 {
			return fmt.Errorf("group generation %d -> %d while the input topic is missing: a rebalance loop", epoch, e)
		}
		return nil
	})
	recreateTopic(t, cluster, bin, metrics, "events")
	waitMetric(t, metrics, "dedup_topic_missing", 0, `topic="events"`)
	if e := cluster.GroupInfo("dedup").Epoch; e > epoch+5 {
		t.Errorf("group generation %d -> %d over the whole episode, want a few", epoch, e)
	}
	if n := len(logLines(bin.stderr.String(), "topic missing")); n != 1 {
		t.Errorf("%d lines say the topic is missing, want 1", n)
	}
	// The new topic's log ends below the offsets the stage had reached:
	// each partition says so, counts it, and reads the new records (the
	// reader alone would wait until the new log passed the old offsets).
	for p := range 2 {
		match := fmt.Sprintf(`partition="%d"`, p)
		waitMetric(t, metrics, "dedup_input_truncations_total", 1, `topic="events"`, match)
		if lines := logLines(bin.stderr.String(), "level=ERROR", "input truncated", fmt.Sprintf("partition=%d ", p), "end_offset=0 "); len(lines) != 1 {
			t.Errorf("%d error lines name partition %d's input truncated at end offset 0, want 1", len(lines), p)
		}
	}
	var fresh []*kgo.Record
	for i := range keys {
		fresh = append(fresh, &kgo.Record{Topic: "events", Key: fmt.Appendf(nil, "new%03d", i), Value: []byte("v")})
	}
	testkit.Produce(t, client, fresh...)
	waitCommitted(t, cluster, int64(len(fresh)))
	seen := map[string]int{}
	for _, r := range testkit.ConsumeN(t, client, "events-deduped", 2*keys) {
		seen[string(r.Key)]++
	}
	for _, r := range fresh {
		if seen[string(r.Key)] != 1 {
			t.Errorf("new key %s forwarded %d times, want once", r.Key, seen[string(r.Key)])
		}
	}
}

// coordinatorFault makes the group coordinator refuse joins (and, to force
// a running member to rejoin, answer its heartbeats with
// REBALANCE_IN_PROGRESS) while failing is set.
type coordinatorFault struct {
	failing atomic.Bool
	refused atomic.Int64 // joins refused
}

func installCoordinatorFault(c *kfake.Cluster) *coordinatorFault {
	f := &coordinatorFault{}
	c.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !f.failing.Load() {
			return nil, nil, false
		}
		f.refused.Add(1)
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !f.failing.Load() {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		return resp, nil, true
	})
	return f
}

// TestGroupJoinFailures: the coordinator refuses joins at start-up (before
// the first generation) and at runtime (a running member sent to rejoin).
// Within 15 s the stage names it in one warning (not a line per retry),
// counts each refused join in dedup_group_join_failures_total, answers
// /readyz 503 and keeps /healthz 200; when joins succeed again it says so
// once, and the output holds every first occurrence once.
func TestGroupJoinFailures(t *testing.T) {
	for _, point := range []string{"start", "runtime"} {
		t.Run(point, func(t *testing.T) {
			cluster := testkit.Cluster(t, 2)
			fault := installCoordinatorFault(cluster)
			addr := cluster.ListenAddrs()[0]
			client := []kgo.Opt{kgo.SeedBrokers(addr)}
			const keys = 40
			recs := keyedWithDuplicates("events", keys, 2)

			var bin *binary
			var env testkit.Env
			sent := 0
			if point == "start" {
				fault.failing.Store(true)
				env = testEnv(t)
				env["KAFKA_BROKERS"] = addr
				env["LOG_LEVEL"] = "info"
				bin = startBinary(t, env)
			} else {
				bin, env = stageAgainst(t, cluster, nil)
				sent = keys / 2
				testkit.Produce(t, client, recs[:sent]...)
				testkit.ConsumeN(t, client, "events-deduped", sent)
				fault.failing.Store(true)
			}
			metrics := env["METRICS_ADDR"]

			waitLog(t, bin, "join consumer group failed")
			waitNotReadyNaming(t, metrics, "consumer-group generation")
			// Several refused joins later, still one warning.
			testkit.WaitFor(t, "refused joins counted", 30*time.Second, func() (bool, error) {
				n, err := testkit.MetricSum(metrics, "dedup_group_join_failures_total")
				return n >= 4 && fault.refused.Load() >= 4, err
			})
			if n := len(logLines(bin.stderr.String(), "join consumer group failed")); n != 1 {
				t.Errorf("%d warnings for one streak of refused joins, want 1", n)
			}
			checkHealthy(t, metrics)
			testkit.Produce(t, client, recs[sent:]...) // the rest arrives during the fault

			fault.failing.Store(false)
			waitLog(t, bin, "consumer group joined again")
			testkit.WaitFor(t, "ready again", 30*time.Second, func() (bool, error) {
				code, _, err := readyz(metrics)
				return code == http.StatusOK, err
			})
			checkExactlyOnce(t, addr, client, keys)
			bin.stopOK(t, "")
		})
	}
}

// TestLeaderAndCoordinatorMoves: partition leaders of every topic (input,
// output, checkpoints) and the group coordinator move between brokers of a
// three-broker cluster at several points while records flow. The stage
// follows them without a warning or error line, stays healthy, and the
// output holds every first occurrence once.
func TestLeaderAndCoordinatorMoves(t *testing.T) {
	cluster := testkit.Cluster(t, 2, kfake.NumBrokers(3))
	addr := cluster.ListenAddrs()[0]
	bin, env := stageAgainst(t, cluster, nil)
	client := []kgo.Opt{kgo.SeedBrokers(cluster.ListenAddrs()...)}
	const keys, moves = 60, 4
	recs := keyedWithDuplicates("events", keys, 2)
	step := len(recs) / moves
	seen := map[string]bool{}
	for i := range moves {
		batch := recs[i*step : (i+1)*step]
		if i == moves-1 {
			batch = recs[i*step:]
		}
		cluster.ShufflePartitionLeaders()
		if i%2 == 1 {
			cluster.RehashCoordinators()
		}
		testkit.Produce(t, client, batch...)
		for _, r := range batch {
			seen[string(r.Key)] = true
		}
		// The next move comes after the stage has forwarded this batch's
		// first occurrences: each move lands at another point of the run.
		want := int64(len(seen))
		testkit.WaitFor(t, "first occurrences so far forwarded", 30*time.Second, func() (bool, error) {
			n, err := testkit.SumEndOffsets(addr, "events-deduped", 2)
			return n == want, err
		})
	}
	checkExactlyOnce(t, addr, client, keys)
	checkHealthy(t, env["METRICS_ADDR"])
	// A routine election is not an operator's concern: no warning, no
	// produce failure, no failed checkpoint.
	for _, level := range []string{"level=ERROR", "level=WARN"} {
		if lines := logLines(bin.stderr.String(), level); len(lines) > 0 {
			t.Errorf("%s lines while leaders moved: %q", level, lines)
		}
	}
	bin.stopOK(t, "")
}
