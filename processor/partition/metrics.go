package partition

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"dedup/checkpoint"
	"dedup/key"
	"dedup/rotation"
)

// Metrics are one partition's series, looked up once per assignment so
// that the hot path never hashes label values.
type Metrics struct {
	Forwarded, Duplicate, Retraction, Unkeyed prometheus.Counter
	// Unkeyed records by reason (key.Unkeyed), indexed by key.Status:
	// dedup_unkeyed_total{reason}. Nil entries are not counted.
	UnkeyedBy [key.NumStatus]prometheus.Counter
	// 1 while a record waits for its schema from the registry:
	// dedup_key_waiting.
	KeyWaiting prometheus.Gauge
	// The false drops expected so far: each key the filters did not hold
	// adds the pair's false-positive probability when it was tested
	// (dedup_expected_false_drops_total). Nil: not counted.
	ExpectedFalseDrops    prometheus.Counter
	Refused, DeadLettered prometheus.Counter // outputs the output cannot take
	ReplaySuppressed      prometheus.Counter
	// Duplicates written to the drop topic (Deps.Drops), and those not
	// written: left out by the sample, refused before writing (too large,
	// keyless for a compacted topic), found there already by a replay.
	// Nil: not counted.
	DroppedWritten, DroppedSampledOut, DroppedRefused, DroppedReplayed prometheus.Counter
	// A repartitioned partition's records sent again by hop 1 and
	// dropped by their origin offset, and records without an origin trailer
	// (not written by hop 1). Nil outside repartition mode.
	RepartitionResent, RepartitionUnmarked prometheus.Counter
	// A repartitioned partition's control records: resets (marks
	// lowered) and stops at records with unknown trailer flags.
	RepartitionResets, RepartitionUnknown prometheus.Counter
	Fill, EstKeys, FPRate, Saturated      [2]prometheus.Gauge // current, previous
	WindowElapsed, Bytes, Lag             prometheus.Gauge
	Rotations                             prometheus.Counter
	// Fingerprint mode's overload (rotation.Stats): inserts kept in a
	// generation's exact stash, early rotations forced by a full stash,
	// the keys those dropped; stash entries per generation.
	Overflows, EarlyRotations, ForgottenKeys prometheus.Counter
	Stashed                                  [2]prometheus.Gauge // current, previous
	CheckpointRaw, CheckpointStored          prometheus.Gauge
	CheckpointLast                           prometheus.Gauge
	Checkpoints, CheckpointFails             prometheus.Counter
	CheckpointSeconds                        prometheus.Observer // this store's series
	// Stored bytes written by checkpoints, by piece (pieceBase,
	// pieceIncrement): dedup_checkpoint_written_bytes_total.
	CheckpointWritten [2]prometheus.Counter
	// How long restores from the store took, load and decode of the base
	// and its increments: dedup_restore_duration_seconds.
	RestoreSeconds  prometheus.Observer
	CheckpointPause prometheus.Observer
	Restores        *prometheus.CounterVec // {source}
	// Records decided without moving event time: stamped further ahead of
	// the wall clock than the allowed skew, or without a timestamp.
	FutureTimestamps, MissingTimestamps prometheus.Counter
	// Forwarded records whose timestamp could not be written as read.
	RewrittenTimestamps prometheus.Counter
	RestoreScanned      prometheus.Counter // output records read by restores' replay scans
	// Input offsets below the log start when the partition got there
	// (deleted before they were read).
	SkippedOffsets prometheus.Counter
	// Times the partition's log was found ending below the offset it was
	// to read next: dedup_input_truncations_total.
	InputTruncations prometheus.Counter
	// Damaged snapshots of the partition the store found (and logged):
	// dedup_checkpoint_damaged_total.
	CheckpointDamaged prometheus.Counter
	// Starts that found no snapshot although the group had committed an
	// offset: dedup_checkpoint_missing_total.
	CheckpointMissing prometheus.Counter
	// Output partitions a restore's replay scan found shorter than the
	// checkpoint recorded them: dedup_output_truncations_total{topic,partition}.
	OutputTruncations *prometheus.CounterVec

	// The next offset to read and the offset last committed:
	// dedup_consumer_position, dedup_committed_offset.
	Position, Committed prometheus.Gauge
	// The chain the checkpoints write now: increments on its base and the
	// base's time (dedup_checkpoint_chain_*). Nil without a store.
	ChainIncrements, ChainBase prometheus.Gauge
	// dedup_restore_source, by Sources: 1 for this assignment's.
	RestoreSource [len(Sources)]prometheus.Gauge
}

// Sources are where a partition's state comes from at its assignment.
var Sources = [...]checkpoint.Source{SourceMemory, checkpoint.SourceLatest, checkpoint.SourceFallback, checkpoint.SourceEmpty}

// restoredFrom sets dedup_restore_source to source, a state set: one
// series 1, the others 0, so a partition restored again in a later
// generation shows only the newest source.
func (m *Metrics) restoredFrom(source checkpoint.Source) {
	for i, s := range Sources {
		v := 0.0
		if s == source {
			v = 1
		}
		m.RestoreSource[i].Set(v)
	}
}

// The pieces of a chain, as the label values of CheckpointWritten.
const (
	pieceBase = iota
	pieceIncrement
)

// PieceLabels are the piece label values, by piece.
var PieceLabels = [2]string{"base", "increment"}

// Totals are cumulative counts of input records by outcome over every
// partition of an instance, cheap to read at any time.
type Totals struct {
	In, Forwarded, Duplicates, Retractions, Unkeyed, Suppressed atomic.Uint64
	Refused, DeadLettered                                       atomic.Uint64
	Resent                                                      atomic.Uint64 // repartition re-sends dropped
	Dropped                                                     atomic.Uint64 // duplicates written to the drop topic
}

// counts are per-outcome tallies the worker keeps locally and publishes
// every tick, so the hot path touches no shared cache line per record.
type counts struct {
	in, forwarded, duplicates, retractions, unkeyed, suppressed uint64
	refused, deadLettered                                       uint64
	future, missing, rewritten                                  uint64
	resent, unmarked                                            uint64
	resets                                                      uint64 // reset records (controlRecord)
	dropped, dropSampledOut, dropRefused, dropReplayed          uint64 // Deps.Drops (drop.go)
	unkeyedBy                                                   [key.NumStatus]uint64
	expectedFalse                                               float64 // false drops expected of the keys tested
}

func (w *Worker) publishCounts() {
	c := w.counts
	w.counts = counts{}
	pm, pr := w.d.Metrics, w.d.Totals
	if c.in == 0 {
		return
	}
	pr.In.Add(c.in)
	publish(c.forwarded, pm.Forwarded, &pr.Forwarded)
	publish(c.duplicates, pm.Duplicate, &pr.Duplicates)
	publish(c.retractions, pm.Retraction, &pr.Retractions)
	publish(c.unkeyed, pm.Unkeyed, &pr.Unkeyed)
	if c.expectedFalse > 0 && pm.ExpectedFalseDrops != nil {
		pm.ExpectedFalseDrops.Add(c.expectedFalse)
	}
	for st, n := range c.unkeyedBy {
		if n > 0 && pm.UnkeyedBy[st] != nil {
			pm.UnkeyedBy[st].Add(float64(n))
		}
	}
	publish(c.suppressed, pm.ReplaySuppressed, &pr.Suppressed)
	publish(c.refused, pm.Refused, &pr.Refused)
	publish(c.deadLettered, pm.DeadLettered, &pr.DeadLettered)
	if c.resent > 0 {
		pr.Resent.Add(c.resent)
		if pm.RepartitionResent != nil {
			pm.RepartitionResent.Add(float64(c.resent))
		}
	}
	if c.unmarked > 0 && pm.RepartitionUnmarked != nil {
		pm.RepartitionUnmarked.Add(float64(c.unmarked))
	}
	if c.resets > 0 && pm.RepartitionResets != nil {
		pm.RepartitionResets.Add(float64(c.resets))
	}
	if c.dropped > 0 {
		pr.Dropped.Add(c.dropped)
	}
	for _, a := range [...]struct {
		n uint64
		m prometheus.Counter
	}{{c.dropped, pm.DroppedWritten}, {c.dropSampledOut, pm.DroppedSampledOut}, {c.dropRefused, pm.DroppedRefused}, {c.dropReplayed, pm.DroppedReplayed}} {
		if a.n > 0 && a.m != nil {
			a.m.Add(float64(a.n))
		}
	}
	for _, a := range [...]struct {
		n uint64
		m prometheus.Counter
	}{{c.future, pm.FutureTimestamps}, {c.missing, pm.MissingTimestamps}, {c.rewritten, pm.RewrittenTimestamps}} {
		if a.n > 0 {
			a.m.Add(float64(a.n))
		}
	}
}

// publish adds a tick's tally to its Prometheus counter and to the
// instance's totals, skipping the shared writes when there is nothing.
func publish(n uint64, m prometheus.Counter, total *atomic.Uint64) {
	if n > 0 {
		m.Add(float64(n))
		total.Add(n)
	}
}

// refreshFP reads the pair's false-positive probability for a key it does
// not hold (either generation reading it as held) and when to read it
// again: after a small share of the pair's size, so that the probability
// each test adds follows the fill closely at a cost of one Stats per
// that many keys.
func (w *Worker) refreshFP() {
	st := w.pair.Stats()
	w.fpNow = 1 - (1-st.Current.FPRate)*(1-st.Previous.FPRate)
	w.fpLeft = int(min(max(w.d.Filter.ExpectedKeys/512, 8), 4096))
}

// filterCounts are a pair's cumulative counts (rotation.Stats) that the
// worker exports as counter increments.
type filterCounts struct {
	rotations, overflows, early, forgotten uint64
}

func filterCountsOf(s rotation.Stats) filterCounts {
	return filterCounts{rotations: s.Rotations, overflows: s.Overflows, early: s.EarlyRotations, forgotten: s.ForgottenKeys}
}

// baseline takes the pair's cumulative counts as already published. A
// restored pair carries the counts of the partition's earlier owners, which
// the counters of this assignment (created at 0) must not jump by: an
// increase() would show them as happening now, and alert on them.
func (w *Worker) baseline() {
	w.published = filterCountsOf(w.pair.Stats())
}

// addSince adds now-before to c. Cumulative counts only grow while the
// worker holds the pair; a smaller value is a new baseline, not a decrease.
func addSince(c prometheus.Counter, now, before uint64) {
	if now > before {
		c.Add(float64(now - before))
	}
}

// updateGauges refreshes the filter and lag gauges and adds the pair's new
// rotations and overload counts to their counters; Stats is O(1).
func (w *Worker) updateGauges() {
	s := w.pair.Stats()
	pm := w.d.Metrics
	for i, f := range [2]rotation.FilterStats{s.Current, s.Previous} {
		pm.Fill[i].Set(f.Fill)
		pm.EstKeys[i].Set(f.EstimatedKeys)
		pm.FPRate[i].Set(f.FPRate)
		pm.Saturated[i].Set(float64(f.Saturated))
		pm.Stashed[i].Set(float64(f.Stashed))
	}
	bytes := s.Bytes
	if w.legacy != nil {
		bytes += w.legacy.pair.SizeBytes()
	}
	pm.Bytes.Set(float64(bytes))
	now, was := filterCountsOf(s), w.published
	addSince(pm.Rotations, now.rotations, was.rotations)
	addSince(pm.Overflows, now.overflows, was.overflows)
	addSince(pm.EarlyRotations, now.early, was.early)
	addSince(pm.ForgottenKeys, now.forgotten, was.forgotten)
	w.published = now
	if !s.WindowStart.IsZero() && s.Window > 0 {
		// Event time of the window's progress: how far the last record's
		// timestamp is into the current window.
		pm.WindowElapsed.Set(min(1, max(0, float64(w.lastTime.Sub(s.WindowStart))/float64(s.Window))))
	}
	if w.hwm > 0 {
		pm.Lag.Set(float64(max(0, w.hwm-w.position)))
	}
	pm.Position.Set(float64(w.position))
}
