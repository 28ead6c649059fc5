package processor

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
)

// recovery is the state of a produce failure not yet recovered from.
type recovery struct {
	since    time.Time     // first failure of the streak; zero when healthy
	err      *ProduceError // the latest
	failedAt map[int]int64 // input partition -> input offset whose output failed, until delivered
	attempts int           // writer replacements in this streak
}

// produceFailed starts (or continues) a recovery: the worker that got perr
// returns next, which ends the generation.
func (p *Processor) produceFailed(out *output, perr *ProduceError) {
	out.broken.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stuck.since.IsZero() {
		p.stuck.since = time.Now()
	}
	p.stuck.err = perr
	p.stuck.failedAt[perr.Partition] = perr.Offset
	p.log.Warn("produce failed: ending the generation to restore with a new writer",
		"topic", p.o.InputTopic, "partition", perr.Partition, "offset", perr.Offset, "err", perr.Err,
		"failing_for", time.Since(p.stuck.since).Round(time.Millisecond))
}

// replaceOutput closes the broken writer (waiting for what is still in
// it, so that nothing it holds lands after the next restore's scan), drops
// the admin connections, pauses (100ms, doubling, at most 5s) and opens a
// new writer. Called between generations, by Run's loop only.
func (p *Processor) replaceOutput(ctx context.Context) {
	p.out.abort()
	if err := p.out.close(); err != nil {
		p.log.Debug("close broken writer", "err", err) // the failure itself was logged
	}
	p.admin.CloseIdleConnections()
	p.mu.Lock()
	n := p.stuck.attempts
	p.stuck.attempts++
	p.mu.Unlock()
	pause := min(5*time.Second, 100*time.Millisecond<<min(n, 6))
	p.log.Info("writer replaced after a produce failure", "attempt", n+1, "pause", pause)
	sleep(ctx, pause)
	p.out = p.newOutput()
	if p.dlq != nil {
		// Its pooled connections may be as dead as the writer's.
		p.dlq.close()
		p.dlq = p.newDeadLetter()
	}
	p.replaced.Add(1)
}

// forgetUnassigned drops failed partitions that this member no longer
// holds: their recovery is now another member's.
func (p *Processor) forgetUnassigned(assigned []kafka.PartitionAssignment) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for part := range p.stuck.failedAt {
		if !slices.ContainsFunc(assigned, func(a kafka.PartitionAssignment) bool { return a.ID == part }) {
			delete(p.stuck.failedAt, part)
		}
	}
	for part := range p.isolateAt {
		if !slices.ContainsFunc(assigned, func(a kafka.PartitionAssignment) bool { return a.ID == part }) {
			delete(p.isolateAt, part)
		}
	}
	p.metrics.stalled.Set(float64(p.stalls.keep(assigned)))
	p.settleLocked()
}

// failedOffset returns the input offset of partition whose output failed
// and is not yet delivered, or -1.
func (p *Processor) failedOffset(partition int) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	off := p.stalls.offset(partition)
	if f, ok := p.stuck.failedAt[partition]; ok && (off < 0 || f < off) {
		off = f
	}
	return off
}

// delivered reports that the output of partition's input up to offset
// has now been acknowledged (or found already in the output): every
// failure at or below it, stuck produce and refused-record stall alike,
// is settled, not only the lower one that failedOffset named.
func (p *Processor) delivered(partition int, offset int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if off, ok := p.stuck.failedAt[partition]; ok && off <= offset {
		delete(p.stuck.failedAt, partition)
	}
	if off, ok := p.isolateAt[partition]; ok && off <= offset {
		delete(p.isolateAt, partition)
	}
	p.metrics.stalled.Set(float64(p.stalls.clear(partition, offset)))
	p.settleLocked()
}

func (p *Processor) settleLocked() {
	if len(p.stuck.failedAt) > 0 || p.stuck.since.IsZero() {
		return
	}
	p.log.Info("recovered from produce failure", "after", time.Since(p.stuck.since).Round(time.Millisecond),
		"writers_replaced", p.stuck.attempts)
	p.stuck = recovery{failedAt: p.stuck.failedAt}
}

// watchRecovery fails Run when a produce failure has not been recovered
// from within RecoveryTimeout.
func (p *Processor) watchRecovery(ctx context.Context) {
	t := time.NewTicker(min(time.Second, max(10*time.Millisecond, p.o.RecoveryTimeout/20)))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		since, perr := p.stuck.since, p.stuck.err
		p.mu.Unlock()
		if !since.IsZero() && time.Since(since) > p.o.RecoveryTimeout {
			p.fail(fmt.Errorf("output undeliverable for %v: %w", time.Since(since).Round(time.Millisecond), perr))
			return
		}
	}
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
