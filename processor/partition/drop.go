package partition

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/segmentio/kafka-go"

	"dedup/checkpoint"
	"dedup/rotation"
)

// Headers a record written to the drop topic carries besides its own and
// the source headers: why it was dropped, the generation that held its key
// and that generation's event-time window, [start, end) in RFC 3339 (UTC).
const (
	HeaderDropReason      = "dedup-drop-reason"
	HeaderDropGeneration  = "dedup-drop-generation"
	HeaderDropWindowStart = "dedup-drop-window-start"
	HeaderDropWindowEnd   = "dedup-drop-window-end"
)

// The values of HeaderDropReason and HeaderDropGeneration.
const (
	DropReasonDuplicate = "duplicate"
	DropGenCurrent      = "current"  // the pair's current generation
	DropGenPrevious     = "previous" // the pair's previous generation
	DropGenLegacy       = "legacy"   // the pair kept from before the filter options changed (legacy.go)
)

// Drops is DROPPED_TOPIC as a partition writes it. A drop is written
// through the ack ring as an output is: its slot holds the commit back
// until it is acknowledged, a failure is a *ProduceError (Dropped set),
// checkpoints record the drop topic's end offsets beside the output's, and
// a restore scans the drop topic from them so that a replay writes again
// only the drops that did not land.
type Drops struct {
	Topic string
	// Writer is the drop topic's asynchronous writer, settled by
	// Completion.Settle like Deps.Writer. Unlike kafka.Writer, it must
	// have copied what it keeps of the messages when WriteMessages
	// returns (output's drop writer encodes them as it takes them): their
	// headers are reused for the next drops.
	Writer Writer
	// Route chooses a drop's partition of the drop topic as the output's
	// Router does (Route.OutputPartitions is the drop topic's count).
	Route Router
	// Limit is the largest drop the writer and the drop topic take: a
	// larger one (or a keyless one for a compacted drop topic) is not
	// written, logged and counted.
	Limit Limit
	// SampleRate is the share of drops written, 0 < r <= 1 (0: all),
	// chosen by the dedup key's hash: a replay samples the same records.
	SampleRate float64
}

var (
	dropReason = []byte(DropReasonDuplicate)
	dropGens   = [...][]byte{rotation.Current: []byte(DropGenCurrent), rotation.Previous: []byte(DropGenPrevious),
		rotation.NotHeld: []byte("none")}
	dropGenLegacy = []byte(DropGenLegacy)
)

// dropState is the worker's side of Deps.Drops.
type dropState struct {
	buf []kafka.Message // drops not yet handed to the drop writer
	// hdrs and texts hold the headers and offset texts of buf's drops,
	// reused once the drop writer took them (Drops.Writer): the same
	// memory each flush, where the arena's cycles through every output
	// in flight.
	hdrs  []kafka.Header
	texts []byte
	// sampleBelow: a key whose sampleHash is above it is not written.
	sampleBelow uint64
	// Replay suppression after a restore: input offsets whose drop is
	// already in the drop topic (as Worker.suppress for the output; apart
	// from it, so that a record decided otherwise on replay is neither
	// lost nor written twice). nil once the replay passed them all.
	suppress   map[int64]struct{}
	suppressTo int64
	windows    dropHeaderSets
	refused    refusals
}

// sampleBound is the bound on sampleHash below which a key's drops are
// written, for a share rate of them.
func sampleBound(rate float64) uint64 {
	if rate <= 0 || rate >= 1 {
		return math.MaxUint64
	}
	return uint64(math.Ldexp(rate, 64))
}

// sampleHash is the dedup key's xxhash, mixed (splitmix64's finalizer) so
// that the sample does not select keys by where they lie in the filters,
// which place them by the same hash.
func sampleHash(key []byte) uint64 {
	h := xxhash.Sum64(key)
	h = (h ^ h>>30) * 0xbf58476d1ce4e5b9
	h = (h ^ h>>27) * 0x94d049bb133111eb
	return h ^ h>>31
}

// drop writes the duplicate r to the drop topic unless the sample leaves it out, a replay finds it already there,
// or the topic cannot take it. It is unchanged (key, value, timestamp as
// written to the output, headers), with the source headers an output
// would carry and the drop headers.
func (w *Worker) drop(r *record) error {
	m := &r.msg
	ds := &w.drops
	if ds.sampleBelow != math.MaxUint64 && sampleHash(r.key) > ds.sampleBelow {
		w.counts.dropSampledOut++
		return w.flushIfCaughtUp()
	}
	if ds.suppress != nil && ds.suppressed(m.Offset) {
		w.counts.dropReplayed++
		return w.flushIfCaughtUp()
	}
	hdrs := ds.windows.of(w.filters.held(r))
	lim := &w.d.Drops.Limit
	if size := w.outputSize(r) + hdrs.size; size > lim.Bytes || (m.Key == nil && lim.KeyRequired != "") {
		w.counts.dropRefused++
		w.logDropRefused(m, size)
		return w.flushIfCaughtUp()
	}
	slot, err := w.slot(m.Offset, time.Time{}) // no end-to-end latency: that is the output's
	if err != nil {
		return err
	}
	slot.drop = true
	out := m.Time
	if out.IsZero() {
		out = noTimestamp // as process writes its outputs
	}
	// An append that moves hdrs or texts leaves the earlier drops' slices
	// on the old arrays, unchanged.
	h := len(ds.hdrs)
	t := len(ds.texts)
	ds.texts = w.arena.text(ds.texts, m.Offset)
	ds.hdrs = w.arena.appendAdded(append(ds.hdrs, m.Headers...), r.source(), w.srcTop, w.srcPart, ds.texts[t:len(ds.texts):len(ds.texts)])
	ds.hdrs = append(ds.hdrs, hdrs.hdrs[:]...)
	ds.buf = append(ds.buf, kafka.Message{
		Key:        m.Key,
		Value:      m.Value,
		Headers:    ds.hdrs[h:len(ds.hdrs):len(ds.hdrs)],
		Time:       out,
		Partition:  w.d.Drops.Route.partition(w.d.Partition, m.Key),
		WriterData: slot,
	})
	w.counts.dropped++
	if len(ds.buf) >= w.d.FlushAt {
		return w.flush()
	}
	return w.flushIfCaughtUp()
}

// flushDrops hands the buffered drops to the drop writer; flush has
// published their slots.
func (w *Worker) flushDrops() error {
	ds := &w.drops
	if len(ds.buf) == 0 {
		return nil
	}
	if err := w.d.Drops.Writer.WriteMessages(context.Background(), ds.buf...); err != nil {
		w.acks.fail(ds.buf[0].WriterData.(*ackSlot).offset, fmt.Errorf("queue %d drops: %w", len(ds.buf), err))
		return w.acks.failed()
	}
	clear(ds.buf)
	clear(ds.hdrs) // no references to values kept for the GC
	ds.buf, ds.hdrs, ds.texts = ds.buf[:0], ds.hdrs[:0], ds.texts[:0]
	return nil
}

// suppressed reports (once) whether the drop of input offset off is
// already in the drop topic.
func (ds *dropState) suppressed(off int64) bool {
	if off >= ds.suppressTo {
		ds.suppress = nil
		return false
	}
	if _, ok := ds.suppress[off]; ok {
		delete(ds.suppress, off)
		return true
	}
	return false
}

// logDropRefused logs a drop the drop topic cannot take, at most one line
// per refuseLogEvery, as refused outputs are.
func (w *Worker) logDropRefused(m *kafka.Message, size int64) {
	ds := &w.drops
	now := time.Now()
	if now.Sub(ds.refused.loggedAt) < refuseLogEvery {
		ds.refused.unlogged++
		return
	}
	lim := w.d.Drops.Limit
	args := []any{"offset", m.Offset, "bytes", size, "limit", lim.Bytes, "setting", lim.Setting, "dropped_topic", w.d.Drops.Topic}
	if lim.KeyRequired != "" && m.Key == nil {
		args = append(args, "key_required", lim.KeyRequired)
	}
	if ds.refused.unlogged > 0 {
		args = append(args, "refused_unlogged", ds.refused.unlogged)
	}
	w.log.Warn("duplicate not written to the drop topic: it cannot take the record", args...)
	ds.refused = refusals{loggedAt: now}
}

// held names the generation of pair g that held a duplicate's key, with
// its window.
func heldIn(p *rotation.Pair, g rotation.Generation) (gen []byte, start, end time.Time) {
	start, end = p.GenerationWindow(g)
	return dropGens[g], start, end
}

// dropHeaders are the drop headers of the drops of one generation and
// window, and their encoded size: the same for every such drop, so they
// are made once, not per drop.
type dropHeaders struct {
	hdrs [4]kafka.Header
	size int64
}

// dropHeaderSets caches the drop headers of the last few generations and
// windows the drops named. The value slices are never written after they
// are made; drop copies the headers into the drop state.
type dropHeaderSets struct {
	at   [4]dropHeadersKey
	sets [4]dropHeaders
	n    int // entries used, up to len(at)
	next int // the entry replaced next once all are used
}

type dropHeadersKey struct {
	gen        *byte // the generation's value (dropGens, dropGenLegacy: never empty)
	start, end int64
}

func (c *dropHeaderSets) of(gen []byte, start, end time.Time) *dropHeaders {
	k := dropHeadersKey{&gen[0], start.UnixNano(), end.UnixNano()}
	for i := range c.n {
		if c.at[i] == k {
			return &c.sets[i]
		}
	}
	i := c.n
	if c.n < len(c.at) {
		c.n++
	} else {
		i, c.next = c.next, (c.next+1)%len(c.at)
	}
	c.at[i] = k
	h := &c.sets[i]
	h.hdrs = [4]kafka.Header{{Key: HeaderDropReason, Value: dropReason}, {Key: HeaderDropGeneration, Value: gen},
		{Key: HeaderDropWindowStart, Value: []byte(start.UTC().Format(time.RFC3339Nano))},
		{Key: HeaderDropWindowEnd, Value: []byte(end.UTC().Format(time.RFC3339Nano))}}
	h.size = 0
	for _, hd := range h.hdrs {
		h.size += headerSize(hd.Key, len(hd.Value))
	}
	return h
}

// readDropMark adds the drop topic's end offsets and partition count to
// m (outputMark), read now.
func (d *Deps) readDropMark(ctx context.Context, m *outputMark) error {
	if d.Drops == nil {
		return nil
	}
	ends, err := d.Offsets.DroppedEnds(ctx)
	if err != nil {
		return fmt.Errorf("read drop topic end offsets: %w", err)
	}
	m.dropped, m.droppedParts = ends, d.Drops.Route.OutputPartitions()
	return nil
}

// droppedMeta records mark's drop topic end offsets in m.
func (c *checkpointer) droppedMeta(m *checkpoint.Meta, mark outputMark) {
	if c.d.Drops == nil || mark.dropped == nil {
		return
	}
	m.DroppedTopic, m.DroppedEnds, m.DroppedPartitions = c.d.Drops.Topic, mark.dropped, mark.droppedParts
}

// droppedMark is where the drop topic's replay scan of a restore from
// meta starts, nil when meta recorded none of this drop topic (taken
// without it, or with another).
func (d *Deps) droppedMark(meta checkpoint.Meta) (ends map[int]int64, parts int) {
	if d.Drops == nil || meta.DroppedTopic != d.Drops.Topic {
		return nil, 0
	}
	return meta.DroppedEnds, meta.DroppedPartitions
}

// scanDrops reads the drop topic from where meta recorded its ends and
// returns the input offsets at or after meta.Offset whose drop landed:
// what the replay must not write again. Without recorded ends it returns
// nothing (Start then anchors the partition before its first drop).
func (w *Worker) scanDrops(ctx context.Context, meta checkpoint.Meta) (map[int64]struct{}, int64, error) {
	d := w.d
	from, parts := d.droppedMark(meta)
	if from == nil {
		return nil, 0, nil
	}
	so := d.Scan
	so.OutputTopic = d.Drops.Topic
	so.From, so.SourceTopic, so.SourcePartition, so.MinOffset = from, d.Topic, d.Partition, meta.Offset
	so.Partitions = d.Drops.Route.ReachedSince(d.Partition, checkpoint.Meta{InputPartitions: meta.InputPartitions, OutputPartitions: parts})
	scan, err := checkpoint.ScanOutput(ctx, so)
	if err != nil {
		return nil, 0, fmt.Errorf("scan drop topic after checkpoint of %s/%d: %w", d.Topic, d.Partition, err)
	}
	d.Metrics.RestoreScanned.Add(float64(scan.Records))
	w.reportTruncated(so.OutputTopic, scan.Truncated)
	var to int64
	for off := range scan.Forwarded {
		to = max(to, off+1)
	}
	if len(scan.Forwarded) == 0 {
		return nil, 0, nil
	}
	return scan.Forwarded, to, nil
}

// reportTruncated logs and counts the partitions of topic a replay scan
// found shorter than the checkpoint recorded them.
func (w *Worker) reportTruncated(topic string, found []checkpoint.Truncation) {
	for _, tr := range found {
		if c := w.d.Metrics.OutputTruncations; c != nil {
			c.WithLabelValues(topic, strconv.Itoa(tr.Partition)).Inc()
		}
		w.log.Error("output partition truncated: records written before the checkpoint are gone "+
			"(unclean leader election, or the topic deleted and created again)",
			"topic", topic, "partition", tr.Partition, "checkpoint_end_offset", tr.Recorded, "end_offset", tr.End,
			"offsets_lost_at_least", tr.Recorded-tr.End)
	}
}
