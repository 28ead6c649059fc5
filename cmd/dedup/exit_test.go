package main

import (
	"cmp"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/internal/kfaketest"
	"dedup/internal/testkit"
)

// fault is what an armed control does to the stage's requests of one API
// key, installed on a cluster for the whole test.
type fault struct {
	match func(kmsg.Request) bool // nil: every request of the key
	// answer, when set, answers a matched request with this error code;
	// otherwise a matched request is held until the test ends.
	answer  int16
	armed   atomic.Bool
	entered chan struct{} // one send per matched request, dropped when full
	release chan struct{}
}

func installFault(t *testing.T, c *kfake.Cluster, key kmsg.Key, f *fault) *fault {
	f.entered, f.release = make(chan struct{}, 1), make(chan struct{})
	t.Cleanup(func() { close(f.release) }) // before the cluster closes (cleanups run last first)
	c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !f.armed.Load() || (f.match != nil && !f.match(req)) {
			return nil, nil, false
		}
		select {
		case f.entered <- struct{}{}:
		default:
		}
		if f.answer != 0 {
			return kfaketest.ErrorResponse(req.(*kmsg.ProduceRequest), f.answer), nil, true
		}
		c.SleepControl(func() { <-f.release })
		return nil, nil, false
	})
	return f
}

// producesTo matches Produce requests for topic.
func producesTo(topic string) func(kmsg.Request) bool {
	return func(r kmsg.Request) bool { return kfaketest.ProducesTo(r.(*kmsg.ProduceRequest), topic) }
}

// stageAgainst starts the binary on cluster with the test settings and
// extra, and waits until it is ready.
func stageAgainst(t *testing.T, cluster *kfake.Cluster, extra testkit.Env) (*binary, testkit.Env) {
	t.Helper()
	env := clusterEnv(t, cluster, testkit.Env{"LOG_LEVEL": "info"})
	maps.Copy(env, extra)
	bin := startBinary(t, env)
	waitReady(t, bin, env["METRICS_ADDR"])
	return bin, env
}

// TestStopPastShutdownTimeoutExits1: a stop that cannot finish within
// SHUTDOWN_TIMEOUT ends the process with exit 1 and says why, once the
// timeout has passed and not after waiting on the broker. The broker holds
// the stage's requests at each step of the stop: the flush of outputs in
// flight, the offset commit, the final checkpoint (Kafka store) and
// leaving the group.
func TestStopPastShutdownTimeoutExits1(t *testing.T) {
	const keys = 20
	for _, point := range []struct {
		name  string
		key   kmsg.Key
		match func(kmsg.Request) bool
		env   testkit.Env
		// armEarly holds the requests before the input is written
		// (outputs in flight at the signal); otherwise they are held from
		// when the input has been forwarded.
		armEarly bool
		// shutdown is SHUTDOWN_TIMEOUT (default 2s): long enough for the
		// steps before the held one on a loaded machine, which the later
		// steps (the final checkpoint, leaving the group) need more of.
		shutdown time.Duration
	}{
		{name: "flush", key: kmsg.Produce, match: producesTo("events-deduped"), armEarly: true},
		{name: "commit", key: kmsg.OffsetCommit, armEarly: true},
		{name: "checkpoint", key: kmsg.Produce, match: producesTo("dedup-dedup-state"),
			env: testkit.Env{"CHECKPOINT_STORE": "kafka", "CHECKPOINT_INTERVAL": "1h"}, shutdown: 6 * time.Second},
		// Below kafka-go's 5 s network timeout, after which a held leave
		// gives up and the stop ends in time.
		{name: "leave", key: kmsg.LeaveGroup, shutdown: 4 * time.Second},
	} {
		t.Run(point.name, func(t *testing.T) {
			t.Parallel()
			cluster := testkit.Cluster(t, 2)
			f := installFault(t, cluster, point.key, &fault{match: point.match})
			shutdown := cmp.Or(point.shutdown, 2*time.Second)
			extra := testkit.Env{"SHUTDOWN_TIMEOUT": shutdown.String()}
			for k, v := range point.env {
				extra[k] = v
			}
			bin, _ := stageAgainst(t, cluster, extra)
			client := []kgo.Opt{kgo.SeedBrokers(cluster.ListenAddrs()[0])}
			if point.armEarly {
				f.armed.Store(true)
				testkit.Produce(t, client, keyedWithDuplicates("events", keys, 1)...)
				<-f.entered
			} else {
				testkit.Produce(t, client, keyedWithDuplicates("events", keys, 1)...)
				testkit.ConsumeN(t, client, "events-deduped", keys)
				f.armed.Store(true)
			}
			signalled := time.Now()
			code := bin.stop(t, shutdown+15*time.Second)
			if code != exitFailure {
				t.Fatalf("exit %d with the stop held at %s, want %d", code, point.name, exitFailure)
			}
			if took := time.Since(signalled); took < shutdown {
				t.Errorf("exited %v after SIGTERM, before SHUTDOWN_TIMEOUT %v", took, shutdown)
			}
			select {
			case <-f.entered:
			default:
				if !point.armEarly {
					t.Fatalf("the stop sent no request the fault holds: it proves nothing at %s", point.name)
				}
			}
			if s := bin.stderr.String(); !strings.Contains(s, "not done within SHUTDOWN_TIMEOUT "+shutdown.String()) {
				t.Errorf("stderr does not say the stop timed out:\n%s", s)
			}
		})
	}
}

// TestUndeliverableOutputExits1: outputs the broker keeps refusing, with
// a retriable code or with an outcome the stage cannot know, end the
// process with exit 1 after PRODUCE_RECOVERY_TIMEOUT, naming the failure;
// a restart once the broker accepts them again delivers every record once.
func TestUndeliverableOutputExits1(t *testing.T) {
	const recovery = 3 * time.Second
	const keys = 20
	for _, code := range []int16{kerr.NotLeaderForPartition.Code, kerr.RequestTimedOut.Code} {
		t.Run(kerr.ErrorForCode(code).Error(), func(t *testing.T) {
			t.Parallel()
			cluster := testkit.Cluster(t, 2)
			f := installFault(t, cluster, kmsg.Produce, &fault{match: producesTo("events-deduped"), answer: code})
			bin, env := stageAgainst(t, cluster, testkit.Env{"PRODUCE_RECOVERY_TIMEOUT": recovery.String()})
			f.armed.Store(true)
			client := []kgo.Opt{kgo.SeedBrokers(cluster.ListenAddrs()[0])}
			testkit.Produce(t, client, keyedWithDuplicates("events", keys, 2)...)
			<-f.entered
			failedAt := time.Now()
			if code := bin.waitExit(t, recovery+time.Minute); code != exitFailure {
				t.Fatalf("exit %d, want %d", code, exitFailure)
			}
			if took := time.Since(failedAt); took < recovery {
				t.Errorf("exited %v after the first failure, before PRODUCE_RECOVERY_TIMEOUT %v", took, recovery)
			}
			if s := bin.stderr.String(); !strings.Contains(s, "output undeliverable for") {
				t.Errorf("stderr does not name the failure:\n%s", s)
			}

			f.armed.Store(false)
			restarted := startBinary(t, env)
			out := testkit.ConsumeN(t, client, "events-deduped", keys)
			checkForwarded(t, out, keys)
			restarted.stopOK(t, "restarted stage")
			if n := testkit.EndOffsets(t, cluster.ListenAddrs()[0], "events-deduped", 2); n != keys {
				t.Fatalf("the output holds %d records, want %d: each key once", n, keys)
			}
		})
	}
}

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

	refusal := kfaketest.Refuse(cluster, kmsg.OffsetCommit, kerr.GroupAuthorizationFailed.Code)
	code := bin.stop(t, 40*time.Second)
	if refusal.Refused() == 0 {
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
	refusal.Lift()
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
