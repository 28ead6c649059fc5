package processor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/errgroup"

	"dedup/processor/assignment"
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
		ErrorLogger:            kafkaLogger{log: p.log.With("component", "group")},
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
			_ = p.cluster.wait(egCtx)
			gen, err := cg.Next(egCtx)
			switch {
			case egCtx.Err() != nil, errors.Is(err, kafka.ErrGroupClosed):
				return nil
			case err != nil:
				// kafka-go's group waits for this loop before its next
				// attempt (Next hands it the error): pausing here is the
				// back-off. A cause the cluster watch names (brokers
				// lost, topic missing) is logged there, once.
				if cause := p.cluster.err(); cause != nil {
					p.log.Debug("join consumer group", "group", p.o.GroupID, "err", err, "cause", cause)
					_ = p.cluster.wait(egCtx)
					continue
				}
				streak.failed(p, err)
				sleep(egCtx, streak.pause())
				continue
			}
			streak.joined(p)
			p.metrics.cluster.generations.Inc()
			if sticky != nil {
				// What this member holds now is what it reports when it
				// joins the next generation.
				sticky.Record(gen)
			}
			p.runGeneration(gen)
			if p.out.broken.Load() {
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
	p.metrics.cluster.joinFails.Inc()
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
	d := jitter(s.backoff)
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
