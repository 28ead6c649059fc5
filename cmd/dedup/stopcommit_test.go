package main

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/internal/testkit"
)

// TestStopFinalCommitFails: SIGTERM while the broker refuses every offset
// commit: the binary logs that the final commit failed and what the next
// start replays, and exits 1, not 0. A second start replays the
// uncommitted input and forwards nothing twice.
func TestStopFinalCommitFails(t *testing.T) {
	cluster := testkit.Cluster(t, 2)
	addr := cluster.ListenAddrs()[0]
	// No periodic commit: the stop's is the one that matters.
	bin, env := stageAgainst(t, cluster, testkit.Env{"CHECKPOINT_STORE": "file", "CHECKPOINT_INTERVAL": "1h"})
	metrics := env["METRICS_ADDR"]

	const keys, copies = 10, 2
	client := []kgo.Opt{kgo.SeedBrokers(addr)}
	testkit.Produce(t, client, keyedWithDuplicates("events", keys, copies)...)
	checkForwarded(t, testkit.ConsumeN(t, client, "events-deduped", keys), keys)
	testkit.WaitFor(t, "every input decided", 30*time.Second, func() (bool, error) {
		n, err := testkit.MetricSum(metrics, "dedup_messages_total", `outcome="duplicate"`)
		return n == keys*(copies-1), err
	})

	var refused atomic.Int64
	var refuse atomic.Bool
	refuse.Store(true)
	cluster.ControlKey(int16(kmsg.OffsetCommit), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if !refuse.Load() {
			return nil, nil, false
		}
		req := kreq.(*kmsg.OffsetCommitRequest)
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.GroupAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		refused.Add(1)
		return resp, nil, true
	})
	code := bin.stop(t, 40*time.Second)
	if refused.Load() == 0 {
		t.Fatal("no offset commit reached the broker at the stop")
	}
	if code != exitFailure {
		t.Errorf("exit code %d, want %d", code, exitFailure)
	}
	if !strings.Contains(bin.stderr.String(), "stop: final checkpoint or commit failed") ||
		!strings.Contains(bin.stderr.String(), "replays from the last committed offset") {
		t.Errorf("stderr lacks the final-commit failure line:\n%s", bin.stderr)
	}

	// The next start replays what was not committed: nothing new forwarded.
	refuse.Store(false)
	env["METRICS_ADDR"] = testkit.FreeAddr(t)
	again := startBinary(t, env)
	waitReady(t, again, env["METRICS_ADDR"])
	testkit.WaitFor(t, "the restart caught up", 30*time.Second, func() (bool, error) {
		// The restart resumes from the final checkpoint when it was saved,
		// else from the last commit, replaying (and suppressing) the rest.
		lag, err := testkit.MetricSum(env["METRICS_ADDR"], "dedup_consumer_lag")
		return err == nil && lag == 0, err
	})
	if n, err := testkit.SumEndOffsets(addr, "events-deduped", 2); err != nil || n != keys {
		t.Errorf("output holds %d records (%v), want %d", n, err, keys)
	}
	if code := again.stop(t, 40*time.Second); code != exitOK {
		t.Errorf("second exit code %d, want 0", code)
	}
}
