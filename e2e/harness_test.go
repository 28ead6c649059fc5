package e2e_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"dedup/internal/testkit"
)

const (
	// The topics on kfake; against an external cluster each test has its
	// own (namesOf).
	inputTopic    = "events"
	outputTopic   = "events-deduped"
	numPartitions = 3

	hdrSourceTopic     = "dedup-source-topic"
	hdrSourcePartition = "dedup-source-partition"
	hdrSourceOffset    = "dedup-source-offset"

	// sessionTimeout is what the binary asks the group for; the broker's
	// minimum is lowered below it so a killed member's partitions move fast.
	sessionTimeout = "1s"
	// shutdownTimeout is SHUTDOWN_TIMEOUT: a SIGTERM must end in exit 0
	// within it.
	shutdownTimeout = 10 * time.Second
)

// testSeed returns the seed of the test's random choices: E2E_SEED when set,
// else a fresh one, logged so that a failure can be replayed.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("E2E_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("parse E2E_SEED=%q: %v", s, err)
		}
		t.Logf("seed %d (from E2E_SEED)", v)
		return v
	}
	v := uint64(time.Now().UnixNano())
	t.Logf("seed %d (rerun with E2E_SEED=%d)", v, v)
	return v
}

func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// scenario is what most runs start from: the test's seeded random source,
// a fresh cluster, a workload of generated records and an observer of the
// output.
type scenario struct {
	rng     *rand.Rand
	brokers string
	w       *workload
	obs     *observer
}

func newScenario(t *testing.T, records int) scenario {
	t.Helper()
	rng := newRand(testSeed(t))
	_, brokers := newCluster(t)
	w := newWorkload(rng, records, time.Now().Truncate(time.Millisecond))
	return scenario{rng: rng, brokers: brokers, w: w, obs: startObserver(t, brokers)}
}

// finish waits until the whole input is produced and forwarded (guard
// failing the wait), stops p, the last stage standing, with SIGTERM, and
// verifies the output.
func (s scenario) finish(t *testing.T, pr *producer, guard func() error, sentinels time.Duration, p *proc) {
	t.Helper()
	pr.waitDone(t, 90*time.Second, guard)
	s.obs.waitSentinels(t, sentinels, guard)
	waitLagZero(t, p)
	p.termOK(t)
	verify(t, s.w, s.obs.drain(t, s.brokers))
}

// stageEnv is the environment of one deduplication stage: everything the
// binary needs, nothing inherited from the test's own environment except
// PATH and HOME.
func stageEnv(t *testing.T, brokers, store string) map[string]string {
	t.Helper()
	n := namesOf(t)
	dataDir := t.TempDir()
	return map[string]string{
		"KAFKA_BROKERS":         brokers,
		"INPUT_TOPIC":           n.input,
		"OUTPUT_TOPIC":          n.output,
		"GROUP_ID":              n.group,
		"CHECKPOINT_STORE":      store,
		"CHECKPOINT_DIR":        filepath.Join(dataDir, "checkpoints"),
		"CHECKPOINT_INTERVAL":   "200ms",
		"KAFKA_SESSION_TIMEOUT": sessionTimeout,
		"DATA_DIR":              dataDir,
		"DEDUP_WINDOW":          "24h",
		// Sized so that a false positive (a first occurrence dropped) has
		// negligible probability: ~7,000 keys per partition against a
		// filter built for 50,000 at 1e-6.
		"DEDUP_EXPECTED_KEYS": "50000",
		"DEDUP_FP_RATE":       "0.000001",
		"SHUTDOWN_TIMEOUT":    shutdownTimeout.String(),
		"LOG_LEVEL":           logLevel(),
	}
}

// logLevel is the binary's LOG_LEVEL: info, or E2E_LOG_LEVEL when set (say,
// debug while chasing a failure).
func logLevel() string {
	if l := os.Getenv("E2E_LOG_LEVEL"); l != "" {
		return l
	}
	return "info"
}

func cloneEnv(env map[string]string) map[string]string {
	out := make(map[string]string, len(env))
	for k, v := range env {
		out[k] = v
	}
	return out
}

// proc is one run of the binary.
type proc struct {
	name    string
	metrics string // METRICS_ADDR
	logPath string // stdout and stderr
	*testkit.Process
	started time.Time
	termAt  time.Time // when SIGTERM was sent
	stopped bool      // the test sent SIGTERM or SIGKILL
}

// startProc starts the binary with env plus a fresh METRICS_ADDR. Cleanup
// kills it if it still runs and, when the test failed, copies the tail of
// its output into the test log.
func startProc(t *testing.T, name string, env map[string]string) *proc {
	t.Helper()
	env = cloneEnv(env)
	env["METRICS_ADDR"] = testkit.FreeAddr(t)
	p := &proc{
		name:    name,
		metrics: env["METRICS_ADDR"],
		logPath: filepath.Join(logDir(t), name+".log"),
	}
	logf, err := os.Create(p.logPath)
	if err != nil {
		t.Fatalf("create log of %s: %v", name, err)
	}
	// The child holds its own copy of the file; the log is read by path.
	defer logf.Close()
	p.Process = testkit.StartProcess(t, binPath, nil, env, logf, logf, func() string { return tail(p.logPath, 12<<10) })
	p.started = time.Now()
	return p
}

// logDir is where process output goes: a temporary directory, or
// E2E_LOG_DIR/<test name> when set, kept for reading after the run.
func logDir(t *testing.T) string {
	t.Helper()
	root := os.Getenv("E2E_LOG_DIR")
	if root == "" {
		return t.TempDir()
	}
	dir := filepath.Join(root, strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("create log dir: %v", err)
	}
	return dir
}

func (p *proc) exited() bool {
	_, ok := p.Exited()
	return ok
}

// exitCode is the process's exit status; -1 when a signal ended it.
func (p *proc) exitCode() int { return p.Cmd.ProcessState.ExitCode() }

func (p *proc) status() string { return p.Status() }

// kill SIGKILLs the process and waits for it to be gone.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	p.stopped = true
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil && !p.exited() {
		t.Fatalf("SIGKILL %s: %v", p.name, err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still running 10s after SIGKILL", p.name)
	}
}

// sigterm sends SIGTERM; waitTermOK then asserts how the process ended.
// It first waits for /healthz 200: a process signalled before its runtime
// installed the handler dies of the signal, which says nothing about the
// stage.
func (p *proc) sigterm(t *testing.T) {
	t.Helper()
	waitHealthy(t, p, 30*time.Second)
	p.termAt = time.Now()
	p.stopped = true
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM %s: %v (%s)", p.name, err, p.status())
	}
}

// waitTermOK asserts the contract for SIGTERM: exit 0 within
// SHUTDOWN_TIMEOUT.
func (p *proc) waitTermOK(t *testing.T) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(time.Until(p.termAt.Add(shutdownTimeout + 5*time.Second))):
		t.Fatalf("%s still running %s after SIGTERM (SHUTDOWN_TIMEOUT=%s)", p.name, time.Since(p.termAt).Round(time.Millisecond), shutdownTimeout)
	}
	took := time.Since(p.termAt)
	if code := p.exitCode(); code != 0 {
		t.Fatalf("%s: SIGTERM ended in %s after %s, want exit 0", p.name, p.status(), took.Round(time.Millisecond))
	}
	if took > shutdownTimeout {
		t.Errorf("%s: SIGTERM exit took %s, more than SHUTDOWN_TIMEOUT=%s", p.name, took.Round(time.Millisecond), shutdownTimeout)
	}
	t.Logf("%s: SIGTERM -> exit 0 in %s", p.name, took.Round(time.Millisecond))
}

// termOK stops the process with SIGTERM and asserts exit 0 in time.
func (p *proc) termOK(t *testing.T) {
	t.Helper()
	p.sigterm(t)
	p.waitTermOK(t)
}

func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(open log: %v)", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(stat log: %v)", err)
	}
	if st.Size() > n {
		if _, err := f.Seek(st.Size()-n, io.SeekStart); err != nil {
			return fmt.Sprintf("(seek log: %v)", err)
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(read log: %v)", err)
	}
	return string(b)
}

// errNotYet is what a poll condition returns while it waits.
var errNotYet = errors.New("not yet")

// waitFor polls cond until it returns nil, fails the test at once when
// cond returns an error other than errNotYet, and fails it when the
// deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	testkit.WaitFor(t, what, timeout, func() (bool, error) {
		err := cond()
		if err != nil && !errors.Is(err, errNotYet) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		return err == nil, err
	})
}

// alive is a poll guard: a stage process that exits on its own while the test
// waits is a failure, not something to wait out.
func alive(ps ...*proc) error {
	for _, p := range ps {
		if p.exited() {
			return fmt.Errorf("%s exited on its own: %s", p.name, p.status())
		}
	}
	return nil
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

// httpStatus returns the status code of GET http://addr/path, or 0 when the
// request failed.
func httpStatus(addr, path string) int {
	resp, err := httpClient.Get("http://" + addr + path)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// waitHealthy waits until /healthz answers 200.
func waitHealthy(t *testing.T, p *proc, timeout time.Duration) {
	t.Helper()
	waitOK(t, p, "/healthz", timeout)
}

// waitReady waits until /readyz answers 200.
func waitReady(t *testing.T, p *proc, timeout time.Duration) {
	t.Helper()
	waitOK(t, p, "/readyz", timeout)
}

// waitOK waits until p answers 200 on path, failing at once if p exits.
func waitOK(t *testing.T, p *proc, path string, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, p.name+" "+path+" 200", func() error {
		if err := alive(p); err != nil {
			return err
		}
		if code := httpStatus(p.metrics, path); code != http.StatusOK {
			return fmt.Errorf("%w: %s %d", errNotYet, path, code)
		}
		return nil
	})
}

// waitSettled waits until the group is stable around the given instances:
// each answers /readyz 200 and together they own every input partition
// (dedup_assigned_partitions). Membership changes in the churn test wait for
// it, so that a SIGKILL never lands while a JoinGroup is in flight: kfake
// never expires a member whose JoinGroup response it could not deliver (its
// reply() skips the session timer when the connection is gone), and such a
// ghost would hold its partitions for the rest of the test.
func waitSettled(t *testing.T, timeout time.Duration, guard func() error, ps ...*proc) {
	t.Helper()
	waitFor(t, timeout, "the group to settle (every partition owned, every instance ready)", func() error {
		if err := guard(); err != nil {
			return err
		}
		var owned float64
		for _, p := range ps {
			if code := httpStatus(p.metrics, "/readyz"); code != http.StatusOK {
				return fmt.Errorf("%w: %s /readyz %d", errNotYet, p.name, code)
			}
			samples, err := scrape(p, 2*time.Second)
			if err != nil {
				return fmt.Errorf("%w: %s: %v", errNotYet, p.name, err)
			}
			n, _ := sum(samples, "dedup_assigned_partitions", nil)
			owned += n
		}
		if owned != numPartitions {
			return fmt.Errorf("%w: %v of %d partitions owned", errNotYet, owned, numPartitions)
		}
		return nil
	})
}

// waitJoined waits until p has joined a consumer-group generation
// (dedup_group_generations_total of at least 1), so that a stop sent next
// cannot land while p's JoinGroup is in flight: kfake would keep such a
// member for good (see waitSettled). A stop may still land while p
// restores, before /readyz answers 200.
func waitJoined(t *testing.T, p *proc, timeout time.Duration, guard func() error) {
	t.Helper()
	waitFor(t, timeout, p.name+" to join a generation", func() error {
		if err := guard(); err != nil {
			return err
		}
		samples, err := scrape(p, 2*time.Second)
		if err != nil {
			return fmt.Errorf("%w: %v", errNotYet, err)
		}
		if n, _ := sum(samples, "dedup_group_generations_total", nil); n < 1 {
			return errNotYet
		}
		return nil
	})
}

// mustScrape reads p's /metrics, failing the test if p does not answer.
func mustScrape(t *testing.T, p *proc) []sample {
	t.Helper()
	samples, err := scrape(p, 5*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	return samples
}

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads p's /metrics, giving up after timeout. The text format is
// simple enough to parse here; label values with commas or escaped quotes
// are not expected.
func scrape(p *proc, timeout time.Duration) ([]sample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.metrics+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape metrics: status %d", resp.StatusCode)
	}
	var out []sample
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s := sample{labels: map[string]string{}}
		rest := line
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				return nil, fmt.Errorf("parse metrics line %q", line)
			}
			s.name = line[:i]
			for _, kv := range strings.Split(line[i+1:j], ",") {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					continue
				}
				s.labels[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"`)
			}
			rest = strings.TrimSpace(line[j+1:])
		} else {
			name, r, _ := strings.Cut(line, " ")
			s.name, rest = name, r
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("parse metrics line %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("parse metrics line %q: %w", line, err)
		}
		s.value = v
		out = append(out, s)
	}
	return out, sc.Err()
}

// sum adds the samples of one family whose labels include match.
func sum(samples []sample, name string, match map[string]string) (total float64, n int) {
next:
	for _, s := range samples {
		if s.name != name {
			continue
		}
		for k, v := range match {
			if s.labels[k] != v {
				continue next
			}
		}
		total += s.value
		n++
	}
	return total, n
}

// waitLagZero waits until the process reports consumer lag 0 on every
// partition it owns (dedup_consumer_lag), after the last input was seen in
// the output.
func waitLagZero(t *testing.T, ps ...*proc) {
	t.Helper()
	waitFor(t, 30*time.Second, "dedup_consumer_lag to reach 0", func() error {
		if err := alive(ps...); err != nil {
			return err
		}
		lag, series, err := sumAcross(ps, "dedup_consumer_lag", map[string]string{"topic": namesOf(t).input})
		if err != nil {
			return err
		}
		if series < numPartitions || lag != 0 {
			return fmt.Errorf("%w: lag %v over %d series", errNotYet, lag, series)
		}
		return nil
	})
}

// sumAcross scrapes every process and sums family's series matching labels:
// the total and how many series there were. A process that does not answer
// is not yet ready (errNotYet).
func sumAcross(ps []*proc, family string, labels map[string]string) (float64, int, error) {
	var total float64
	var series int
	for _, p := range ps {
		samples, err := scrape(p, 2*time.Second)
		if err != nil {
			return 0, 0, fmt.Errorf("%w: %s: %v", errNotYet, p.name, err)
		}
		v, n := sum(samples, family, labels)
		total += v
		series += n
	}
	return total, series, nil
}

// procSet hands out numbered incarnations of one stage.
type procSet struct {
	mu  sync.Mutex
	seq int
}

func (s *procSet) next(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return fmt.Sprintf("%s#%d", prefix, s.seq)
}
