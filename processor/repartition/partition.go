package repartition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

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

	acked     int64 // next input offset to send: everything below is acknowledged (-1: none yet)
	committed int64
	topic     []byte
	partText  []byte
	countText []byte // parts, as the dedup-origin-partitions header says it
}

// tick bounds how long the worker waits for a first record before it
// looks at its generation and its commit schedule again.
const tick = 100 * time.Millisecond

// run is the partition's life in the generation: send batches, commit
// what is acknowledged, and after a failed batch start again from the
// first record not acknowledged, until the generation ends.
func (w *worker) run(ctx context.Context) {
	w.acked, w.committed = -1, w.start
	w.topic, w.partText = []byte(w.o.InputTopic), []byte(strconv.Itoa(w.part))
	backoff := w.o.RetryBackoff
	for _, c := range []*prometheus.CounterVec{w.o.Metrics.Rekeyed, w.o.Metrics.Restarts} {
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
// (nil) or a batch fails. Its reader and its produce connections are its
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
	w.parts, w.countText = n, []byte(strconv.Itoa(n))
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: w.o.Brokers,
		// The stage's readers' dialer: deadlines set per record are
		// coalesced instead of each costing a system call.
		Dialer:          cluster.CoalescingDialer(w.o.Dialer, cluster.ReadDeadlineSlack(w.o.FetchMaxWait)),
		Topic:           w.o.InputTopic,
		Partition:       w.part,
		MaxBytes:        w.o.FetchMaxBytes,
		MaxWait:         w.o.FetchMaxWait,
		QueueCapacity:   2 * w.o.BatchSize, // a batch in hand, the next one fetched
		ReadLagInterval: -1,
		ErrorLogger:     cluster.Logger{Log: w.log.With("component", "reader")},
	})
	defer r.Close()
	if err := r.SetOffset(w.resumeAt()); err != nil {
		return fmt.Errorf("seek %s/%d to %d: %w", w.o.InputTopic, w.part, w.resumeAt(), err)
	}
	batch := make([]kafka.Message, 0, w.o.BatchSize)
	var hwm int64
	lastCommit := time.Now()
	for {
		batch = batch[:0]
		fctx, cancel := context.WithTimeout(ctx, tick)
		for len(batch) < w.o.BatchSize {
			m, err := r.FetchMessage(fctx)
			if err != nil {
				if ctx.Err() == nil && fctx.Err() == nil {
					cancel()
					return fmt.Errorf("fetch %s/%d: %w", w.o.InputTopic, w.part, err)
				}
				break
			}
			batch = append(batch, m)
			hwm = m.HighWaterMark
			if m.Offset+1 >= m.HighWaterMark {
				break // caught up: send what there is
			}
		}
		cancel()
		if len(batch) > 0 {
			if w.acked < 0 {
				// The first record read: a restart after a failed batch
				// reads from here, not from a logical start offset (the
				// log's end by then, with KAFKA_START_OFFSET=latest).
				w.acked = batch[0].Offset
			}
			if err := w.send(client, batch); err != nil {
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

// send writes batch to the repartition topic, one produce request per
// repartition partition it reaches, all at once, and waits for every
// answer. Nothing is retried here: any error fails the batch.
func (w *worker) send(client *kafka.Client, batch []kafka.Message) error {
	byPart := map[int][]kafka.Record{}
	var murmur kafka.Murmur2Balancer
	all := make([]int, w.parts)
	for i := range all {
		all[i] = i
	}
	for i := range batch {
		m := &batch[i]
		dk, keyed := w.o.Key.Extract(m)
		hs := make([]kafka.Header, 0, len(m.Headers)+5)
		hs = append(hs, m.Headers...)
		hs = append(hs,
			kafka.Header{Key: partition.HeaderOriginTopic, Value: w.topic},
			kafka.Header{Key: partition.HeaderOriginPartition, Value: w.partText},
			kafka.Header{Key: partition.HeaderOriginOffset, Value: strconv.AppendInt(nil, m.Offset, 10)},
			kafka.Header{Key: partition.HeaderOriginPartitions, Value: w.countText},
		)
		if m.Key != nil {
			hs = append(hs, kafka.Header{Key: partition.HeaderOriginKey, Value: m.Key})
		}
		ts := m.Time
		if ts.IsZero() {
			ts = noTimestamp
		}
		rec := kafka.Record{Time: ts, Value: kafka.NewBytes(m.Value), Headers: hs}
		p := w.part % w.parts
		if keyed {
			rec.Key = kafka.NewBytes(dk)
			p = murmur.Balance(kafka.Message{Key: dk}, all...)
		}
		byPart[p] = append(byPart[p], rec)
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for p, recs := range byPart {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := produce(client, w.o.Topic, p, recs)
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// produce sends one request and checks its answer.
func produce(client *kafka.Client, topic string, p int, recs []kafka.Record) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := client.Produce(ctx, &kafka.ProduceRequest{
		Topic:        topic,
		Partition:    p,
		RequiredAcks: kafka.RequireAll,
		Records:      kafka.NewRecordReader(recs...),
	})
	if err != nil {
		return fmt.Errorf("produce %d records to %s/%d: %w", len(recs), topic, p, err)
	}
	if res.Error != nil {
		return fmt.Errorf("produce %d records to %s/%d: %w", len(recs), topic, p, res.Error)
	}
	for i, e := range res.RecordErrors {
		return fmt.Errorf("produce %d records to %s/%d: record %d: %w", len(recs), topic, p, i, e)
	}
	return nil
}
