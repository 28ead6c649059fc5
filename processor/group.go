package processor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/errgroup"

	"dedup/processor/assignment"
	"dedup/processor/cluster"
	"dedup/processor/output"
)

// Join failures back off from joinFirstBackoff, doubling to joinMaxBackoff,
// jittered; a streak of them logs one warning, then one every
// joinWarnEvery while it lasts.
const (
	joinFirstBackoff = 500 * time.Millisecond
	joinMaxBackoff   = 5 * time.Second
	joinWarnEvery    = time.Minute
)

// consume is the member's life in the group: it joins, runs each
// generation to its end and rejoins, until ctx ends.
func (p *Processor) consume(ctx context.Context, balancers []kafka.GroupBalancer, sticky *assignment.Sticky) error {
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                p.o.GroupID,
		Brokers:           p.o.Brokers,
		Dialer:            p.o.Dialer,
		Topics:            []string{p.o.InputTopic},
		SessionTimeout:    p.o.SessionTimeout,
		RebalanceTimeout:  p.o.RebalanceTimeout,
		HeartbeatInterval: p.o.HeartbeatInterval,
		JoinGroupBackoff:  time.Second,
		StartOffset:       p.o.StartOffset,
		GroupBalancers:    balancers,
		// Partitions added to the input topic end the generation; the
		// next one assigns them, and the routing follows the new counts.
		WatchPartitionChanges:  true,
		PartitionWatchInterval: p.o.PartitionWatchInterval,
		ErrorLogger:            cluster.Logger{Log: p.log.With("component", "group")},
	})
	if err != nil {
		return fmt.Errorf("create consumer group: %w", err)
	}
	eg, egCtx := errgroup.WithContext(ctx)
	eg.Go(func() error {
		// Closing the group ends the current generation: workers flush,
		// checkpoint and commit, then the member leaves the group.
		<-egCtx.Done()
		return cg.Close()
	})
	eg.Go(func() error {
		p.watchRecovery(egCtx)
		return nil
	})
	if p.spare != nil {
		eg.Go(func() error {
			// A fresh pair's memory is not yet backed by the operating
			// system: the first copy into it would take a page fault per
			// page while the worker waits. Writing it here, beside the workers,
			// moves that cost off their path; until it is done a saver
			// waits for the spare, as it does while another partition
			// holds it, and the worker keeps consuming.
			p.spare.Reset()
			p.spares <- p.spare
			return nil
		})
	}
	eg.Go(func() error {
		var streak joinStreak
		for {
			// A member that cannot consume (a topic missing, the brokers
			// lost) takes no new generation: kafka-go's group prepares at
			// most one and waits for this call, so the group does not
			// rebalance again and again (kafka-go's partition watch ends
			// each generation while the input topic is missing).
			_ = p.cluster.Wait(egCtx)
			gen, err := cg.Next(egCtx)
			switch {
			case egCtx.Err() != nil, errors.Is(err, kafka.ErrGroupClosed):
				return nil
			case err != nil:
				// kafka-go's group waits for this loop before its next
				// attempt (Next hands it the error): pausing here is the
				// back-off. A cause the cluster watch names (brokers
				// lost, topic missing) is logged there, once.
				if cause := p.cluster.Err(); cause != nil {
					p.log.Debug("join consumer group", "group", p.o.GroupID, "err", err, "cause", cause)
					_ = p.cluster.Wait(egCtx)
					continue
				}
				streak.failed(p, err)
				cluster.Sleep(egCtx, streak.pause())
				continue
			}
			streak.joined(p)
			p.metrics.Generations.Inc()
			if sticky != nil {
				// What this member holds now is what it reports when it
				// joins the next generation.
				sticky.Record(gen)
			}
			p.runGeneration(gen)
			if p.failures.Broken(p.out.Writer()) {
				p.replaceOutput(egCtx)
			}
		}
	})
	return eg.Wait()
}

// joinStreak is a run of failed joins: logged once at its start, then
// every joinWarnEvery, and once when a join succeeds again.
type joinStreak struct {
	n        int
	since    time.Time
	warnedAt time.Time
	backoff  time.Duration
}

func (s *joinStreak) failed(p *Processor, err error) {
	now := time.Now()
	s.n++
	p.metrics.JoinFails.Inc()
	if s.n == 1 {
		s.since, s.backoff = now, joinFirstBackoff
	}
	if s.warnedAt.IsZero() || now.Sub(s.warnedAt) >= joinWarnEvery {
		s.warnedAt = now
		p.log.Warn("join consumer group failed: retrying with back-off", "group", p.o.GroupID, "err", err,
			"failures", s.n, "failing_for", now.Sub(s.since).Round(time.Millisecond))
		return
	}
	p.log.Debug("join consumer group", "group", p.o.GroupID, "err", err, "failures", s.n)
}

func (s *joinStreak) pause() time.Duration {
	d := cluster.Jitter(s.backoff)
	s.backoff = min(2*s.backoff, joinMaxBackoff)
	return d
}

func (s *joinStreak) joined(p *Processor) {
	if s.n > 0 {
		p.log.Info("consumer group joined again", "group", p.o.GroupID, "failures", s.n,
			"failed_for", time.Since(s.since).Round(time.Millisecond))
	}
	*s = joinStreak{}
}

// outputConfig is what the output writes with: the member's lease fences
// every produce.
func (p *Processor) outputConfig() output.Config {
	c := output.Config{
		Brokers: p.o.Brokers, Transport: p.o.Transport,
		Topic: p.o.OutputTopic, InputTopic: p.o.InputTopic, DeadLetterTopic: p.o.DeadLetterTopic, DroppedTopic: p.o.DroppedTopic,
		BatchSize: p.o.BatchSize, BatchBytes: p.o.BatchBytes, BatchTimeout: p.o.BatchTimeout,
		Compression: p.o.Compression,
		Admin:       p.kadmin,
		Fence:       p.fenceProduce,
		Plain:       p.plainProduce,

		OutputErrors:  p.metrics.OutputErrors,
		Truncations:   p.metrics.OutputTruncations,
		ProduceErrors: p.metrics.ProduceErrors.WithLabelValues(p.o.OutputTopic),
		Latency:       p.metrics.Latency,
		Log:           p.log,
		Failures:      p.failures,
	}
	if p.o.DroppedTopic != "" {
		c.DroppedErrors = p.metrics.ProduceErrors.WithLabelValues(p.o.DroppedTopic)
	}
	return c
}

// fenceProduce allows a produce request only under the current
// generation's valid lease.
func (p *Processor) fenceProduce() error {
	l := p.lease.Load()
	if l == nil {
		return fmt.Errorf("%w: between generations", ErrFenced)
	}
	return l.Fence()
}

// replaceOutput closes the broken writer (waiting for what is still in
// it, so that nothing it holds lands after the next restore's scan), drops
// the admin connections, pauses (100ms, doubling, at most 5s) and opens a
// new writer. Called between generations, by Run's loop only.
func (p *Processor) replaceOutput(ctx context.Context) {
	p.out.Abort()
	p.admin.CloseIdleConnections()
	n := p.failures.Replacing()
	pause := min(5*time.Second, 100*time.Millisecond<<min(n, 6))
	p.log.Info("writer replaced after a produce failure", "attempt", n+1, "pause", pause)
	cluster.Sleep(ctx, pause)
	p.out.Renew()
}

// watchRecovery fails Run when a produce failure has not been recovered
// from within RecoveryTimeout.
func (p *Processor) watchRecovery(ctx context.Context) {
	cluster.Every(ctx, min(time.Second, max(10*time.Millisecond, p.o.RecoveryTimeout/20)), func() bool {
		if err := p.failures.Overdue(p.o.RecoveryTimeout); err != nil {
			p.fail(err)
			return false
		}
		return true
	})
}

// fail stops Run with err (the first one wins).
func (p *Processor) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fatal == nil {
		p.fatal = err
		p.log.Error("stopping: fatal error", "err", err)
	}
	if p.cancel != nil {
		p.cancel()
	}
}

// refreshClients drops the connections, and with them the cached metadata,
// of the admin client, the writer and the transport shared with the
// checkpoint store: after the brokers return or a topic appears, a
// kafka.Transport would go on answering from metadata up to 6 s old (a
// topic still unknown, connections that died with the brokers). Nothing
// succeeds through them while the fault lasts, so nothing is cut short.
func (p *Processor) refreshClients() {
	p.admin.CloseIdleConnections()
	if p.out != nil { // set by Run before the watch starts
		p.out.Transport().CloseIdleConnections()
	}
	if p.o.Transport != nil {
		p.o.Transport.CloseIdleConnections()
	}
}
