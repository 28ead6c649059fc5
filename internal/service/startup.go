package service

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"dedup/internal/config"
)

// Start-up timeouts: each attempt to reach the brokers is bounded so that
// nothing waits for the operating system's TCP timeout (minutes) on a
// black-holed address, and a broker that accepts but never answers costs
// one attempt, not the whole start-up.
const (
	StartupDialTimeout     = 5 * time.Second  // TCP connect, TLS handshake and SASL
	StartupMetadataTimeout = 10 * time.Second // the whole attempt, metadata answer included
	startupFirstBackoff    = 250 * time.Millisecond
	startupMaxBackoff      = 10 * time.Second
	startupWarnEvery       = 30 * time.Second // a reminder while the brokers stay unreachable
)

// StartupError is start-up giving up: no broker answered within
// KAFKA_STARTUP_TIMEOUT.
type StartupError struct {
	Brokers  []string
	Timeout  time.Duration
	Attempts int
	Last     error
}

func (e *StartupError) Error() string {
	if Permanent(e.Last) {
		return fmt.Sprintf("Kafka brokers %s refused the connection for good (attempt %d); error: %v",
			strings.Join(e.Brokers, ","), e.Attempts, e.Last)
	}
	return fmt.Sprintf("no Kafka broker of %s answered within KAFKA_STARTUP_TIMEOUT %v (%d attempts); last error: %v",
		strings.Join(e.Brokers, ","), e.Timeout, e.Attempts, e.Last)
}

func (e *StartupError) Unwrap() error { return e.Last }

// reachOptions configure reachBrokers.
type reachOptions struct {
	Conn    *config.Connection
	Timeout time.Duration // KAFKA_STARTUP_TIMEOUT
	Log     *slog.Logger
	Status  *startupStatus // told what start-up is doing, for /healthz
	// Failures counts failed attempts: the processor's families, the
	// connectivity gauge among them, exist only once a broker answered.
	Failures prometheus.Counter
}

// reachBrokers asks the brokers for metadata until one answers, with
// exponential backoff, for at most o.Timeout. It logs the first attempt, the
// first failure with the next retry, and a reminder every startupWarnEvery;
// the other attempts at debug level. It returns ctx's error when ctx ends first.
func reachBrokers(ctx context.Context, o reachOptions) error {
	deadline := time.Now().Add(o.Timeout)
	brokers := o.Conn.Brokers
	backoff := startupFirstBackoff
	var last error
	var warnedAt time.Time
	for attempt := 1; ; attempt++ {
		if last != nil && time.Until(deadline) <= 0 {
			return &StartupError{Brokers: brokers, Timeout: o.Timeout, Attempts: attempt - 1, Last: last}
		}
		level := slog.LevelDebug
		if attempt == 1 {
			level = slog.LevelInfo
		}
		o.Log.Log(ctx, level, "connecting to Kafka", "brokers", brokers, "attempt", attempt)
		o.Status.set(fmt.Sprintf("connecting to %s (attempt %d)", strings.Join(brokers, ","), attempt))
		err := probeBrokers(ctx, o.Conn, min(StartupMetadataTimeout, time.Until(deadline)))
		if err == nil {
			o.Log.Info("Kafka reached", "brokers", brokers, "attempts", attempt)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if Permanent(err) {
			// Retrying a refused password or an untrusted certificate only
			// delays the same answer.
			return &StartupError{Brokers: brokers, Timeout: o.Timeout, Attempts: attempt, Last: err}
		}
		last = err
		o.Failures.Inc()
		left := time.Until(deadline)
		if left <= 0 {
			return &StartupError{Brokers: brokers, Timeout: o.Timeout, Attempts: attempt, Last: err}
		}
		wait := min(backoff, left)
		// The first failure and then one line every startupWarnEvery,
		// not one per attempt.
		level = slog.LevelDebug
		if warnedAt.IsZero() || time.Since(warnedAt) >= startupWarnEvery {
			level, warnedAt = slog.LevelWarn, time.Now()
		}
		o.Log.Log(ctx, level, "Kafka not reachable, retrying", "brokers", brokers, "attempt", attempt, "err", err,
			"next_retry_in", wait.Round(time.Millisecond), "gives_up_in", left.Round(time.Second))
		o.Status.set(fmt.Sprintf("no broker of %s reached yet (attempt %d: %v)", strings.Join(brokers, ","), attempt, err))
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
		backoff = min(2*backoff, startupMaxBackoff)
	}
}

// Permanent reports errors that no retry changes: the brokers refused the
// credentials or the client refused the brokers' certificate.
func Permanent(err error) bool {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	return errors.Is(err, kafka.SASLAuthenticationFailed) ||
		errors.Is(err, kafka.UnsupportedSASLMechanism) ||
		errors.Is(err, kafka.ClusterAuthorizationFailed) ||
		errors.As(err, &unknownCA) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &verify)
}

// probeBrokers asks for the cluster's metadata once, on a transport of its
// own so that a connection left hanging by a silent broker is not reused.
func probeBrokers(ctx context.Context, conn *config.Connection, timeout time.Duration) error {
	tr := conn.ProbeTransport(StartupDialTimeout)
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(conn.Brokers...), Transport: tr, Timeout: timeout}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	md, err := client.Metadata(actx, &kafka.MetadataRequest{})
	if err != nil {
		if actx.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("no metadata answer within %v: %w", timeout.Round(time.Millisecond), err)
		}
		return fmt.Errorf("read metadata: %w", err)
	}
	if len(md.Brokers) == 0 {
		return errors.New("read metadata: the cluster lists no brokers")
	}
	return nil
}

// startupStatus is the probe /healthz and /readyz answer from while the
// stage starts: unhealthy and not ready, saying what start-up is doing,
// until the processor exists; from then on, the processor's own answers.
type startupStatus struct {
	mu    sync.Mutex
	doing string
	probe Probe
}

func newStartupStatus() *startupStatus { return &startupStatus{doing: "starting"} }

func (s *startupStatus) set(doing string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.doing = doing
}

// running hands the probes to the started processor.
func (s *startupStatus) running(p Probe) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.probe = p
}

func (s *startupStatus) current() (Probe, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.probe, s.doing
}

// Healthy reports an error until the processor runs: a stage that never
// reached a broker is not healthy.
func (s *startupStatus) Healthy() error {
	p, doing := s.current()
	if p == nil {
		return fmt.Errorf("starting: %s", doing)
	}
	return p.Healthy()
}

func (s *startupStatus) Ready() bool { return s.Readiness() == nil }

// Readiness says why the stage is not ready, for /readyz: what start-up
// is doing, or the processor's own reason.
func (s *startupStatus) Readiness() error {
	p, doing := s.current()
	if p == nil {
		return fmt.Errorf("starting: %s", doing)
	}
	if r, ok := p.(interface{ Readiness() error }); ok {
		return r.Readiness()
	}
	if !p.Ready() {
		return errors.New("not ready")
	}
	return nil
}
