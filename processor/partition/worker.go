package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/key"
	"dedup/rotation"
)

// tickInterval bounds how long the worker blocks on an idle partition: it
// flushes outputs, publishes counters and checks for a due checkpoint at
// least this often.
const tickInterval = 100 * time.Millisecond

// Worker owns one assigned input partition for one generation: its reader,
// its filter pair, its ack tracker. Nothing on its hot path is shared with
// another partition; the writer and the metrics are safe for concurrent use.
type Worker struct {
	d   Deps
	log *slog.Logger

	reader  *kafka.Reader
	pair    *rotation.Pair
	legacy  *legacy // the pair from before the filter options changed, while it holds keys
	filters filters // what the hot path asks: the pair, and the legacy pair behind it while one is kept
	acks    *ackTracker

	position int64     // next input offset to read: everything below is decided
	hwm      int64     // high-water mark seen with the last record
	lastTime time.Time // timestamp of the last record with a usable one, late ones too (gauges only)

	// pastEnd is the offset kafka-go's reader last reported past the
	// log's end (its error logger, from the reader's goroutine); -1: none.
	pastEnd atomic.Int64

	// futureAfter is the wall clock plus the allowed skew, computed once
	// per tick: a record stamped after it does not move event time.
	futureAfter time.Time

	// origins are the high-water marks of a repartitioned partition
	// (Deps.Repartitioned; nil otherwise), originTopic the origin topic
	// name last read, kept so that a record's origin costs no allocation.
	origins     origins
	originTopic string

	// Replay suppression after a restore: input offsets whose output is
	// already in the output topic. nil once the replay passed them all.
	suppress   map[int64]struct{}
	suppressTo int64
	drops      dropState // Deps.Drops: the drop topic's buffer, sample and replay (drop.go)

	batch   []record  // records read ahead, not yet decided from w.next on (reused)
	next    int       // the first record of batch not yet decided
	located int       // the records of batch located so far
	keys    key.Arena // key bytes built for the batch's records
	// fpNow is the pair's false-positive probability for a key it does
	// not hold, read again after fpLeft more such keys (refreshFP).
	fpNow  float64
	fpLeft int
	// waiting: a record waits for its schema (awaitKey), since waitStart.
	waiting   bool
	waitStart time.Time
	buf       []kafka.Message // outputs not yet handed to the writer
	arena     headerArena     // output header slices and source-offset texts
	srcTop    []byte
	srcPart   []byte
	refused   refusals
	// isolate is how many outputs at or after Deps.IsolateFrom are still
	// to be written alone (Deps.Probe).
	isolate int

	counts       counts // not yet added to metrics and Totals
	nextGauges   time.Time
	published    filterCounts // the pair's cumulative counts already in the counters
	removeWarned time.Time

	cp checkpointer

	// Input offset whose output failed in an earlier generation, until its
	// output is delivered (Owner.Delivered); -1 when none.
	recoverAt int64
}

// Run consumes until ctx (the generation) ends or something fails. Its
// deferred stop flushes, waits for acknowledgements, checkpoints and
// commits whatever Run finished, also after an error. A *ProduceError means
// an output was not delivered: nothing at or past it was committed.
func (w *Worker) Run(ctx context.Context) (err error) {
	w.cp.startSaver()
	w.baseline()
	defer func() { err = errors.Join(err, w.stop()) }()
	w.futureAfter = w.d.Clock.Now().Add(w.d.MaxClockSkew)
	for {
		fctx, cancel := context.WithTimeout(ctx, tickInterval)
		ferr := w.consume(fctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case ferr != nil && !errors.Is(ferr, context.DeadlineExceeded):
			return ferr
		}
		if err := w.periodic(ctx, time.Now()); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// batchMax bounds how many waiting records the worker reads before deciding
// them. Deciding a record waits for a filter probe, a cache (and TLB) miss
// of the pair; with records read ahead, the worker locates keys
// (rotation.Pair.Locate starts the load of each bucket) locateAhead
// records before deciding them, so the misses overlap the decisions. A
// checkpoint hand-off waits for the batch in hand.
const batchMax = 16

// locateAhead is how many records ahead of the one being decided the worker
// locates keys. Deciding a record takes far longer than a memory round
// trip, so a few records ahead are enough for each bucket to arrive in
// time, and only a few bucket loads are in flight at once instead of a
// whole batch's (32 lines for 16 records). It is kept because it is never
// slower than locating the whole batch first and costs nothing.
const locateAhead = 4

// locate extracts r's key and, when it has one, locates it in the pair,
// which starts loading its bucket.
func (w *Worker) locate(r *record) {
	if r.origin.ok {
		// Hop 1 keyed the repartition record by the dedup key it took:
		// not extracted again (a JSON field would be parsed twice).
		r.key = r.origin.dedup
		r.status = key.Keyed
		if len(r.key) == 0 {
			r.status = key.Empty
		}
	} else {
		r.key, r.status = w.d.Keys.Extract(&r.msg, &w.keys)
	}
	if r.status == key.Keyed {
		w.pair.Locate(r.key, &r.probe)
	}
}

// record is a fetched input record, its key and the key's place in the
// pair.
type record struct {
	msg    kafka.Message
	key    []byte
	status key.Status // key.Keyed, why it has no key, or key.Waiting for its schema
	probe  rotation.Probe
	// origin: the input record a repartitioned record copies (unwrap).
	origin originOf
	// byLegacy: the legacy pair, not the pair, held the key (legacyFilters).
	byLegacy bool
}

// source is the values of the source headers of r's origin, nil when it
// has none (the worker's own topic, partition and offset are the source).
func (r *record) source() *[3][]byte {
	if !r.origin.ok {
		return nil
	}
	return &r.origin.source
}

// consume is the hot loop: read → key → pair → write, until fctx expires.
// While the reader is behind it reads up to batchMax records, then decides
// them one by one in offset order, locating each key in the pair (hashing
// it once and starting its bucket's load) locateAhead records before it is
// decided (the pair is set by the restore, before the first batch, so a
// probe is used on the pair it was located on). A record whose schema is
// not known yet waits for it (awaitKey); when fctx ends first, the batch
// is kept from that record on (w.next) and consume goes on with it next
// time, after the tick's periodic work. A checkpoint hand-off takes
// w.position, below which everything is decided, so one taken while a
// record waits is consistent too.
func (w *Worker) consume(fctx context.Context) error {
	for {
		ferr := w.fetch(fctx)
		n := len(w.batch)
		for ; w.located < min(w.next+locateAhead, n); w.located++ {
			w.locate(&w.batch[w.located])
		}
		for ; w.next < n; w.next++ {
			if j := w.next + locateAhead; j < n && j >= w.located {
				w.locate(&w.batch[j])
				w.located = j + 1
			}
			r := &w.batch[w.next]
			if r.status == key.Waiting {
				if err := w.awaitKey(fctx, r); err != nil {
					return err
				}
			}
			if err := w.process(r); err != nil {
				return err
			}
		}
		clear(w.batch) // drop references to the records for the GC
		w.batch = w.batch[:0]
		w.next, w.located = 0, 0
		w.keys.Reset()
		if ferr != nil {
			return ferr
		}
		if w.cp.wanted.Load() {
			if err := w.handOff(); err != nil {
				return err
			}
		}
	}
}

// awaitKey waits until r's schema is known and extracts its key again.
// Records behind it wait too (they keep their order); other partitions go
// on. The first wait of a run is logged and counted, and so is its end.
func (w *Worker) awaitKey(fctx context.Context, r *record) error {
	for r.status == key.Waiting {
		if !w.waiting {
			w.waiting = true
			w.waitStart = time.Now()
			w.d.Metrics.KeyWaiting.Set(1)
			w.log.Warn("record waits for its schema from the schema registry; records behind it wait too, nothing is forwarded unkeyed",
				"offset", r.msg.Offset)
		}
		if err := w.d.Keys.Wait(fctx, &r.msg); err != nil {
			return err
		}
		r.key, r.status = w.d.Keys.Extract(&r.msg, &w.keys)
	}
	if w.waiting {
		w.waiting = false
		w.d.Metrics.KeyWaiting.Set(0)
		w.log.Info("schema known: the partition goes on", "offset", r.msg.Offset, "waited", time.Since(w.waitStart).Round(time.Millisecond))
	}
	if r.status == key.Keyed {
		w.pair.Locate(r.key, &r.probe)
	}
	return nil
}

// fetch appends the next record to w.batch and, while the partition holds
// more (the record's HighWaterMark is past it), up to batchMax-1 more. When
// the reader is caught up it returns after one record: no record waits for
// one that is not there yet. While behind, outputs wait in w.buf until
// flushAt or catching up anyway, so reading ahead adds no latency. Records
// read before an error are kept for the caller to decide.
func (w *Worker) fetch(fctx context.Context) error {
	for len(w.batch) < batchMax {
		m, err := w.reader.FetchMessage(fctx)
		if err != nil {
			if fctx.Err() != nil {
				return fctx.Err()
			}
			return fmt.Errorf("fetch %s/%d: %w", w.d.Topic, w.d.Partition, err)
		}
		w.batch = append(w.batch, record{msg: m})
		if w.origins != nil {
			w.unwrap(&w.batch[len(w.batch)-1])
		}
		if m.Offset+1 >= m.HighWaterMark {
			return nil
		}
	}
	return nil
}

// process decides one input record and, unless it is a duplicate or a
// replayed record already in the output, queues its output.
func (w *Worker) process(r *record) error {
	m := &r.msg
	if r.origin.control == controlUnknown {
		return w.unknownRecord(r) // the position stays at it
	}
	w.position = m.Offset + 1
	w.hwm = m.HighWaterMark
	w.counts.in++
	if r.origin.control == controlReset {
		w.controlRecord(r)
		return w.flushIfCaughtUp()
	}
	if w.origins != nil && w.resent(r) {
		// Sent again by hop 1 after a failure: taken before, whatever it
		// was decided then.
		w.counts.resent++
		return w.flushIfCaughtUp()
	}

	// ts is the event time the record is decided at. A zero time leaves the
	// pair's window where it is: kafka-go reads a missing timestamp (0 or
	// negative) as zero, and a timestamp too far ahead of the wall clock is
	// treated the same way, so that one bad producer clock cannot rotate
	// the filters away.
	ts := m.Time
	switch {
	case ts.IsZero():
		w.counts.missing++
	case ts.After(w.futureAfter):
		w.counts.future++
		ts = time.Time{}
	default:
		w.lastTime = ts
	}

	outcome := &w.counts.forwarded
	switch {
	case r.status != key.Keyed:
		outcome = &w.counts.unkeyed
		w.counts.unkeyedBy[r.status]++
	case w.isRetraction(m):
		outcome = &w.counts.retractions
		if err := w.filters.retract(r.key, ts); err != nil {
			w.warnRemove(err)
		}
	case w.filters.seen(r, ts):
		w.counts.duplicates++
		if w.d.Drops != nil {
			return w.drop(r)
		}
		return w.flushIfCaughtUp()
	default:
		// A key the filters did not hold: it could have read as held with
		// the pair's false-positive probability.
		if w.fpLeft--; w.fpLeft <= 0 {
			w.refreshFP()
		}
		w.counts.expectedFalse += w.fpNow
	}

	if w.suppress != nil && w.suppressed(m.Offset) {
		w.counts.suppressed++
		return w.flushIfCaughtUp()
	}
	// An output the output topic cannot take (too large; without a key for
	// a compacted topic) is never written: it goes to the dead-letter
	// topic or is skipped (refuse.go). After the broker
	// refused a batch, outputs are written alone until the refused record
	// is found (probe).
	size := w.outputSize(r)
	if size > w.d.Limit.Bytes {
		w.outputRefused()
		return w.refuse(r, size, w.tooLarge(size))
	}
	if m.Key == nil && w.d.Limit.KeyRequired != "" {
		w.outputRefused()
		return w.refuse(r, size, w.keyless())
	}
	if w.isolate > 0 && m.Offset >= w.d.IsolateFrom {
		return w.probe(r, outcome, ts, size)
	}
	*outcome++

	slot, err := w.slot(m.Offset, ts)
	if err != nil {
		return err
	}
	out := m.Time
	if out.IsZero() {
		// kafka-go writes a zero time as the wall clock; -1, Kafka's "no
		// timestamp", is the nearest it can write to what was read (a
		// record stamped 0 cannot be written as 0: kafka-go stamps that
		// too).
		out = noTimestamp
		w.counts.rewritten++
	}
	w.buf = append(w.buf, kafka.Message{
		Key:        m.Key,
		Value:      m.Value,
		Headers:    w.arena.headers(m, r.source(), w.srcTop, w.srcPart, w.acks.tail-1, w.acks.retired()),
		Time:       out,
		Partition:  w.d.Route.partition(w.d.Partition, m.Key),
		WriterData: slot,
	})
	if len(w.buf) >= w.d.FlushAt {
		return w.flush()
	}
	return w.flushIfCaughtUp()
}

// slot reserves the ack slot of the output (or drop) of input offset
// off, stamped ts for the end-to-end latency (zero: not observed).
func (w *Worker) slot(off int64, ts time.Time) (*ackSlot, error) {
	if s := w.acks.reserve(off, ts); s != nil {
		return s, nil
	}
	// The ring is full: hand what is buffered to the writer and wait for
	// acknowledgements. Not cancellable: the record is already decided,
	// so its output must be queued before anything moves on.
	if err := w.flush(); err != nil {
		return nil, err
	}
	if err := w.acks.waitRoom(context.Background()); err != nil {
		return nil, err
	}
	if err := w.acks.publish(); err != nil {
		return nil, err
	}
	return w.acks.reserve(off, ts), nil
}

// filters is what the hot path asks of the partition's filters, for a
// record at event time ts: the pair alone (pairFilters), or, after the
// filter options changed, the pair with the legacy pair asked behind it
// (legacyFilters, legacy.go).
type filters interface {
	// seen tests r's key, located in the pair, and adds it; it reports
	// whether the filters held it.
	seen(r *record, ts time.Time) bool
	// retract removes key from the filters that hold it.
	retract(key []byte, ts time.Time) error
	// held names the generation that held the key of r, which seen just
	// reported held, and that generation's window (the drop headers).
	held(r *record) (gen []byte, start, end time.Time)
}

// pairFilters is the partition's pair alone.
type pairFilters struct{ pair *rotation.Pair }

func (f pairFilters) seen(r *record, ts time.Time) bool { return f.pair.TestAndAddAt(&r.probe, ts) }

func (f pairFilters) held(r *record) ([]byte, time.Time, time.Time) {
	return heldIn(f.pair, f.pair.HeldBy(&r.probe))
}

func (f pairFilters) retract(key []byte, ts time.Time) error {
	_, err := f.pair.Remove(key, ts)
	return err
}

// setFilters chooses the filters the hot path asks, from the pair and the
// legacy pair held now.
func (w *Worker) setFilters() {
	if w.legacy == nil {
		w.filters = pairFilters{w.pair}
		return
	}
	w.filters = legacyFilters{pair: w.pair, legacy: w.legacy}
}

// flushIfCaughtUp hands buffered outputs to the writer when the record just
// read was the last one the broker had: more input is then not already on
// its way, and waiting for it would only add latency. While behind, the
// worker hands over up to flushAt outputs per call, which amortises
// WriteMessages' per-call cost (a map and a metadata lookup).
func (w *Worker) flushIfCaughtUp() error {
	if w.position >= w.hwm && (len(w.buf) > 0 || len(w.drops.buf) > 0) {
		return w.flush()
	}
	return nil
}

// flush publishes the reserved slots and hands the buffered outputs (and
// drops) to the asynchronous writers; acknowledgements arrive in
// Completion.Settle.
func (w *Worker) flush() error {
	if err := w.acks.publish(); err != nil {
		return err
	}
	if err := w.flushDrops(); err != nil {
		return err
	}
	if len(w.buf) == 0 {
		return nil
	}
	// Not the generation's context: once decided, outputs are written even
	// while the worker is being stopped. Async: this does not wait for acks.
	if err := w.d.Writer.WriteMessages(context.Background(), w.buf...); err != nil {
		w.acks.fail(w.buf[0].WriterData.(*ackSlot).offset, fmt.Errorf("queue %d outputs: %w", len(w.buf), err))
		return w.acks.failed()
	}
	clear(w.buf) // the writer holds copies; drop our references for the GC
	w.buf = w.buf[:0]
	return nil
}

func (w *Worker) isRetraction(m *kafka.Message) bool {
	if w.d.RetractHeader == "" {
		return false
	}
	for i := range m.Headers {
		if m.Headers[i].Key == w.d.RetractHeader {
			return true
		}
	}
	return false
}

// suppressed reports (once) whether the output of input offset off is
// already in the output topic.
func (w *Worker) suppressed(off int64) bool {
	if off >= w.suppressTo {
		w.suppress = nil
		return false
	}
	if _, ok := w.suppress[off]; ok {
		delete(w.suppress, off)
		return true
	}
	return false
}

// warnRemove logs, at most once a minute per partition, that a retraction
// could not be applied (plain mode cannot remove keys). The retraction is
// still forwarded.
func (w *Worker) warnRemove(err error) {
	now := time.Now()
	if now.Sub(w.removeWarned) < time.Minute {
		return
	}
	w.removeWarned = now
	if errors.Is(err, rotation.ErrRemoveUnsupported) {
		w.log.Warn("retraction forwarded but not applied: filter mode cannot remove keys",
			"mode", w.pair.Options().Mode.String(), "header", w.d.RetractHeader)
		return
	}
	w.log.Warn("retraction forwarded but not applied", "err", err)
}

// noTimestamp is the output time of a record read without a timestamp:
// kafka-go encodes it as -1.
var noTimestamp = time.UnixMilli(-1)

// periodic runs between hot-loop slices, at least every tickInterval. now
// schedules gauges and checkpoints; the skew rule reads Deps.Clock, which
// tests replace.
func (w *Worker) periodic(ctx context.Context, now time.Time) error {
	w.futureAfter = w.d.Clock.Now().Add(w.d.MaxClockSkew)
	if err := w.flush(); err != nil {
		return err
	}
	if w.recoverAt >= 0 && w.position > w.recoverAt && w.acks.settledBelow(w.recoverAt+1) {
		// Every output up to the one that failed is acknowledged (flush
		// published all reserved slots), or it was found in the output.
		if w.d.Owner != nil {
			w.d.Owner.Delivered(w.recoverAt)
		}
		w.recoverAt = -1
	}
	w.publishCounts()
	w.answerQuestions()
	if !now.Before(w.nextGauges) {
		w.nextGauges = now.Add(time.Second)
		w.releaseLegacy()
		w.updateGauges()
	}
	if w.cp.wanted.Load() {
		if err := w.handOff(); err != nil {
			return err
		}
	}
	w.cp.reap()
	if w.pastEnd.Load() >= 0 && !w.cp.busy {
		if err := w.readPastEnd(ctx); err != nil {
			return err
		}
	}
	w.cp.maybeStart(w, now)
	return nil
}

// readPastEnd handles kafka-go's reader reporting its offset past the log's
// end. If the log does end below the position, it was truncated under the
// reader (an unclean leader election, or the topic deleted and created
// again while the partition ran), and the reader would wait until the log
// passed the position, never reading the records written below it. The
// worker reads on from the log's end instead, at once, as a start would:
// it waits until every output of the old log is acknowledged (so the ack
// tracker's offsets keep rising), seeks the reader, and drops what the
// restore's replay scan found (offsets of the old log). No checkpoint is
// in flight (busy is false), so the saver reads the cleared replay mark
// only after the next start. A log that does not end below the position
// (the log grew meanwhile, or the answer came from a stale leader) changes
// nothing: the reader reads on.
func (w *Worker) readPastEnd(ctx context.Context) error {
	reported := w.pastEnd.Swap(-1)
	_, end, err := w.d.Offsets.Bounds(ctx)
	if err != nil {
		w.pastEnd.CompareAndSwap(-1, reported) // asked again at the next tick
		w.log.Debug("read log bounds after a fetch past the log end", "offset", reported, "err", err)
		return nil
	}
	if end >= w.position {
		return nil
	}
	if err := w.acks.waitAcknowledged(ctx, w.position); err != nil {
		w.pastEnd.CompareAndSwap(-1, reported)
		return err
	}
	if w.recoverAt >= 0 && w.d.Owner != nil {
		// Every output below the position is acknowledged, and an input
		// not read again yet went with the old log: nothing is left to
		// deliver.
		w.d.Owner.Delivered(w.recoverAt)
	}
	w.recoverAt = -1
	w.truncated(w.position, end, "reader: fetch past the log end")
	if err := w.reader.SetOffset(end); err != nil {
		return fmt.Errorf("seek %s/%d to %d: %w", w.d.Topic, w.d.Partition, end, err)
	}
	w.position, w.hwm = end, end
	w.suppress, w.suppressTo = nil, 0
	w.drops.suppress, w.drops.suppressTo = nil, 0
	w.cp.replay = replayMark{}
	return nil
}
