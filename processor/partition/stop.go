package partition

import (
	"context"
	"errors"
	"time"
)

// stop ends a worker: flush, let a running checkpoint finish, then
// checkpoint and commit everything acknowledged, close the reader. Bounded
// by Deps.StopTimeout (the rebalance timeout: how long the group waits).
func (w *Worker) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), w.d.StopTimeout)
	defer cancel()
	began := time.Now()
	errs := []error{w.flush()}
	w.cp.stopSaver()
	w.publishCounts()
	w.updateGauges()
	// A last checkpoint at the position is rewritten unless its end
	// offsets are exact: the next owner's restore then scans nothing of
	// what this one wrote.
	again := w.position != w.cp.last || (w.d.Store != nil && !w.cp.exact)
	if again && w.acks.failed() == nil && !w.crashed() {
		// The worker has stopped, so no output of an input >= position will
		// follow: end offsets read after the acknowledgements are complete.
		err := w.acks.waitAcknowledged(ctx, w.position)
		var ends outputMark
		if err == nil && w.d.Store != nil {
			ends, err = w.cp.outputMark(ctx)
		}
		if err == nil {
			err = w.finishCheckpoint(ctx, w.position, ends, began)
		}
		if err == nil {
			w.cp.last, w.cp.exact = w.position, true
		}
		errs = append(errs, err)
	}
	errs = append(errs, w.reader.Close())
	kept := w.keepable()
	if kept {
		// Checkpointed and committed exactly here: the pair covers the
		// inputs below the committed offset and nothing else, and no output
		// of a later input exists. Should the partition come straight back,
		// the owner resumes it from memory.
		w.d.Owner.Keep(Kept{Pair: w.pair, Offset: w.position, chain: w.cp.chain})
	}
	w.log.Info("partition revoked", "position", w.position, OffsetAttr("committed", w.cp.last), "kept", kept)
	return errors.Join(errs...)
}

// keepable reports whether the stopped worker's pair may be kept in memory
// for the next generation: checkpointed and committed exactly at its
// position, every output acknowledged, and not still replaying. A partition
// still replaying (position below suppressTo) is not kept: outputs of
// inputs at or past its position are already in the output, and only a
// restore's scan finds them again.
func (w *Worker) keepable() bool {
	// A partition that still keeps its pair from before the filter options
	// changed restores from its checkpoint, which holds that pair too.
	// A repartitioned partition restores its high-water marks with its
	// pair from the checkpoint: the kept pair alone would lose them.
	return w.d.Owner != nil && w.legacy == nil && w.origins == nil && w.position >= 0 && w.position == w.cp.last &&
		(w.cp.exact || w.d.Store == nil) && w.position >= w.suppressTo && w.position >= w.drops.suppressTo &&
		w.acks.failed() == nil && !w.crashed()
}

// crashed reports whether the owner asks for a killed process's stop.
func (w *Worker) crashed() bool { return w.d.Owner != nil && w.d.Owner.Crashed() }
