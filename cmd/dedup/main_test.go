package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// asBinaryEnv makes the test binary behave as the dedup binary, so tests
// can drive the real process (signals, exit codes) without a separate build.
const asBinaryEnv = "DEDUP_TEST_RUN_AS_BINARY"

func TestMain(m *testing.M) {
	if os.Getenv(asBinaryEnv) == "1" {
		os.Exit(realMain())
	}
	os.Exit(m.Run())
}

// freeAddr returns a 127.0.0.1 address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// syncBuffer is a bytes.Buffer safe to write from a process's output
// copier while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testEnv is the environment every stage under test starts from: nothing
// inherited from the machine's KAFKA_*/DEDUP_* settings, short timeouts.
func testEnv(t *testing.T) envMap {
	return envMap{
		"KAFKA_BROKERS":         "",
		"DATA_DIR":              t.TempDir(),
		"METRICS_ADDR":          freeAddr(t),
		"EMBEDDED_PARTITIONS":   "2",
		"KAFKA_SESSION_TIMEOUT": "6s",
		"CHECKPOINT_INTERVAL":   "1s",
		"FETCH_MAX_WAIT":        "100ms",
		"SHUTDOWN_TIMEOUT":      "20s",
		"LOG_LEVEL":             "debug",
	}
}

// binary is the dedup process under test.
type binary struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{}
	code           int
}

// startBinary runs the test binary as dedup with exactly env (plus PATH).
func startBinary(t *testing.T, env envMap, args ...string) *binary {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = []string{asBinaryEnv + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	b := &binary{cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = b.stdout, b.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		b.code = cmd.ProcessState.ExitCode()
		close(b.done)
	}()
	t.Cleanup(func() {
		select {
		case <-b.done:
		default:
			_ = cmd.Process.Kill()
			<-b.done
		}
		if t.Failed() {
			t.Logf("dedup stdout:\n%s\ndedup stderr:\n%s", b.stdout, b.stderr)
		}
	})
	return b
}

// exited reports an early exit (a crash) while the test waits on something.
func (b *binary) exited() (int, bool) {
	select {
	case <-b.done:
		return b.code, true
	default:
		return 0, false
	}
}

// underTest is a dedup under test, as a process or in-process.
type underTest interface{ exited() (int, bool) }

// waitReady waits until /readyz on the metrics address answers 200, and
// fails at once if the stage exits first.
func waitReady(t *testing.T, s underTest, metrics string) {
	t.Helper()
	waitFor(t, "/readyz 200", 60*time.Second, func() (bool, error) {
		if code, ok := s.exited(); ok {
			t.Fatalf("dedup exited early with %d", code)
		}
		code, err := httpStatus("http://" + metrics + "/readyz")
		return code == http.StatusOK, err
	})
}

// stop sends SIGTERM and returns the exit code.
func (b *binary) stop(t *testing.T, within time.Duration) int {
	t.Helper()
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signal dedup: %v", err)
	}
	select {
	case <-b.done:
		return b.code
	case <-time.After(within):
		t.Fatalf("dedup did not exit within %s of SIGTERM", within)
		return -1
	}
}

// inProcess runs run() in a goroutine, for tests that need no real signal.
type inProcess struct {
	cancel         context.CancelFunc
	stdout, stderr *syncBuffer
	done           chan int
}

func startInProcess(t *testing.T, env envMap, args ...string) *inProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &inProcess{cancel: cancel, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan int, 1)}
	go func() { p.done <- run(ctx, args, env.lookup, p.stdout, p.stderr) }()
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

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, lastErr)
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
}

func httpStatus(url string) (int, error) {
	resp, err := http.Get(url) //nolint:noctx // test helper with short-lived server
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)`)

// metricSum scrapes addr/metrics and sums the samples of family whose labels
// include every label="value" pair in match.
func metricSum(addr, family string, match ...string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics") //nolint:noctx
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	var sum float64
	found := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := sampleLine.FindStringSubmatch(sc.Text())
		if m == nil || m[1] != family {
			continue
		}
		ok := true
		for _, lv := range match {
			if !strings.Contains(m[2], lv) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return 0, err
		}
		sum += v
		found = true
	}
	if !found {
		return 0, fmt.Errorf("no sample of %s%v", family, match)
	}
	return sum, sc.Err()
}

// produce writes records with a franz-go client (not the project's own).
func produce(t *testing.T, opts []kgo.Opt, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// consumeN reads topic from the start until n records arrived.
func consumeN(t *testing.T, opts []kgo.Opt, topic string, n int) []*kgo.Record {
	t.Helper()
	opts = append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records from %s before the deadline", len(out), n, topic)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
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

// headerValue returns the value of header name, or "" when absent.
func headerValue(r *kgo.Record, name string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == name {
			return string(h.Value), true
		}
	}
	return "", false
}
