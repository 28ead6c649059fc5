package e2e_test

import (
	"bytes"
	"net"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"dedup/internal/testkit"
)

// kafkaTrap listens where KAFKA_BROKERS points and counts every connection:
// a configuration error must stop the binary before it dials anything.
func kafkaTrap(t *testing.T) (addr string, conns *atomic.Int64) {
	t.Helper()
	conns = new(atomic.Int64)
	return testkit.Listen(t, func(c net.Conn) {
		conns.Add(1)
		c.Close()
	}), conns
}

// runBadConfig runs the binary with env and returns its exit code, stderr
// and how long it ran; it fails the test if the binary is still running
// after 10 s.
func runBadConfig(t *testing.T, env map[string]string) (code int, stderr string, took time.Duration) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(binPath)
	cmd.Env = testkit.EnvList(env)
	cmd.Stdout = &out
	cmd.Stderr = &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("still running 10s after start with a bad configuration\nstderr:\n%s", errb.String())
	}
	took = time.Since(start)
	if t.Failed() || testing.Verbose() {
		t.Logf("exit %d after %s; stderr:\n%s", cmd.ProcessState.ExitCode(), took.Round(time.Millisecond), errb.String())
	}
	return cmd.ProcessState.ExitCode(), errb.String(), took
}

// badValues are values of the contract's variables that no reading of the
// contract allows.
var badValues = map[string]string{
	"DEDUP_WINDOW":          "fortnight",
	"CHECKPOINT_INTERVAL":   "often",
	"KAFKA_SESSION_TIMEOUT": "soon",
	"KAFKA_START_OFFSET":    "middle",
	"DEDUP_KEY":             "nowhere",
	"CHECKPOINT_STORE":      "s3",
	"DEDUP_FP_RATE":         "1.5",
	"DEDUP_EXPECTED_KEYS":   "lots",
}

// TestConfigError: several bad values at once end in exit 2, quickly, with
// every bad variable named on stderr, and without a single connection to
// the brokers; each bad value alone does the same.
func TestConfigError(t *testing.T) {
	base := func(t *testing.T) (map[string]string, *atomic.Int64) {
		addr, conns := kafkaTrap(t)
		return map[string]string{
			"KAFKA_BROKERS": addr,
			"METRICS_ADDR":  testkit.FreeAddr(t),
			"DATA_DIR":      t.TempDir(),
		}, conns
	}
	check := func(t *testing.T, env map[string]string, conns *atomic.Int64, bad []string) {
		t.Helper()
		code, stderr, took := runBadConfig(t, env)
		if code != 2 {
			t.Errorf("exit code %d, want 2 (configuration error)", code)
		}
		for _, name := range bad {
			if !strings.Contains(stderr, name) {
				t.Errorf("stderr does not name %s (set to %q)", name, env[name])
			}
		}
		if n := conns.Load(); n != 0 {
			t.Errorf("%d connection(s) to KAFKA_BROKERS before exiting on a configuration error, want none", n)
		}
		if took > 5*time.Second {
			t.Errorf("took %s to reject the configuration, want well under 5s", took.Round(time.Millisecond))
		}
	}

	t.Run("all at once", func(t *testing.T) {
		env, conns := base(t)
		var bad []string
		for k, v := range badValues {
			env[k] = v
			bad = append(bad, k)
		}
		check(t, env, conns, bad)
	})
	for name, value := range badValues {
		t.Run(name, func(t *testing.T) {
			env, conns := base(t)
			env[name] = value
			check(t, env, conns, []string{name})
		})
	}
}
