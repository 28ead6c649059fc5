package processor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"dedup/processor/cluster"
	"dedup/processor/partition"
)

// ErrCheckpointDamaged is wrapped by Readiness while a partition is not
// started because every snapshot of it is damaged and
// CHECKPOINT_ON_DAMAGE=refuse.
var ErrCheckpointDamaged = errors.New("every checkpoint damaged (CHECKPOINT_ON_DAMAGE=refuse)")

// Back-off between starts of a partition refused for damaged checkpoints:
// soon enough after an operator's repair, rare enough to stay quiet.
const (
	damagedRetryMin = time.Second
	damagedRetryMax = time.Minute
)

// startPartition is partition.Start, retried with back-off while it
// refuses the partition for damaged checkpoints (OnDamageRefuse): the
// partition is not consumed, Readiness names it, Healthy does not (a
// restart would not help), and the generation goes on for the others. The
// retry starts it once an operator repaired or removed the damaged
// snapshots.
func (p *Processor) startPartition(ctx context.Context, d partition.Deps) (*partition.Worker, error) {
	defer p.setDamaged(d.Partition, nil)
	backoff := damagedRetryMin
	for {
		w, err := partition.Start(ctx, d)
		var de *partition.DamagedError
		if !errors.As(err, &de) || ctx.Err() != nil {
			return w, err
		}
		p.setDamaged(d.Partition, de)
		d.RefusedBefore = true
		p.log.Warn("partition not started: every checkpoint damaged; retrying", "topic", d.Topic, "partition", d.Partition,
			"retry_in", backoff)
		cluster.Sleep(ctx, backoff)
		if ctx.Err() != nil {
			return nil, err
		}
		backoff = min(2*backoff, damagedRetryMax)
	}
}

// setDamaged records (de non-nil) or clears the refusal of a partition.
func (p *Processor) setDamaged(part int, de *partition.DamagedError) {
	p.mu.Lock()
	defer p.mu.Unlock()
	putOrDelete(&p.damaged, part, de)
}

// putOrDelete sets (*m)[k] to v, or deletes k when v is nil.
func putOrDelete[V comparable](m *map[int]V, k int, v V) {
	var none V
	if v == none {
		delete(*m, k)
		return
	}
	if *m == nil {
		*m = map[int]V{}
	}
	(*m)[k] = v
}

// damagedErr is Readiness's answer while partitions are refused. Called
// with p.mu held.
func (p *Processor) damagedErr() error {
	if len(p.damaged) == 0 {
		return nil
	}
	parts := slices.Sorted(maps.Keys(p.damaged))
	return fmt.Errorf("%s partitions %v not started: %w; repair or remove their damaged snapshots (dedup inspect)",
		p.o.InputTopic, parts, ErrCheckpointDamaged)
}

// setUnknown records (e non-nil) or clears a partition stopped at a
// record of a newer re-key hop.
func (p *Processor) setUnknown(part int, e *partition.UnknownRecordError) {
	p.mu.Lock()
	defer p.mu.Unlock()
	putOrDelete(&p.unknown, part, e)
}

// unknownErr is Readiness's answer while partitions are stopped at
// records of a newer re-key hop. Called with p.mu held.
func (p *Processor) unknownErr() error {
	var at []string
	for _, part := range slices.Sorted(maps.Keys(p.unknown)) {
		at = append(at, fmt.Sprintf("%d at offset %d", part, p.unknown[part].Offset))
	}
	return fmt.Errorf("%s partitions %s stopped: %w; upgrade hop 2 (written by a newer re-key hop)",
		p.o.InputTopic, strings.Join(at, ", "), partition.ErrUnknownRecord)
}
