package partition

import (
	"fmt"

	"dedup/checkpoint"
)

// OnDamage is what a partition does when every snapshot the store holds
// of it is damaged (CHECKPOINT_ON_DAMAGE).
type OnDamage string

const (
	// OnDamageEmpty starts the partition with empty filters at the
	// committed offset, loudly (an error line naming every damaged
	// snapshot, dedup_checkpoint_damaged_total, dedup_restores_total{source="empty"}):
	// keys seen before may be forwarded again. The default.
	OnDamageEmpty OnDamage = "empty"
	// OnDamageRefuse does not start the partition: Start returns a
	// *DamagedError, and the processor retries with back-off until an
	// operator repairs or removes the damaged snapshots.
	OnDamageRefuse OnDamage = "refuse"
)

// DamagedError is Start's refusal of a partition whose every snapshot is
// damaged, with OnDamageRefuse.
type DamagedError struct {
	Topic     string
	Partition int
	Load      *checkpoint.LoadError // names every damaged snapshot
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("start %s/%d: every checkpoint damaged, not starting (CHECKPOINT_ON_DAMAGE=refuse): %v", e.Topic, e.Partition, e.Load)
}

func (e *DamagedError) Unwrap() error { return e.Load }

// damageFound counts a damaged snapshot of the partition the store found;
// the store has logged it, naming it.
func (m *Metrics) damageFound(checkpoint.Damage) {
	if c := m.CheckpointDamaged; c != nil {
		c.Inc()
	}
}

// damagedNames lists where each rejected snapshot is.
func damagedNames(e *checkpoint.LoadError) []string {
	names := make([]string, len(e.Rejected))
	for i, r := range e.Rejected {
		names[i] = r.Where
	}
	return names
}
