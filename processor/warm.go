package processor

import (
	"log/slog"

	"github.com/segmentio/kafka-go"

	"dedup/processor/partition"
)

// Warm keep: kafka-go's groups rebalance eagerly, so at every membership
// change each member gives up every partition, even those it gets straight
// back. A partition given up cleanly (its final checkpoint and commit at
// its position) leaves its pair here; if the next generation gives it back
// at that offset, it resumes with the pair: no store read, no replay scan.
//
// Safe only if nobody else processed the partition in between. Anyone else
// owning it would have needed a generation of their own between the one in
// which this member gave it up and the one in which it comes back, and
// would have moved the committed offset had it committed anything; so the
// pair is used only when the new generation's id is the old one's plus one
// and the committed offset is the pair's. Otherwise it is dropped and the
// partition restores from the store (whose replay scan finds whatever
// another owner forwarded).

// keptPair is a partition's pair kept at revocation, with the offset
// committed then (the pair covers exactly the inputs below it) and its
// checkpoint chain.
type keptPair struct {
	partition.Kept
	gen int32 // the generation in which this member owned the partition
}

// keep holds a revoked partition's pair for the next generation.
func (p *Processor) keep(part int, k keptPair) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.kept[part] = k
}

// takeKept returns the kept pairs that the partitions of assigned resume
// with in generation gen, and releases every other kept pair, so that the
// instance holds no more pairs than its partitions need (plus the spare).
func (p *Processor) takeKept(gen int32, assigned []kafka.PartitionAssignment, log *slog.Logger) map[int]*partition.Kept {
	p.mu.Lock()
	kept := p.kept
	p.kept = map[int]keptPair{}
	p.mu.Unlock()
	warm := map[int]*partition.Kept{}
	for _, a := range assigned {
		k, ok := kept[a.ID]
		if !ok {
			continue
		}
		delete(kept, a.ID)
		switch {
		case k.gen+1 != gen:
			log.Info("partition back after other generations: restoring from the store", "partition", a.ID,
				"kept_generation", k.gen)
		case a.Offset != k.Offset:
			log.Info("partition back at another committed offset: restoring from the store", "partition", a.ID,
				partition.OffsetAttr("committed", a.Offset), "kept_offset", k.Offset)
		default:
			warm[a.ID] = &k.Kept
		}
	}
	if len(kept) > 0 {
		parts := make([]int, 0, len(kept))
		for part := range kept {
			parts = append(parts, part)
		}
		log.Debug("released the pairs of partitions not assigned again", "partitions", parts)
	}
	return warm
}
