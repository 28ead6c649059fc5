package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/internal/testkit"
)

// asBinaryEnv makes the test binary behave as the dedup binary, so tests
// can drive the real process (signals, exit codes) without a separate build.
const asBinaryEnv = "DEDUP_TEST_RUN_AS_BINARY"

func TestMain(m *testing.M) {
	testkit.Main(m, asBinaryEnv, realMain)
}

// testEnv is the environment every stage under test starts from: nothing
// inherited from the machine's KAFKA_*/DEDUP_* settings, short timeouts.
func testEnv(t *testing.T) testkit.Env {
	return testkit.Env{
		"KAFKA_BROKERS":         "",
		"DATA_DIR":              t.TempDir(),
		"METRICS_ADDR":          testkit.FreeAddr(t),
		"EMBEDDED_PARTITIONS":   "2",
		"KAFKA_SESSION_TIMEOUT": "6s",
		"CHECKPOINT_INTERVAL":   "1s",
		"FETCH_MAX_WAIT":        "100ms",
		"SHUTDOWN_TIMEOUT":      "20s",
		"LOG_LEVEL":             "debug",
	}
}

// clusterEnv is testEnv against cluster's broker, with extra on top.
func clusterEnv(t *testing.T, cluster *kfake.Cluster, extra testkit.Env) testkit.Env {
	env := testEnv(t)
	env["KAFKA_BROKERS"] = cluster.ListenAddrs()[0]
	maps.Copy(env, extra)
	return env
}

// embeddedEnv is testEnv with an embedded broker on a free port of its
// own (EMBEDDED_BROKER_ADDR), with extra on top.
func embeddedEnv(t *testing.T, extra testkit.Env) testkit.Env {
	env := testEnv(t)
	env["EMBEDDED_BROKER_ADDR"] = testkit.FreeAddr(t)
	maps.Copy(env, extra)
	return env
}

// runOnce runs the binary with env until recs are written to the output
// (forwarded of them) and committed, then stops it and wants exit 0.
func runOnce(t *testing.T, cluster *kfake.Cluster, env testkit.Env, recs []*kgo.Record, forwarded int) *binary {
	t.Helper()
	client := []kgo.Opt{kgo.SeedBrokers(cluster.ListenAddrs()[0])}
	bin := startBinary(t, env)
	waitReady(t, bin, env["METRICS_ADDR"])
	testkit.Produce(t, client, recs...)
	testkit.ConsumeN(t, client, "events-deduped", forwarded)
	waitCommitted(t, cluster, int64(len(recs)))
	bin.stopOK(t, "run")
	return bin
}

// binary is the dedup process under test: the test binary acting as
// dedup (TestMain).
type binary struct {
	*testkit.Process
	stdout, stderr *testkit.SyncBuffer
}

// startBinary runs the test binary as dedup with exactly env (plus PATH).
func startBinary(t *testing.T, env testkit.Env, args ...string) *binary {
	t.Helper()
	b := &binary{stdout: &testkit.SyncBuffer{}, stderr: &testkit.SyncBuffer{}}
	env = maps.Clone(env)
	env[asBinaryEnv] = "1"
	b.Process = testkit.StartProcess(t, os.Args[0], args, env, b.stdout, b.stderr, func() string {
		return fmt.Sprintf("stdout:\n%s\nstderr:\n%s", b.stdout, b.stderr)
	})
	return b
}

// exited reports an early exit (a crash) while the test waits on something.
func (b *binary) exited() (int, bool) { return b.Exited() }

// underTest is a dedup under test, as a process or in-process.
type underTest interface{ exited() (int, bool) }

// waitReady waits until /readyz on the metrics address answers 200, and
// fails at once if the stage exits first.
func waitReady(t *testing.T, s underTest, metrics string) {
	t.Helper()
	testkit.WaitFor(t, "/readyz 200", 60*time.Second, func() (bool, error) {
		if code, ok := s.exited(); ok {
			t.Fatalf("dedup exited early with %d", code)
		}
		code, err := testkit.HTTPStatus("http://" + metrics + "/readyz")
		return code == http.StatusOK, err
	})
}

// stop sends SIGTERM and returns the exit code.
func (b *binary) stop(t *testing.T, within time.Duration) int {
	t.Helper()
	if err := b.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signal dedup: %v", err)
	}
	return b.waitExit(t, within)
}

// stopOK sends SIGTERM and wants exit 0 within 30s; what, when not
// empty, names the run in the failure.
func (b *binary) stopOK(t *testing.T, what string) {
	t.Helper()
	if code := b.stop(t, 30*time.Second); code != exitOK {
		t.Fatalf("dedup %s: exit %d after SIGTERM, want 0", what, code)
	}
}

// waitExit waits for the process to end and returns its exit code.
func (b *binary) waitExit(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-b.Done():
		code, _ := b.Exited()
		return code
	case <-time.After(within):
		t.Fatalf("dedup did not exit within %s", within)
		return -1
	}
}

// inProcess runs run() in a goroutine, for tests that need no real signal.
type inProcess struct {
	cancel         context.CancelFunc
	stdout, stderr *testkit.SyncBuffer
	done           chan int
}

func startInProcess(t *testing.T, env testkit.Env, args ...string) *inProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &inProcess{cancel: cancel, stdout: &testkit.SyncBuffer{}, stderr: &testkit.SyncBuffer{}, done: make(chan int, 1)}
	go func() { p.done <- run(ctx, args, env.Lookup, p.stdout, p.stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Error("run did not return within 30s of cancel")
		}
		if t.Failed() {
			t.Logf("dedup stdout:\n%s\ndedup stderr:\n%s", p.stdout, p.stderr)
		}
	})
	return p
}

// stop cancels the run and returns its exit code.
func (p *inProcess) stop(t *testing.T) int {
	t.Helper()
	p.cancel()
	select {
	case code := <-p.done:
		p.done <- code // for Cleanup
		return code
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return within 30s of cancel")
		return -1
	}
}

// exited reports an early exit (a crash) while the test waits on something.
func (p *inProcess) exited() (int, bool) {
	select {
	case code := <-p.done:
		p.done <- code
		return code, true
	default:
		return 0, false
	}
}

// keyedWithDuplicates is n distinct keys, each sent copies times, interleaved.
func keyedWithDuplicates(topic string, n, copies int) []*kgo.Record {
	var recs []*kgo.Record
	for c := range copies {
		for i := range n {
			recs = append(recs, &kgo.Record{
				Topic: topic,
				Key:   fmt.Appendf(nil, "k%03d", i),
				Value: fmt.Appendf(nil, "v%03d-copy%d", i, c),
			})
		}
	}
	return recs
}
