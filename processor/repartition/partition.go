package repartition

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"dedup/key"
	"dedup/processor/cluster"
	"dedup/processor/partition"
)

// worker is one input partition of hop 1 for one generation.
type worker struct {
	o     *Options
	gen   *kafka.Generation
	part  int
	start int64 // committed offset, or kafka.FirstOffset/LastOffset
	parts int   // repartition partitions, read at the start of each session
	log   *slog.Logger
	// truncated checks the base offsets of the partition's acknowledged
	// produces (nil: not checked).
	truncated *cluster.Truncations

	acked     int64 // next input offset to send: everything below is acknowledged (-1: none yet)
	committed int64
	partText  []byte
	// resetFrom is where the input partition's new log is read from
	// after the session's seek found it truncated, until hop 1 has the
	// reset records acknowledged (-1: none due).
	resetFrom int64
}

// tick bounds how long the worker waits for a first record before it
// looks at its generation and its commit schedule again.
const tick = 100 * time.Millisecond

// run is the partition's life in the generation: send batches, commit
// what is acknowledged, and after a failed batch start again from the
// first record not acknowledged, until the generation ends.
func (w *worker) run(ctx context.Context) {
	w.acked, w.committed, w.resetFrom = -1, w.start, -1
	w.partText = []byte(strconv.Itoa(w.part))
	backoff := w.o.RetryBackoff
	for _, c := range []*prometheus.CounterVec{w.o.Metrics.Rekeyed, w.o.Metrics.Restarts, w.o.Metrics.InputTruncations} {
		if c != nil {
			c.WithLabelValues(w.o.InputTopic, string(w.partText)) // exposed from the assignment on
		}
	}
	if w.o.Metrics.Lag != nil {
		// The partition's lag is shown by its owner only, from the
		// assignment (0 until its first batch).
		w.o.Metrics.Lag.WithLabelValues(w.o.InputTopic, string(w.partText))
		defer w.o.Metrics.Lag.DeleteLabelValues(w.o.InputTopic, string(w.partText))
	}
	defer w.o.Status.ok(w.part) // no longer this member's to report
	for ctx.Err() == nil {
		err := w.session(ctx)
		w.commit(true)
		if err == nil || ctx.Err() != nil {
			return
		}
		if errors.Is(err, errOutOfRange) {
			// Not a failed batch: the next session's seek finds where
			// the log is now and names the skip or the truncation.
			w.log.Debug("fetch offset out of range: seeking again", "from", w.resumeAt(), "err", err)
			continue
		}
		w.o.Status.failed(w.part, err)
		if w.o.Metrics.Restarts != nil {
			w.o.Metrics.Restarts.WithLabelValues(w.o.InputTopic, string(w.partText)).Inc()
		}
		w.log.Warn("repartition batch failed: sending again from the first record not acknowledged",
			"from", w.resumeAt(), "err", err, "backoff", backoff)
		cluster.Sleep(ctx, cluster.Jitter(backoff))
		backoff = min(2*backoff, 5*time.Second)
	}
}

// resumeAt is where a session starts reading.
func (w *worker) resumeAt() int64 {
	if w.acked >= 0 {
		return w.acked
	}
	return w.start
}

// session reads from resumeAt and sends batch after batch until ctx ends
// (nil) or a batch fails. Its fetcher and its produce connections are its
// own: a failed batch's connections are gone before anything is sent
// again, so no request of it is still on its way to the broker behind
// the re-sends.
func (w *worker) session(ctx context.Context) error {
	rt := cluster.NewTransport(w.o.Transport)
	defer rt.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(w.o.Brokers...), Transport: rt, Timeout: 30 * time.Second}
	// The routing of this session: partitions added to the repartition
	// topic count from the next session on (a generation, or a restart
	// after a failed batch); hop 2 keeps its marks per count.
	n, err := partitionCount(ctx, client, w.o.Topic)
	if err != nil {
		return err
	}
	w.parts = n
	f, start, err := startFetcher(ctx, w.o, w.part, w.resumeAt(), w.log, w.skipped, w.truncatedInput)
	if err != nil {
		return err
	}
	defer f.close()
	if w.resetFrom >= 0 {
		// Before anything of the new log is sent, and before the new
		// position is acknowledged (so that a failure or a crash before
		// they land finds the truncation again and sends them again).
		if err := w.sendResets(client, start); err != nil {
			return err
		}
		w.resetFrom = -1
		w.acked = start
		w.commit(true) // at once: a log that grows past the old offsets would hide the truncation
	}
	// Where this session starts is acknowledged as far as hop 1 goes: a
	// logical start (KAFKA_START_OFFSET) is resolved once, so a session
	// started again after a failure goes on from here, not from the log's
	// end by then; and records deleted before hop 1 read them are
	// reported once.
	w.acked = start
	// A batch fills every repartition partition's request about once:
	// fewer, larger requests cost hop 1, the broker and hop 2 (which
	// reads what hop 1 appends) less per record.
	maxRecords := w.o.BatchSize * w.parts
	batch := make([]kafka.Message, 0, min(maxRecords, 4*w.o.BatchSize))
	var out sender
	var pending []kafka.Message // fetched, not yet in a batch
	var hwm int64
	lastCommit := time.Now()
	wait := time.NewTimer(tick)
	defer wait.Stop()
	for {
		batch = batch[:0]
		size := 0
		wait.Reset(tick)
	fill:
		for len(batch) < maxRecords && size < w.o.BatchBytes {
			if len(pending) == 0 {
				select {
				case got, ok := <-f.fetches:
					if !ok {
						if err := f.fetchErr(); err != nil {
							return fmt.Errorf("fetch %s/%d: %w", w.o.InputTopic, w.part, err)
						}
						return nil
					}
					pending, hwm = got.msgs, got.hwm
				case <-wait.C:
					if len(batch) == 0 {
						// Caught up with nothing to send: whatever failed
						// before this session is behind it.
						w.o.Status.ok(w.part)
					}
					break fill
				}
			}
			m := &pending[0]
			if w.o.Key.Pending(m) {
				if len(batch) > 0 {
					break // send what is decided; this record waits for its schema
				}
				if err := w.awaitKey(ctx, m); err != nil {
					return nil // the generation ended while it waited
				}
			}
			batch = append(batch, *m)
			size += messageBytes(m)
			pending = pending[1:]
			if m.Offset+1 >= hwm {
				break // caught up: send what there is
			}
		}
		if len(batch) > 0 {
			if err := w.send(ctx, &out, client, batch); err != nil {
				return err
			}
			w.acked = batch[len(batch)-1].Offset + 1
			w.o.Status.ok(w.part)
			if w.o.Metrics.Rekeyed != nil {
				w.o.Metrics.Rekeyed.WithLabelValues(w.o.InputTopic, string(w.partText)).Add(float64(len(batch)))
			}
			if w.o.Metrics.Lag != nil && hwm > 0 {
				w.o.Metrics.Lag.WithLabelValues(w.o.InputTopic, string(w.partText)).Set(float64(max(0, hwm-w.acked)))
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(lastCommit) >= w.o.CommitInterval {
			w.commit(false)
			lastCommit = time.Now()
		}
	}
}

// awaitKey waits until m's schema is known: m and the records behind it
// wait (they keep their order); other partitions go on. Logged when the
// wait starts and when it ends.
func (w *worker) awaitKey(ctx context.Context, m *kafka.Message) error {
	began := time.Now()
	w.log.Warn("record waits for its schema from the schema registry; records behind it wait too, nothing is sent unkeyed", "offset", m.Offset)
	if err := w.o.Key.Await(ctx, m); err != nil {
		return err
	}
	w.log.Info("schema known: the partition goes on", "offset", m.Offset, "waited", time.Since(began).Round(time.Millisecond))
	return nil
}

// skipped reports input offsets from..to-1 deleted (by retention or
// DeleteRecords) before hop 1 read them: never re-keyed, never forwarded.
func (w *worker) skipped(from, to int64) {
	w.log.Warn("input records deleted before the re-key hop read them: skipped, never forwarded",
		"from", from, "to", to, "skipped", to-from)
	if w.o.Metrics.Skipped != nil {
		w.o.Metrics.Skipped.WithLabelValues(w.o.InputTopic, string(w.partText)).Add(float64(to - from))
	}
}

// truncatedInput reports an input partition whose log ends at end, below
// the offset expected hop 1 was to read next: truncated (an unclean leader
// election) or the topic deleted and created again. Hop 1 reads on from
// the end; what the old log held from there up to expected, and was not
// yet re-keyed, is gone.
func (w *worker) truncatedInput(expected, end int64) {
	if w.o.Metrics.InputTruncations != nil {
		w.o.Metrics.InputTruncations.WithLabelValues(w.o.InputTopic, string(w.partText)).Inc()
	}
	w.log.Error("input truncated: the partition's log ends below the offset the re-key hop was to read next "+
		"(an unclean leader election, or the topic deleted and created again); reading from its end",
		"expected_offset", expected, "end_offset", end)
	w.resetFrom = end
}

// sendResets writes a reset record naming the input partition and from,
// where hop 1 reads its new log on, to every repartition partition and
// waits for every acknowledgement: hop 2 lowers its high-water marks of
// the partition to from-1 (partition.Origin, flag Reset), which would
// otherwise drop the new log's records, their offsets at or below the old
// log's, as re-sends. On each repartition partition the reset lands
// behind every record of the old log hop 1 sent (each batch is
// acknowledged before the next is sent, and a failed session's requests
// are gone before the next session starts) and ahead of every record of
// the new log; each partition keeps its own marks, so no order across
// partitions matters. A reset sent again (a failure or a crash before the
// new position is committed) is harmless: hop 2 only ever lowers a mark
// that is above from-1.
func (w *worker) sendResets(client *kafka.Client, from int64) error {
	o := partition.Origin{Topic: w.o.InputTopic, Partition: int32(w.part), Offset: from, Count: w.parts, Reset: true}
	trailer := o.AppendTrailer(nil, nil)
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for p := range w.parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := kafka.Record{Time: time.Now(), Value: kafka.NewBytes(trailer)}
			base, err := produce(client, w.o.Topic, p, w.o.Compression, []kafka.Record{rec})
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("send reset: %w", err))
				mu.Unlock()
				return
			}
			w.truncated.Acked(int32(p), base)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	w.log.Warn("input truncated: reset records acknowledged by every repartition partition; hop 2 takes the new log from its offset on",
		"offset", from, "repartition_partitions", w.parts)
	return nil
}

// commit commits the acknowledged position when it moved. final: at the
// end of a session, logged when it fails.
func (w *worker) commit(final bool) {
	if w.acked < 0 || w.acked == w.committed {
		return
	}
	err := w.gen.CommitOffsets(map[string]map[int]int64{w.o.InputTopic: {w.part: w.acked}})
	if err != nil {
		// The next commit (or, after a crash, hop 2's marks) covers it.
		if final {
			w.log.Warn("commit repartition offset", "offset", w.acked, "err", err)
		}
		return
	}
	w.committed = w.acked
}

// noTimestamp is Kafka's "no timestamp" as kafka-go writes it.
var noTimestamp = time.UnixMilli(-1)

// sender holds the buffers a session's batches are encoded from, reused
// batch after batch: a batch is sent only once every request of the one
// before is answered, and a session that fails takes its buffers along,
// so no request still being written can see them change.
type sender struct {
	keys     key.Arena // dedup keys built for the batch
	byPart   [][]kafka.Record
	all      []int // every repartition partition, for the balancer
	trailers []byte
	payloads []payload
}

// payload is a record's key or value as kafka.Record takes it: head, then
// tail (a value and its origin trailer), from a slice per batch rather
// than an allocation per record, written without a copy of its own.
type payload struct{ head, tail []byte }

func (p *payload) Len() int { return len(p.head) + len(p.tail) }

func (p *payload) Read(b []byte) (int, error) {
	if len(p.head) == 0 {
		p.head, p.tail = p.tail, nil
	}
	if len(p.head) == 0 {
		return 0, io.EOF
	}
	n := copy(b, p.head)
	p.head = p.head[n:]
	return n, nil
}

// WriteTo is what the encoder's io.Copy calls.
func (p *payload) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(p.head)
	if err == nil {
		var m int
		m, err = w.Write(p.tail)
		n += m
	}
	p.head, p.tail = nil, nil
	return int64(n), err
}

func (*payload) Close() error { return nil }

// send writes batch to the repartition topic, the requests of each
// repartition partition it reaches one after the other (request), the
// partitions all at once, and waits for every answer. Nothing is retried
// here: any error fails the batch.
func (w *worker) send(ctx context.Context, s *sender, client *kafka.Client, batch []kafka.Message) error {
	if len(s.all) != w.parts {
		s.all = make([]int, w.parts)
		for i := range s.all {
			s.all[i] = i
		}
		s.byPart = make([][]kafka.Record, w.parts)
	}
	for p := range s.byPart {
		clear(s.byPart[p])
		s.byPart[p] = s.byPart[p][:0]
	}
	// Sized for the whole batch before any is taken, so that it is not
	// grown and copied mid-batch: a trailer is the topic, the input key
	// and at most 52 more bytes (three numbers of 10,
	// 19 and 10 digits, four slashes and the 9-byte footer).
	nt := 0
	for i := range batch {
		nt += len(w.o.InputTopic) + 52 + len(batch[i].Key)
	}
	s.trailers = slices.Grow(s.trailers[:0], nt)
	s.payloads = slices.Grow(s.payloads[:0], 2*len(batch))[:2*len(batch)]
	var murmur kafka.Murmur2Balancer
	s.keys.Reset()
	for i := range batch {
		m := &batch[i]
		dk, st := w.o.Key.Extract(m, &s.keys)
		for st == key.Waiting { // its plan was dropped since it was awaited (rare)
			if err := w.awaitKey(ctx, m); err != nil {
				return err
			}
			dk, st = w.o.Key.Extract(m, &s.keys)
		}
		keyed := st == key.Keyed
		t := len(s.trailers)
		o := partition.Origin{Topic: w.o.InputTopic, Partition: int32(w.part), Offset: m.Offset, Count: w.parts, Key: m.Key}
		if keyed {
			o.Dedup = dk
		}
		s.trailers = o.AppendTrailer(s.trailers, m.Value)
		ts := m.Time
		if ts.IsZero() {
			ts = noTimestamp
		}
		v := &s.payloads[2*i]
		*v = payload{head: m.Value, tail: s.trailers[t:len(s.trailers):len(s.trailers)]}
		rec := kafka.Record{Time: ts, Value: v, Headers: m.Headers}
		p := w.part % w.parts
		if keyed {
			if dk != nil {
				k := &s.payloads[2*i+1]
				*k = payload{head: dk}
				rec.Key = k
			}
			p = murmur.Balance(kafka.Message{Key: dk}, s.all...)
		}
		s.byPart[p] = append(s.byPart[p], rec)
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for p, recs := range s.byPart {
		if len(recs) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A partition's requests one after the other, each once the
			// one before is acknowledged: none lands ahead of one that
			// failed.
			for len(recs) > 0 {
				n := w.request(recs)
				base, err := produce(client, w.o.Topic, p, w.o.Compression, recs[:n])
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				w.truncated.Acked(int32(p), base)
				recs = recs[n:]
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// request is how many of recs, from the first, one produce request takes:
// BatchSize records and BatchBytes at most, and at least one.
func (w *worker) request(recs []kafka.Record) int {
	size := 0
	for i := range recs {
		if i == w.o.BatchSize {
			return i
		}
		size += recordBytes(&recs[i])
		if size > w.o.BatchBytes && i > 0 {
			return i
		}
	}
	return len(recs)
}

// messageBytes is m's key, value and headers in bytes.
func messageBytes(m *kafka.Message) int {
	n := len(m.Key) + len(m.Value)
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// recordBytes is r's key, value and headers in bytes.
func recordBytes(r *kafka.Record) int {
	n := 0
	if r.Key != nil {
		n += r.Key.Len()
	}
	if r.Value != nil {
		n += r.Value.Len()
	}
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// produce sends one request and checks its answer; it returns the base
// offset the records were appended at (-1: not given).
func produce(client *kafka.Client, topic string, p int, codec kafka.Compression, recs []kafka.Record) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := client.Produce(ctx, &kafka.ProduceRequest{
		Topic:        topic,
		Partition:    p,
		RequiredAcks: kafka.RequireAll,
		Records:      kafka.NewRecordReader(recs...),
		Compression:  codec,
	})
	if err != nil {
		return 0, fmt.Errorf("produce %d records to %s/%d: %w", len(recs), topic, p, err)
	}
	if res.Error != nil {
		return 0, fmt.Errorf("produce %d records to %s/%d: %w", len(recs), topic, p, res.Error)
	}
	for i, e := range res.RecordErrors {
		return 0, fmt.Errorf("produce %d records to %s/%d: record %d: %w", len(recs), topic, p, i, e)
	}
	return res.BaseOffset, nil
}
