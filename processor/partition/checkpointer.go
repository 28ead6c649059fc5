package partition

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"dedup/checkpoint"
	"dedup/rotation"
)

// checkpointer runs one partition's checkpoints (or, without a Store, its
// commits) in a background saver goroutine, so that the worker only pays
// for a flush and an in-memory copy of its pair, or of what changed in it.
//
// A checkpoint saves one piece of a chain (checkpoint.Meta.Base): a base,
// the whole state, or an increment, the words of the pair written since
// the previous piece (rotation.Delta). An assignment continues the chain
// it restored in full or the kept pair's (a move writes no base); its
// increments then carry its generation as Meta.Owner, which fences the
// previous owner out of the chain (docs/fencing.md). A checkpoint is a
// base when there is no chain to continue (a fresh partition, a restore
// that fell back or changed filter options), after a failed checkpoint
// (the changes it carried are lost to the chain), and once the chain's
// increments reach the size of its base: the restore bound, a base plus
// at most as much again.
//
// One checkpoint, in order:
//  1. the worker, when one is due, wakes the saver (start);
//  2. the saver takes the instance's spare pair (Deps.Spares), waiting for
//     its turn if another partition's saver holds it, then reads the
//     output topic's end offsets E;
//  3. the saver raises wanted; the worker, at its next record or tick,
//     flushes its buffered outputs, copies its pair into the spare pair
//     (rotation.CopyTo: no allocation) or, for an increment unless more
//     words changed than maxDeltaWords, its changes into the partition's
//     delta (rotation.TakeDelta: the spare goes back at once), and sends
//     its position P (snap). Every output of an input >= P is produced after E was read,
//     so it lands at or after E: a replay scan from E is complete;
//  4. the saver waits until every output of an input < P is acknowledged,
//  5. saves {Offset: P, OutputEnds: E} with the piece durably and gives the
//     spare back (also when any step failed),
//  6. and only then commits P to the group.
//
// The worker never waits for the spare: until its saver has it, the
// partition simply goes on consuming. The final checkpoint at revocation
// needs no spare: the worker has stopped, so its own pair (or its delta) is
// saved.
//
// The saver goroutine reaches its partition only through the checkpointer:
// the copies below, fixed before it starts, the parts safe for concurrent
// use (the ack tracker, epoch, fails) and the channels; never the Worker.
type checkpointer struct {
	interval time.Duration
	store    Store
	spares   chan *rotation.Pair // nil without a store
	d        Deps                // the worker's, as Start completed it
	log      *slog.Logger
	acks     *ackTracker
	replay   replayMark

	// held is the spare while this saver has it, incremental whether the
	// piece wanted may be an increment (the worker takes a base instead
	// when too much changed). Set by the saver before it raises wanted
	// (the atomic store orders them before the worker's load), read by the
	// worker in handOff.
	held        *rotation.Pair
	incremental bool
	// delta is the increment's buffer: written by the worker in handOff
	// (or at the stop), read by the saver after snap.
	delta rotation.Delta
	// chain is the partition's chain as this assignment wrote it: the
	// saver's, and the worker's once the saver has stopped.
	chain chain
	// legacyHeld: the worker keeps a legacy pair, which only a base holds.
	legacyHeld atomic.Bool

	wanted atomic.Bool   // saver → worker: copy now
	start  chan struct{} // worker → saver
	snap   chan handoff  // worker → saver: the copy's position, and the legacy pair then
	done   chan cpResult // saver → worker
	stop   chan struct{}
	exited chan struct{}

	// epoch is the Meta.Epoch this partition's snapshots carry: the
	// restored snapshot's, raised when the group's generation numbering is
	// found to have started over (saveCheckpoint).
	epoch atomic.Uint32

	fails failStreak // failed checkpoints in a row, for the log

	// worker-owned
	busy bool
	last int64 // position of the last committed checkpoint (-1: none)
	// exact: the last checkpoint's end offsets were read once every
	// output below its position was acknowledged (at a stop, or before the
	// first record), so a restore from it scans only outputs of inputs at
	// or after its position. A periodic checkpoint reads them earlier
	// (step 2): outputs still in flight then land after them.
	exact bool
	next  time.Time
}

// Kept is a stopped partition's pair handed to its owner (Owner.Keep), to
// resume with in the next generation (Deps.Warm): the pair, the offset its
// final checkpoint covers exactly, and the chain that checkpoint ended.
type Kept struct {
	Pair   *rotation.Pair
	Offset int64
	chain  chain
}

// chain is the newest chain of a partition, as its assignment wrote it or
// its restore or kept pair continues it. Zero: no base yet, or a failed
// checkpoint broke it.
type chain struct {
	base       checkpoint.Meta // the base's, as Save returned it
	head       uint64          // the newest piece's Seq
	bytes      int64           // stored bytes of the base's increments
	increments int             // pieces on the base: dedup_checkpoint_chain_increments
	owner      int32           // the newest piece's Meta.Owner
}

// continues reports whether an assignment of d, at now, may go on with
// the chain: one was read or kept, its policy allows one more increment,
// and d's generation is not older than any that wrote it (with the same
// epoch numbering), so the store would not refuse the increment as stale.
func (c chain) continues(d Deps, now time.Time) bool {
	return c.extend(chainPolicyOf(d), now) && d.Generation >= max(c.base.Generation, c.owner)
}

// chainPolicy is how far a chain may grow before a checkpoint writes a
// new base.
type chainPolicy struct {
	ratio  float64       // increments smaller than ratio times the base
	maxAge time.Duration // the base younger than this (0: any age)
}

// extend reports whether the next piece, at now, may be an increment: the
// chain has a base, and the policy allows one more.
func (c chain) extend(p chainPolicy, now time.Time) bool {
	return c.base.Seq != 0 && p.ratio > 0 && float64(c.bytes) < p.ratio*float64(c.base.StoredBytes) &&
		(p.maxAge <= 0 || now.Sub(c.base.Created) < p.maxAge)
}

// chainPolicyOf is the partition's chain policy: no increments for a mode
// whose deltas are as large as its snapshots; bases no older than a store
// whose retention deletes pieces by age allows (checkpoint.KafkaStore on a
// topic that is not compacted).
func chainPolicyOf(d Deps) chainPolicy {
	p := chainPolicy{ratio: d.ChainRatio}
	if !d.Filter.Mode.Incremental() {
		p.ratio = 0
	}
	if s, ok := d.Store.(interface{ BaseMaxAge() time.Duration }); ok {
		p.maxAge = s.BaseMaxAge()
	}
	return p
}

// maxKeptDelta is how large an increment's buffer may stay between
// checkpoints: a burst of changes does not hold its memory for good.
const maxKeptDelta = 1 << 20

// piece is what one checkpoint saves: the partition's state (a base), or
// the changes since the previous piece (an increment).
type piece struct {
	state partitionState
	delta *rotation.Delta // non-nil: an increment
	marks origins         // a repartitioned partition's high-water marks (nil: none)
}

func (p piece) payload() io.WriterTo {
	var w io.WriterTo = p.delta
	if p.delta == nil {
		w = p.state.payload()
	}
	if p.marks != nil {
		return withOrigins{marks: p.marks, piece: w}
	}
	return w
}

// maxDeltaWords is the most changed words of pair an increment copies:
// past it the worker copies the whole pair into the spare instead (a
// base). Copying the pair streams its bytes; taking a delta scans the
// change bitmaps and reads each changed word where it lies, a cache miss
// apiece in a large pair, so beyond about one changed word per 4 KiB of
// pair the full copy pauses the worker less (BenchmarkStageCheckpoints
// shows the pauses). Some thousands of words take a few milliseconds
// whatever the pair.
func maxDeltaWords(pair *rotation.Pair) int { return max(pair.SizeBytes()/4096, 1<<14) }

// handoff is what the worker hands its saver with the copy of its pair.
type handoff struct {
	pos    int64
	delta  bool    // the worker took its changes (an increment), not a copy of its pair
	legacy *legacy // frozen; nil: none
	marks  origins // a copy; nil: not repartitioned
}

type cpResult struct {
	offset int64
	err    error
}

func (c *checkpointer) init(d Deps, log *slog.Logger, acks *ackTracker, replay replayMark, committed int64) {
	c.interval = d.CheckpointInterval
	c.store = d.Store
	c.spares = d.Spares
	c.d, c.log, c.acks, c.replay = d, log, acks, replay
	c.start = make(chan struct{}, 1)
	c.snap = make(chan handoff, 1)
	c.done = make(chan cpResult, 1)
	c.stop = make(chan struct{})
	c.exited = make(chan struct{})
	c.last = committed
	c.next = time.Now().Add(c.interval)
}

func (c *checkpointer) startSaver() {
	go func() {
		defer close(c.exited)
		for {
			select {
			case <-c.start:
			case <-c.stop:
				return
			}
			r, stopped := c.checkpoint()
			if stopped {
				return
			}
			c.done <- r
		}
	}()
}

// checkpoint is steps 2-6 on the saver side; stopped reports that the
// worker stopped before handing off its copy.
func (c *checkpointer) checkpoint() (r cpResult, stopped bool) {
	c.incremental = c.store != nil && !c.legacyHeld.Load() && c.chain.extend(chainPolicyOf(c.d), time.Now())
	// The spare even for an increment: the worker copies the whole pair
	// instead when more words changed than an increment can copy as fast.
	if c.spares != nil {
		select {
		case c.held = <-c.spares:
		case <-c.stop:
			return cpResult{}, true
		}
		defer c.release()
	}
	began := time.Now()
	var ends outputMark
	if c.store != nil {
		var err error
		if ends, err = c.outputMark(context.Background()); err != nil {
			return cpResult{err: c.checkpointFailed(err)}, false
		}
	}
	c.wanted.Store(true)
	var h handoff
	select {
	case h = <-c.snap:
	case <-c.stop:
		c.wanted.Store(false)
		// The worker stops the saver from its own goroutine, so a hand-off
		// is either complete (in snap) or never happens. A complete one
		// took changes that are not saved now: the chain cannot go on
		// without them.
		select {
		case <-c.snap:
			c.chain = chain{}
		default:
		}
		return cpResult{}, true
	}
	pos := h.pos
	pc := piece{state: partitionState{pair: c.held, legacy: h.legacy}, marks: h.marks}
	if h.delta {
		c.release() // not used: the next partition may take it now
		if h.legacy != nil {
			c.chain = chain{}
			return cpResult{offset: pos, err: c.checkpointFailed(errors.New("an increment of a partition holding a legacy pair"))}, false
		}
		pc.delta = &c.delta
	}
	if err := c.saveCheckpoint(context.Background(), pos, ends, pc, began); err != nil {
		return cpResult{offset: pos, err: err}, false
	}
	c.release() // the copy is saved: the next partition may take the spare now
	err := c.commitCheckpoint(context.Background(), pos, c.replay.scanStart(pos, ends).ends)
	if err == nil {
		c.checkpointSucceeded()
	}
	return cpResult{offset: pos, err: err}, false
}

// release gives the spare back, once.
func (c *checkpointer) release() {
	if c.held != nil {
		c.spares <- c.held
		c.held = nil
	}
}

// reap takes the result of a finished checkpoint. Worker goroutine.
func (c *checkpointer) reap() {
	select {
	case r := <-c.done:
		c.busy = false
		if r.err == nil {
			c.last, c.exact = r.offset, false
		}
	default:
	}
}

// maybeStart begins a checkpoint when one is due, none is running and the
// position moved since the last one. Worker goroutine; reap first.
func (c *checkpointer) maybeStart(w *Worker, now time.Time) {
	if c.busy || now.Before(c.next) || w.position == c.last || w.position < 0 {
		return
	}
	c.busy = true
	c.next = now.Add(c.interval)
	c.start <- struct{}{}
}

// handOff is step 3 on the worker side: the only part of a periodic
// checkpoint the partition waits for, observed as
// dedup_checkpoint_pause_seconds.
func (w *Worker) handOff() error {
	began := time.Now()
	w.cp.wanted.Store(false)
	if err := w.flush(); err != nil {
		return err
	}
	delta := w.cp.incremental && (w.cp.held == nil || w.pair.DeltaWords() <= maxDeltaWords(w.pair))
	switch {
	case delta:
		w.pair.TakeDelta(&w.cp.delta)
	case w.cp.held != nil:
		if err := w.pair.CopyTo(w.cp.held); err != nil {
			return fmt.Errorf("copy filter pair: %w", err)
		}
		w.pair.ResetDelta() // the base holds every change so far
	}
	w.cp.snap <- handoff{pos: w.position, legacy: w.legacy.frozen(), delta: delta, marks: w.originsOf()} // buffered, and the saver waits for it: never blocks
	w.d.Metrics.CheckpointPause.Observe(time.Since(began).Seconds())
	return nil
}

// outputMark is where the replay scan of a checkpoint starts: the end of
// every output partition, and the partition counts that route the outputs
// (checkpoint.Meta's OutputEnds, InputPartitions, OutputPartitions).
type outputMark struct {
	ends            map[int]int64
	inputs, outputs int
	// The drop topic's (Deps.Drops; nil without): DroppedEnds and
	// DroppedPartitions.
	dropped      map[int]int64
	droppedParts int
}

// outputMark reads the output's end offsets now, under this generation's
// routing.
func (c *checkpointer) outputMark(ctx context.Context) (outputMark, error) {
	ends, err := c.d.Offsets.OutputEnds(ctx)
	if err != nil {
		return outputMark{}, fmt.Errorf("read output end offsets: %w", err)
	}
	m := outputMark{ends: ends, inputs: c.d.Route.InputPartitions(), outputs: c.d.Route.OutputPartitions()}
	return m, c.d.readDropMark(ctx, &m)
}

// finishCheckpoint is steps 4-6 for a pair nobody else writes to (the
// stopped worker's own pair, the initial anchor).
func (w *Worker) finishCheckpoint(ctx context.Context, pos int64, ends outputMark, began time.Time) error {
	pc := piece{state: partitionState{pair: w.pair, legacy: w.legacy}, marks: w.originsOf()}
	if w.cp.store != nil {
		if w.legacy == nil && w.cp.chain.extend(chainPolicyOf(w.d), time.Now()) && w.pair.DeltaWords() <= maxDeltaWords(w.pair) {
			w.pair.TakeDelta(&w.cp.delta)
			pc.delta = &w.cp.delta
		} else {
			w.pair.ResetDelta()
		}
	}
	err := w.cp.saveCheckpoint(ctx, pos, ends, pc, began)
	if chainErr := (*checkpoint.ChainError)(nil); pc.delta != nil && errors.As(err, &chainErr) {
		// The store does not continue the chain (its base pruned by
		// another writer, or the checkpoint topic created anew): the pair
		// itself, as a base, holds everything the increment did.
		w.log.Info("checkpoint chain refused by the store: saving a base instead", "err", err)
		w.pair.ResetDelta()
		pc.delta = nil
		err = w.cp.saveCheckpoint(ctx, pos, ends, pc, began)
	}
	if err != nil {
		return err
	}
	if err := w.cp.commitCheckpoint(ctx, pos, w.cp.replay.scanStart(pos, ends).ends); err != nil {
		return err
	}
	w.cp.checkpointSucceeded()
	return nil
}

// saveCheckpoint is steps 4-5: wait for acknowledgements below pos and save
// the piece (when checkpointing). Whatever fails breaks the chain: the
// changes the piece holds are no longer tracked, so the next is a base.
func (c *checkpointer) saveCheckpoint(ctx context.Context, pos int64, ends outputMark, pc piece, began time.Time) (err error) {
	defer func() {
		if err != nil {
			c.chain = chain{}
		}
		if c.delta.Len() > maxKeptDelta {
			c.delta = rotation.Delta{}
		}
	}()
	if err := c.acks.waitAcknowledged(ctx, pos); err != nil {
		return c.checkpointFailed(fmt.Errorf("wait for outputs below %d: %w", pos, err))
	}
	if c.store == nil {
		return nil
	}
	if c.d.Membership != nil {
		// A member whose membership is not confirmed may have lost the
		// partition: its snapshot could outrank the new owner's.
		if err := c.d.Membership.Fence(); err != nil {
			return c.checkpointFailed(fmt.Errorf("save checkpoint at %d: %w", pos, err))
		}
	}
	mark := c.replay.scanStart(pos, ends)
	meta := checkpoint.Meta{
		Group:            c.d.GroupID,
		Topic:            c.d.Topic,
		Partition:        c.d.Partition,
		Offset:           pos,
		OutputTopic:      c.d.OutputTopic,
		OutputEnds:       mark.ends,
		Created:          time.Now(),
		InputPartitions:  mark.inputs,
		OutputPartitions: mark.outputs,
		Generation:       c.d.Generation,
		Epoch:            c.epoch.Load(),
	}
	c.droppedMeta(&meta, mark)
	if pc.delta != nil {
		meta.Base, meta.Prev, meta.Epoch = c.chain.base.Seq, c.chain.head, c.chain.base.Epoch
		// An increment keeps its base's generation; a newer owner's
		// stands beside it.
		meta.Generation = c.chain.base.Generation
		if c.d.Generation > meta.Generation {
			meta.Owner = c.d.Generation
		}
	}
	// A damaged snapshot the Save's pruning finds is counted here.
	ctx = checkpoint.WithDamageReport(ctx, c.d.Metrics.damageFound)
	m, err := c.store.Save(ctx, meta, pc.payload())
	var stale *checkpoint.StaleError
	if errors.As(err, &stale) && pc.delta == nil && c.d.Membership != nil && c.d.Membership.Confirm(ctx) == nil {
		// The store holds a newer generation's snapshot, yet the
		// coordinator confirms this generation after it was written: a
		// live group's generations only increase, so that snapshot is of
		// an earlier life of the group (deleted and created again, or a
		// broker that lost its state). Start a new epoch above it.
		meta.Epoch = stale.HeldEpoch + 1
		c.log.Warn("checkpoint of an earlier life of the group: starting a new epoch",
			"held_generation", stale.HeldGeneration, "held_epoch", stale.HeldEpoch,
			"generation", c.d.Generation, "epoch", meta.Epoch)
		c.epoch.Store(meta.Epoch)
		m, err = c.store.Save(ctx, meta, pc.payload())
	}
	if err != nil {
		return c.checkpointFailed(fmt.Errorf("save checkpoint at %d: %w", pos, err))
	}
	pm := c.d.Metrics
	if pc.delta != nil {
		c.chain.head = m.Seq
		c.chain.bytes += m.StoredBytes
		c.chain.increments++
		c.chain.owner = m.Owner
		pm.CheckpointWritten[pieceIncrement].Add(float64(m.StoredBytes))
	} else {
		c.chain = chain{base: m, head: m.Seq}
		pm.CheckpointWritten[pieceBase].Add(float64(m.StoredBytes))
		pm.ChainBase.Set(float64(time.Now().UnixNano()) / 1e9)
	}
	pm.ChainIncrements.Set(float64(c.chain.increments))
	pm.CheckpointSeconds.Observe(time.Since(began).Seconds())
	pm.CheckpointRaw.Set(float64(m.RawBytes))
	pm.CheckpointStored.Set(float64(m.StoredBytes))
	pm.CheckpointLast.Set(float64(time.Now().UnixNano()) / 1e9)
	pm.Checkpoints.Inc()
	return nil
}

// commitCheckpoint is step 6; ends (the checkpoint's scan start) go
// with the commit, for a restore whose snapshots are all rejected.
func (c *checkpointer) commitCheckpoint(ctx context.Context, pos int64, ends map[int]int64) error {
	if err := c.d.Group.Commit(ctx, pos, ends); err != nil {
		// The snapshot stands; the next checkpoint or a restore (which
		// prefers the snapshot's offset) makes up for the missing commit.
		return c.checkpointFailed(fmt.Errorf("commit %d: %w", pos, err))
	}
	c.d.Metrics.Committed.Set(float64(pos))
	return nil
}

func (c *checkpointer) checkpointFailed(err error) error {
	if c.store != nil {
		c.d.Metrics.CheckpointFails.Inc()
	}
	c.fails.failed(c.log, err)
	return err
}

// checkpointSucceeded ends a streak of failures, saying so once.
func (c *checkpointer) checkpointSucceeded() { c.fails.succeeded(c.log) }

// failWarnEvery is how often a streak of failed checkpoints is logged
// again while it lasts: a failure per interval (seconds) is one line at
// the start, not one per attempt.
const failWarnEvery = time.Minute

// failStreak is a run of failed checkpoints of one partition. Safe for
// concurrent use (the saver and the worker both checkpoint).
type failStreak struct {
	mu     sync.Mutex
	n      int
	since  time.Time
	warned time.Time
}

func (s *failStreak) failed(log *slog.Logger, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.n++
	if s.n == 1 {
		s.since = now
	}
	if s.n == 1 || now.Sub(s.warned) >= failWarnEvery {
		s.warned = now
		log.Warn("checkpoint failed", "err", err, "failures", s.n, "failing_for", now.Sub(s.since).Round(time.Millisecond))
		return
	}
	log.Debug("checkpoint failed", "err", err, "failures", s.n)
}

func (s *failStreak) succeeded(log *slog.Logger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n > 0 {
		log.Info("checkpoints succeed again", "failures", s.n, "failed_for", time.Since(s.since).Round(time.Millisecond))
	}
	s.n = 0
}

// stopSaver stops the saver and waits for it; a checkpoint it is finishing
// completes first. Afterwards c.last is current.
func (c *checkpointer) stopSaver() {
	close(c.stop)
	<-c.exited
	select {
	case r := <-c.done:
		if r.err == nil {
			c.last, c.exact = r.offset, false
		}
	default:
	}
	c.busy = false
}
