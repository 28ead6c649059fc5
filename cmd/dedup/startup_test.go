package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"dedup/internal/service"
	"dedup/internal/testkit"
)

// silentBroker accepts connections and never answers: a broker behind a
// black-holing network, on loopback terms.
func silentBroker(t *testing.T) string {
	t.Helper()
	return testkit.Listen(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) }) // read, never write
}

// unreachable are the brokers start-up must give up on: one that refuses
// connections (a closed port) and one that accepts and never answers.
func unreachable(t *testing.T) map[string]string {
	return map[string]string{"refusing": testkit.FreeAddr(t), "silent": silentBroker(t)}
}

// healthz returns /healthz's status and body.
func healthz(addr string) (int, string, error) { return testkit.Get("http://" + addr + "/healthz") }

// TestStartupGivesUp runs the stage against brokers it cannot reach, with
// both checkpoint stores: it says what it tries within seconds, /healthz
// never answers 200, and after KAFKA_STARTUP_TIMEOUT it exits 1 with one
// line naming the brokers and the last error.
func TestStartupGivesUp(t *testing.T) {
	const timeout = 3 * time.Second
	for kind, addr := range unreachable(t) {
		for _, store := range []string{"kafka", "file"} {
			t.Run(kind+"/"+store, func(t *testing.T) {
				t.Parallel()
				env := testEnv(t)
				env["KAFKA_BROKERS"] = addr
				env["CHECKPOINT_STORE"] = store
				env["KAFKA_STARTUP_TIMEOUT"] = timeout.String()
				env["LOG_LEVEL"] = "info"
				start := time.Now()
				p := startInProcess(t, env)
				testkit.WaitFor(t, "the first attempt logged", 2*time.Second, func() (bool, error) {
					s := p.stderr.String()
					return strings.Contains(s, "connecting to Kafka") && strings.Contains(s, addr) && strings.Contains(s, "attempt=1"), nil
				})
				var sawStarting bool
				var code int
				var failures float64
				testkit.WaitFor(t, "exit after the start-up timeout", timeout+service.StartupMetadataTimeout, func() (bool, error) {
					if status, body, err := healthz(env["METRICS_ADDR"]); err == nil {
						if status == http.StatusOK {
							t.Fatalf("/healthz answered 200 while no broker was reached")
						}
						sawStarting = sawStarting || strings.Contains(body, "starting")
					}
					if status, _, err := readyz(env["METRICS_ADDR"]); err == nil && status == http.StatusOK {
						t.Fatalf("/readyz answered 200 while no broker was reached")
					}
					if n, err := testkit.MetricSum(env["METRICS_ADDR"], "dedup_startup_connect_failures_total"); err == nil {
						failures = max(failures, n)
					}
					c, ok := p.exited()
					code = c
					return ok, nil
				})
				took := time.Since(start)
				if code != exitFailure {
					t.Fatalf("exit %d, want %d", code, exitFailure)
				}
				if took < timeout || took > timeout+2*time.Second {
					t.Errorf("gave up after %v, want about KAFKA_STARTUP_TIMEOUT %v", took, timeout)
				}
				if !sawStarting {
					t.Error("/healthz never said it was starting")
				}
				lines := strings.Split(strings.TrimSpace(p.stderr.String()), "\n")
				last := lines[len(lines)-1]
				for _, want := range []string{"level=ERROR", "no Kafka broker of " + addr + " answered within KAFKA_STARTUP_TIMEOUT 3s", "last error: "} {
					if !strings.Contains(last, want) {
						t.Errorf("last line %q lacks %q", last, want)
					}
				}
				if kind == "refusing" && !strings.Contains(p.stderr.String(), "next_retry_in_seconds=") {
					t.Errorf("no retry announced:\n%s", p.stderr)
				}
				// A refusing address fails each attempt at once: several are
				// counted while the process still serves /metrics.
				if kind == "refusing" && failures < 2 {
					t.Errorf("dedup_startup_connect_failures_total reached %v before the exit, want the failed attempts counted", failures)
				}
			})
		}
	}
}

// TestStartupSignalExits0 sends SIGTERM at several points of start-up: in
// an attempt that hangs on a silent broker, in the wait between attempts
// on a refusing one, and as the embedded broker starts.
func TestStartupSignalExits0(t *testing.T) {
	brokers := unreachable(t)
	for _, c := range []struct {
		name, brokers, waitFor string
	}{
		{"in an attempt", brokers["silent"], "attempt=1"},
		{"between attempts", brokers["refusing"], "next_retry_in_seconds="},
		{"as the embedded broker starts", "", "KAFKA_BROKERS is empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := testEnv(t)
			env["KAFKA_BROKERS"] = c.brokers
			env["EMBEDDED_BROKER_ADDR"] = testkit.FreeAddr(t)
			env["KAFKA_STARTUP_TIMEOUT"] = "1m"
			bin := startBinary(t, env)
			testkit.WaitFor(t, "start-up under way", 10*time.Second, func() (bool, error) {
				return strings.Contains(bin.stderr.String(), c.waitFor), nil
			})
			if code := bin.stop(t, 10*time.Second); code != exitOK {
				t.Fatalf("exit %d after SIGTERM during start-up, want 0", code)
			}
		})
	}
}

// TestStartupPermanentErrors: a certificate the client does not trust
// ends start-up at once (exit 1) rather than after KAFKA_STARTUP_TIMEOUT;
// so do the brokers' authentication and authorization refusals.
func TestStartupPermanentErrors(t *testing.T) {
	for _, err := range []error{kafka.SASLAuthenticationFailed, kafka.ClusterAuthorizationFailed, kafka.UnsupportedSASLMechanism} {
		if !service.Permanent(fmt.Errorf("read metadata: %w", err)) {
			t.Errorf("%v is not taken as permanent", err)
		}
	}
	for _, err := range []error{io.ErrUnexpectedEOF, syscall.ECONNREFUSED, context.DeadlineExceeded, kafka.LeaderNotAvailable} {
		if service.Permanent(fmt.Errorf("read metadata: %w", err)) {
			t.Errorf("%v is taken as permanent", err)
		}
	}

	dir := t.TempDir()
	serverCert, _ := selfSignedCert(t, dir)
	cluster := testkit.Cluster(t, 2, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12}))
	env := testEnv(t)
	env["KAFKA_BROKERS"] = cluster.ListenAddrs()[0]
	env["KAFKA_TLS_ENABLED"] = "true" // system roots: the self-signed CA is unknown
	env["KAFKA_STARTUP_TIMEOUT"] = "1m"
	start := time.Now()
	p := startInProcess(t, env)
	var code int
	testkit.WaitFor(t, "exit", 30*time.Second, func() (bool, error) {
		c, ok := p.exited()
		code = c
		return ok, nil
	})
	if code != exitFailure {
		t.Fatalf("exit %d, want %d", code, exitFailure)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("took %v: an untrusted certificate must not be retried until KAFKA_STARTUP_TIMEOUT", took)
	}
	if !strings.Contains(p.stderr.String(), "refused the connection for good") || !strings.Contains(p.stderr.String(), "certificate") {
		t.Errorf("stderr does not say the certificate was refused for good:\n%s", p.stderr)
	}
}
