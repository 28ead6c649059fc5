package repartition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"dedup/processor/cluster"
)

// ErrFailing is hop 1 unhealthy: an input partition's batches have kept
// failing for longer than Options.RecoveryTimeout.
var ErrFailing = errors.New("repartition batches failing")

// Status is hop 1's state for the probes (/readyz, /healthz). Pass one in
// Options.Status to read it; the zero value is ready to use.
//
// Ready: the member is in a generation of its group, whatever it was
// assigned (an empty assignment means the others hold every input
// partition). Healthy: Run has not failed, and no input partition held has
// had its batches failing, without one succeeding, for longer than
// Options.RecoveryTimeout. Hop 1 goes on retrying while unhealthy: the
// probe lets an orchestrator restart a member that cannot make progress.
type Status struct {
	mu      sync.Mutex
	timeout time.Duration
	gen     int32 // generation held, when inGen
	inGen   bool
	held    int
	failing map[int]failure // by input partition: its current run of failed batches
	err     error           // Run's
	cluster *cluster.Watch  // Options.Cluster: its cause comes first; nil without
}

// failure is one input partition's current run of failed batches.
type failure struct {
	since time.Time // the first failure of the run
	last  error
}

// joined records a generation with held input partitions.
func (s *Status) joined(gen int32, held int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen, s.inGen, s.held = gen, true, held
}

// left records the end of generation gen (a later one may have begun).
func (s *Status) left(gen int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen == gen {
		s.inGen = false
	}
}

// failed records a failed batch (or session) of input partition part; the
// run of failures starts at the first.
func (s *Status) failed(part int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failing == nil {
		s.failing = map[int]failure{}
	}
	f, ok := s.failing[part]
	if !ok {
		f.since = time.Now()
	}
	f.last = err
	s.failing[part] = f
}

// ok ends input partition part's run of failures: a batch was
// acknowledged, the partition is caught up with nothing to send, or it is
// no longer held.
func (s *Status) ok(part int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.failing, part)
}

// stopped records Run's error.
func (s *Status) stopped(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// Readiness is nil when hop 1 is in a generation of its group, else why
// not: Run's error, then, with Options.Cluster, the brokers lost or a
// topic missing (wrapping cluster.ErrBrokersUnreachable or
// cluster.ErrTopicMissing), then no generation.
func (s *Status) Readiness() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var watched error
	if s.cluster != nil {
		watched = s.cluster.Err()
	}
	switch {
	case s.err != nil:
		return fmt.Errorf("re-key hop stopped: %w", s.err)
	case watched != nil:
		return fmt.Errorf("re-key hop: %w", watched)
	case !s.inGen:
		return errors.New("re-key hop not in a generation of its consumer group")
	}
	return nil
}

// Healthy is nil while hop 1 runs well; Run's error once it failed; an
// error wrapping ErrFailing and the last failure while an input
// partition's batches have failed for longer than Options.RecoveryTimeout.
func (s *Status) Healthy() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return fmt.Errorf("re-key hop stopped: %w", s.err)
	}
	part, f, found := -1, failure{}, false
	for p, pf := range s.failing {
		if !found || pf.since.Before(f.since) {
			part, f, found = p, pf, true
		}
	}
	if !found || s.timeout <= 0 || time.Since(f.since) < s.timeout {
		return nil
	}
	return fmt.Errorf("re-key hop: %w: input partition %d for %s (more than the recovery timeout %s): %w",
		ErrFailing, part, time.Since(f.since).Round(time.Second), s.timeout, f.last)
}

// watch logs and shows (gauge, may be nil) each change of health until
// ctx ends, checking often enough to see it within the recovery timeout.
func (s *Status) watch(ctx context.Context, gauge prometheus.Gauge, log *slog.Logger) {
	t := time.NewTicker(min(time.Second, max(10*time.Millisecond, s.timeout/20)))
	defer t.Stop()
	unhealthy := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := s.Healthy()
		switch {
		case err != nil && !unhealthy:
			log.Error("re-key hop unhealthy: batches failing for longer than the recovery timeout (PRODUCE_RECOVERY_TIMEOUT); /healthz fails until one is acknowledged",
				"err", err)
		case err == nil && unhealthy:
			log.Info("re-key hop healthy again: a failing partition's batch was acknowledged")
		default:
			continue
		}
		unhealthy = err != nil
		if gauge != nil {
			gauge.Set(b2f(unhealthy))
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
