package main

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/internal/testkit"
)

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
