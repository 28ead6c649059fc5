package partition

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/checkpoint"
	"dedup/rotation"
)

// SourceMemory is the dedup_restores_total{source} of a partition that
// kept its pair from the previous generation (Deps.Warm).
const SourceMemory checkpoint.Source = "memory"

// Start prepares an assigned partition: restore the filter pair, find the
// start offset, open a partition-bound reader there. The returned Worker is
// consumed by Run.
//
// With a Store, the partition's newest valid snapshot decides: its pair and
// its offset (never the committed offset when the two differ), plus a scan
// of the output from the snapshot's recorded end offsets so that records
// already forwarded before a crash are not forwarded again. Without a
// usable snapshot the partition starts at the committed offset (or the
// logical offset the group gave) with empty filters.
func Start(ctx context.Context, d Deps) (*Worker, error) {
	topic, part := d.Topic, d.Partition
	log := d.Log
	w := &Worker{
		d:         d,
		log:       log,
		srcTop:    []byte(topic),
		srcPart:   []byte(strconv.Itoa(part)),
		position:  -1,
		recoverAt: d.RecoverAt,
	}
	w.pastEnd.Store(-1)
	w.acks = newAckTracker(part, d.InflightCap)
	if d.Drops != nil {
		w.drops.sampleBelow = sampleBound(d.Drops.SampleRate)
	}
	if w.d.Limit.Bytes <= 0 {
		w.d.Limit = Limit{Bytes: math.MaxInt64, Setting: "none"}
	}
	if d.Probe != nil {
		w.isolate = d.IsolateCount
	}
	if w.d.Clock == nil {
		w.d.Clock = systemClock{}
	}
	if d.Repartitioned {
		w.arena.prefix = fmt.Appendf(nil, "%s/%d/", topic, part)
	}

	committed := d.Committed // absolute, or kafka.FirstOffset/LastOffset when none
	start := committed
	source := checkpoint.SourceEmpty
	resumed := "committed offset" // what decided start, for a skipped-input warning
	var anchor *outputMark        // replay-scan start of the initial checkpoint, when known
	var replay replayMark         // the restore's replay, for the checkpoints' scan start
	dropsUnmarked := false        // the snapshot recorded no end offsets of Deps.Drops's topic
	var continued chain           // the chain this assignment continues (zero: none)
	switch {
	case d.Warm != nil:
		// Kept from the previous generation at exactly the committed
		// offset (the owner checked it): nothing to load, nothing to scan.
		w.pair, source = d.Warm.Pair, SourceMemory
		resumed = "kept filters at the committed offset"
		continued = d.Warm.chain
	case d.Store != nil:
		r, err := w.restore(ctx)
		if err != nil {
			return nil, err
		}
		if r.found {
			w.cp.epoch.Store(r.meta.Epoch)
			start = r.meta.Offset
			source = r.source
			resumed = "checkpoint"
			if r.rejected {
				resumed = "committed offset (no checkpoint used)"
			}
			mark := outputMark{ends: r.meta.OutputEnds, inputs: r.meta.InputPartitions, outputs: r.meta.OutputPartitions}
			mark.dropped, mark.droppedParts = d.droppedMark(r.meta)
			if d.Drops != nil && mark.dropped == nil {
				// Taken without this drop topic: no drop of an input
				// after it was written since (a start that writes drops
				// anchors first, below), so the drop topic's ends now
				// are a complete scan start for the drops.
				if err := d.readDropMark(ctx, &mark); err != nil {
					return nil, err
				}
				dropsUnmarked = true
			}
			if r.pair != nil {
				w.pair = r.pair
			} else {
				anchor = &mark // the scan from there covered everything since
			}
			w.legacy = r.legacy
			w.origins = r.marks
			continued = r.chain
			w.suppress, w.suppressTo = r.suppress, r.suppressTo
			w.drops.suppress, w.drops.suppressTo = r.dropSuppress, r.dropSuppressTo
			replay = replayMark{to: r.suppressTo, dropTo: r.dropSuppressTo, from: mark}
		}
	}
	if w.pair == nil {
		// Allocated only now, so that a restored partition never holds
		// two pairs at once (but for a legacy pair, which is the decoded
		// snapshot itself).
		pair, err := rotation.New(d.Filter)
		if err != nil {
			return nil, fmt.Errorf("create filter pair: %w", err)
		}
		// Commit the pair's memory now, as a restored pair's is by
		// decoding: otherwise the first records pay a page fault per page
		// of fresh memory on the hot path, and the process's resident size
		// (and an undersized memory limit) shows up only as the filters
		// fill, hours later, instead of at assignment.
		pair.Reset()
		w.pair = pair
	}
	switch {
	case !d.Repartitioned:
		w.origins = nil // marks of a repartitioned past are of no use
	case w.origins == nil:
		// Nothing taken yet, or every snapshot lost: without marks a
		// re-send of an input record taken before is decided as a new
		// record (the filters drop it as a duplicate while they hold
		// its key).
		w.origins = origins{}
	}
	if w.legacy != nil {
		// Aged to the stream's time from the first record on, which may be
		// late or have no timestamp: the restored pair's (a fresh pair has
		// none yet, and the legacy pair's own time stands).
		w.legacy.age(w.pair.Stats().WindowStart)
	}
	w.setFilters()
	first, end, err := d.Offsets.Bounds(ctx)
	switch {
	case start < 0:
		if err != nil {
			return nil, err
		}
		if start == kafka.LastOffset {
			start = end
		} else {
			start = first
		}
	case err != nil:
		// The reader's loggers still name a jump to the log start.
		log.Debug("read log bounds", "err", err)
	case start < first:
		// Deleted while the stage was down or behind: say so here, where
		// the offset it should have resumed at is known, and seek to the
		// log start itself (the reader would, silently).
		w.skipped(start, first, "start from "+resumed)
		start = first
	case start > end:
		// The log ends below where the partition resumes: it was truncated
		// or created again. kafka-go's reader would wait, silently, until
		// the log passed the offset, never reading what was written below
		// it. Resume at the end instead, and say so.
		w.truncated(start, end, "start from "+resumed)
		start = end
		// Offsets to suppress name records of the old log.
		w.suppress, w.suppressTo, replay = nil, 0, replayMark{}
		w.drops.suppress, w.drops.suppressTo = nil, 0
		continued = chain{} // its offsets are of the old log
	}
	d.Metrics.Restores.WithLabelValues(string(source)).Inc()
	d.Metrics.restoredFrom(source)
	if committed >= 0 {
		d.Metrics.Committed.Set(float64(committed))
	}

	rc := d.Reader
	rc.Topic, rc.Partition = topic, part
	// Nothing the reader decides is silent: its chatty logger goes to
	// debug, its error logger to warn, and both name skipped input.
	rc.Logger, rc.ErrorLogger = newReaderLoggers(w)
	// The default 100-message queue between kafka-go's fetch goroutine
	// and FetchMessage stalls the fetcher twice per 1 MB fetch of small
	// records; a deeper queue lets it run a whole fetch ahead.
	rc.QueueCapacity = cmp.Or(d.ReadQueue, 4096)
	// Lag comes from each record's HighWaterMark; the reader's own lag
	// poller would cost a ListOffsets round trip per interval.
	rc.ReadLagInterval = -1
	w.reader = kafka.NewReader(rc)
	if err := w.reader.SetOffset(start); err != nil {
		_ = w.reader.Close()
		return nil, fmt.Errorf("seek %s/%d to %d: %w", topic, part, start, err)
	}
	w.position = start
	w.hwm = start
	w.cp.init(w.d, log, w.acks, replay, committed)
	w.cp.legacyHeld.Store(w.legacy != nil)
	if committed < 0 {
		w.cp.last = -1
	}
	// A kept pair was last checkpointed exactly at the offset it resumes
	// at (the stop that kept it made sure).
	w.cp.exact = source == SourceMemory
	// The chain restored in full, or the kept pair's, goes on: a move
	// writes no base. The pair holds exactly the chain's head, and counts
	// its changes from there (decoding and applying pieces, and taking the
	// final checkpoint of a kept pair, left it so).
	claim := false
	if d.Store != nil && w.legacy == nil && continued.continues(d, time.Now()) {
		w.cp.chain = continued
		// A restored chain is claimed at once: an increment of this
		// generation (Meta.Owner) on its head, so that the previous owner,
		// should it still write, is fenced out of it (a kept pair's chain
		// was this member's own).
		claim = source != SourceMemory
	}
	if d.Store != nil && (source == checkpoint.SourceEmpty || dropsUnmarked || claim) {
		// Anchor the partition before the first record: a crash before the
		// first periodic checkpoint then restores here and its replay scan
		// starts at today's output end, so even the first outputs are never
		// forwarded twice. A restored snapshot without the drop topic's
		// ends is anchored too, at the restore's own scan start, so that
		// the drops written from here on are found by the next restore;
		// so is a continued chain (the claim, an empty increment).
		var (
			ends  outputMark
			err   error
			fresh bool
		)
		switch {
		case anchor != nil:
			ends = *anchor
		case source != checkpoint.SourceEmpty && replay.from.ends != nil:
			ends = replay.from
		default:
			ends, err = w.cp.outputMark(ctx)
			fresh = true
		}
		if err == nil {
			err = w.finishCheckpoint(ctx, start, ends, time.Now())
		}
		if err != nil {
			_ = w.reader.Close()
			return nil, fmt.Errorf("write initial checkpoint of %s/%d: %w", topic, part, err)
		}
		w.cp.last, w.cp.exact = start, fresh
	}
	log.Info("partition assigned", OffsetAttr("committed", committed), "start", start, "source", string(source),
		"suppress", len(w.suppress), "origins", len(w.origins))
	return w, nil
}

type restored struct {
	found      bool
	meta       checkpoint.Meta
	source     checkpoint.Source
	pair       *rotation.Pair // nil: options changed, start empty at meta.Offset
	legacy     *legacy        // the pair from before the options changed, still holding keys
	suppress   map[int64]struct{}
	suppressTo int64
	rejected   bool    // no snapshot used (all rejected or none left): meta is the committed offset's
	marks      origins // a repartitioned partition's high-water marks (nil: none saved)
	chain      chain   // the chain read, when pair is its head exactly (zero otherwise)

	// Inputs at or after the snapshot whose drop is in the drop topic.
	dropSuppress   map[int64]struct{}
	dropSuppressTo int64
}

// restore loads the newest valid snapshot and scans the output for records
// it forwarded after the snapshot.
//
// Filter options changed since the snapshot (DEDUP_EXPECTED_KEYS, DEDUP_FP_RATE,
// DEDUP_WINDOW or DEDUP_MODE): a filter cannot be resized, so the pair
// starts empty, but at the snapshot's offset and with the replay scan, and
// the snapshot's pair is kept as the legacy pair (legacy.go) until it
// would have rotated its last key out. Every input below that offset was
// already decided and forwarded, so nothing is forwarded twice by the
// restart itself, and keys seen before the change are still dropped.
// (Starting at the committed offset instead would re-forward first
// occurrences between it and the snapshot offset.) A snapshot's own legacy
// pair with the configured options is resumed with (a rolling deploy moved
// the partition back); with a third set of options it is dropped: only one
// is kept.
func (w *Worker) restore(ctx context.Context) (restored, error) {
	d, log := w.d, w.log
	want := d.Filter
	var (
		got      *rotation.Pair
		old      *legacy
		mismatch bool
	)
	// Each damaged snapshot the store finds (and logs) is counted.
	lctx := checkpoint.WithDamageReport(ctx, d.Metrics.damageFound)
	// The chain read: its base and the increments applied on it.
	var (
		increments int
		readBytes  int64
		marks      origins         // the high-water marks of the pieces read
		baseMeta   checkpoint.Meta // the base read
	)
	loadBegan := time.Now()
	meta, source, err := d.Store.Load(lctx, d.Topic, d.Partition, func(m checkpoint.Meta, r io.Reader) error {
		// Every piece of a repartitioned partition starts with its marks;
		// they are taken only with the piece (all or nothing).
		pm, r, err := readOrigins(r)
		if err != nil {
			return err
		}
		if m.Group != "" && m.Group != d.GroupID {
			return fmt.Errorf("snapshot of group %q, want %q", m.Group, d.GroupID)
		}
		if m.Topic != d.Topic || m.Partition != d.Partition {
			return fmt.Errorf("snapshot of %s/%d, want %s/%d", m.Topic, m.Partition, d.Topic, d.Partition)
		}
		if m.Increment() {
			// All or nothing: a refused increment leaves the pair as the
			// pieces before it made it, and the chain ends there.
			if got == nil || old != nil {
				return fmt.Errorf("increment %d without a base it applies to", m.Seq)
			}
			if _, err := got.ApplyDelta(r); err != nil {
				return err
			}
			if pm != nil {
				marks = pm
			}
			increments++
			readBytes += m.StoredBytes
			return nil
		}
		var pr rotation.Pair
		l, err := readState(r, &pr)
		if err != nil {
			return err
		}
		got, old, mismatch, marks = &pr, l, pr.Options() != want, pm
		increments, readBytes, baseMeta = 0, m.StoredBytes, m
		return nil
	})
	loaded := time.Since(loadBegan)
	if err == nil {
		d.Metrics.RestoreSeconds.Observe(loaded.Seconds())
	}
	var loadErr *checkpoint.LoadError
	emptied := false // no snapshot used: meta is the committed offset's
	switch {
	case err == nil:
	case errors.Is(err, checkpoint.ErrNotFound) && d.Committed < 0 && !d.RefusedBefore:
		log.Info("no checkpoint: starting with empty filters")
		return restored{}, nil
	case errors.Is(err, checkpoint.ErrNotFound):
		// The partition has been processed before, yet the store holds
		// nothing of it: the operator removed the damaged snapshots of a
		// refused partition, or (a commit never comes before the
		// partition's first checkpoint) the store lost its state. Start
		// empty as OnDamageEmpty would, with the replay scan from the
		// commit's output end offsets, so no input is forwarded twice.
		off, ends, cerr := d.Group.CommittedEnds(ctx)
		var what string
		level := slog.LevelWarn
		if d.RefusedBefore {
			if cerr != nil {
				return restored{}, fmt.Errorf("damaged checkpoints of %s/%d removed, and %w", d.Topic, d.Partition, cerr)
			}
			what = fmt.Sprintf("damaged checkpoints of %s/%d removed: starting with empty filters at the committed offset, "+
				"keys seen before may be forwarded again", d.Topic, d.Partition)
		} else {
			if cerr != nil {
				return restored{}, fmt.Errorf("no checkpoint of %s/%d although the group committed offset %d, and %w", d.Topic, d.Partition, d.Committed, cerr)
			}
			what = fmt.Sprintf("no checkpoint of %s/%d although the group committed an offset of it: the checkpoint store "+
				"lost its state (topic or directory deleted, emptied or changed, or the offsets committed by another consumer); "+
				"starting with empty filters at the committed offset, keys seen before may be forwarded again", d.Topic, d.Partition)
			level = slog.LevelError
			if c := d.Metrics.CheckpointMissing; c != nil {
				c.Inc()
			}
		}
		if off < 0 || ends == nil {
			log.Log(ctx, level, what+"; the commit records no output end offsets: no replay scan", "committed", off)
			return restored{}, nil
		}
		log.Log(ctx, level, what+"; replay scan from the output end offsets recorded with it", "committed", off)
		meta, source, got, old, mismatch, marks = checkpoint.Meta{Offset: off, OutputEnds: ends}, checkpoint.SourceEmpty, nil, nil, false, nil
		emptied = true
	case errors.As(err, &loadErr) && errors.As(err, new(*checkpoint.ReadError)):
		// A snapshot could not be read for now (the checkpoint topic
		// unreachable mid-restore): that is no damage, and starting empty
		// for it would forget the state. The start is retried.
		return restored{}, fmt.Errorf("load checkpoint of %s/%d: a snapshot could not be read: %w", d.Topic, d.Partition, err)
	case errors.As(err, &loadErr) && d.OnDamage == OnDamageRefuse:
		// The operator chose to repair or remove the damaged snapshots
		// rather than forward keys seen before again.
		log.Error(fmt.Sprintf("every checkpoint of %s/%d damaged: not starting the partition (CHECKPOINT_ON_DAMAGE=refuse); "+
			"repair or remove the damaged snapshots and it starts", d.Topic, d.Partition),
			"damaged_snapshots", damagedNames(loadErr), "err", err)
		return restored{}, &DamagedError{Topic: d.Topic, Partition: d.Partition, Load: loadErr}
	case errors.As(err, &loadErr):
		// Every snapshot was rejected. Crash-looping would not make one
		// valid: start empty at the committed offset, loudly, with the
		// replay scan from the output end offsets the commit recorded
		// (those of the checkpoint at that offset).
		off, ends, cerr := d.Group.CommittedEnds(ctx)
		if cerr != nil {
			return restored{}, fmt.Errorf("every checkpoint of %s/%d rejected (%w), and %w", d.Topic, d.Partition, err, cerr)
		}
		what := fmt.Sprintf("every checkpoint of %s/%d damaged: starting with empty filters at the committed offset "+
			"(CHECKPOINT_ON_DAMAGE=empty), keys seen before may be forwarded again", d.Topic, d.Partition)
		if off < 0 || ends == nil {
			log.Error(what+"; the commit records no output end offsets: no replay scan",
				"damaged_snapshots", damagedNames(loadErr), "err", err, "committed", off)
			return restored{}, nil
		}
		log.Error(what+"; replay scan from the output end offsets recorded with it",
			"damaged_snapshots", damagedNames(loadErr), "err", err, "committed", off)
		// Nothing of a rejected snapshot is kept: not its legacy pair either
		// (the decoder may have read one before the snapshot failed).
		meta, source, got, old, mismatch, marks = checkpoint.Meta{Offset: off, OutputEnds: ends}, checkpoint.SourceEmpty, nil, nil, false, nil
		emptied = true
	default:
		return restored{}, fmt.Errorf("load checkpoint of %s/%d: %w", d.Topic, d.Partition, err)
	}
	r := restored{found: true, meta: meta, source: source, pair: got, legacy: old, rejected: emptied, marks: marks}
	if source == checkpoint.SourceLatest && !mismatch && old == nil && got != nil {
		// The newest chain whole, as its writer left it: it may go on.
		r.chain = chain{base: baseMeta, head: meta.Seq, bytes: meta.ChainBytes, increments: increments, owner: meta.Owner}
	}
	if mismatch {
		// The snapshot's pair becomes the legacy one, unless no record
		// ever reached it (it holds nothing to keep).
		r.legacy = nil
		if !got.Expired(time.Time{}) {
			r.legacy = newLegacy(got)
		}
		if old != nil && old.pair.Options() == want {
			// Back to the options of the snapshot's legacy pair: a rolling
			// deploy moved the partition from a member with the new options
			// to one with the old. Resume with that pair (it holds every key
			// from before the change, and rotates again from the snapshot
			// pair's time), the retractions since applied as the configured
			// mode applies retractions: plain mode applies none.
			log.Warn("checkpoint built with other filter options, holding filters with the configured ones: "+
				"resuming with those, the snapshot's are kept read-only until their keys leave the window",
				"snapshot", fmt.Sprintf("%+v", got.Options()), "configured", fmt.Sprintf("%+v", want), "offset", meta.Offset)
			pair, notApplied, err := old.resume(got.Stats().WindowStart)
			if err != nil {
				return restored{}, fmt.Errorf("resume filters of %s/%d: %w", d.Topic, d.Partition, err)
			}
			if notApplied > 0 {
				log.Info("retractions made under the other filter options not applied to the resumed filters: "+
					"the configured mode applies no retraction", "mode", want.Mode.String(), "retractions_not_applied", notApplied)
			}
			r.pair = pair
		} else {
			log.Warn("checkpoint built with other filter options: new filters start empty at its offset, "+
				"the old ones are kept read-only until their keys leave the window",
				"snapshot", fmt.Sprintf("%+v", got.Options()), "configured", fmt.Sprintf("%+v", want), "offset", meta.Offset,
				"older_legacy_dropped", old != nil)
			r.pair, r.source = nil, checkpoint.SourceEmpty
		}
	}
	began := time.Now()
	so := d.Scan
	so.From, so.SourceTopic, so.SourcePartition, so.MinOffset = meta.OutputEnds, d.Topic, d.Partition, meta.Offset
	so.Partitions = d.Route.ReachedSince(d.Partition, meta)
	scan, err := checkpoint.ScanOutput(ctx, so)
	if err != nil {
		return restored{}, fmt.Errorf("scan output after checkpoint of %s/%d: %w", d.Topic, d.Partition, err)
	}
	d.Metrics.RestoreScanned.Add(float64(scan.Records))
	w.reportTruncated(so.OutputTopic, scan.Truncated)
	if r.dropSuppress, r.dropSuppressTo, err = w.scanDrops(ctx, meta); err != nil {
		return restored{}, err
	}
	suppress := scan.Forwarded
	for off := range suppress {
		r.suppressTo = max(r.suppressTo, off+1)
	}
	if len(suppress) > 0 {
		r.suppress = suppress
	}
	log.Info("checkpoint restored", "source", string(r.source), "offset", meta.Offset, "seq", meta.Seq, "base", meta.Base,
		"increments", increments, "read_bytes", readBytes, "load", loaded,
		"created", meta.Created, "already_forwarded", len(suppress), "already_dropped", len(r.dropSuppress), "scanned", scan.Records, "scan", time.Since(began))
	return r, nil
}
