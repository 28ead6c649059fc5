package processor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/checkpoint"
	"dedup/rotation"
)

// startWorker prepares an assigned partition: restore the filter pair, find
// the start offset, open a partition-bound reader there.
//
// With a Store, the partition's newest valid snapshot decides: its pair and
// its offset (never the committed offset when the two differ), plus a scan
// of the output from the snapshot's recorded end offsets so that records
// already forwarded before a crash are not forwarded again. Without a
// usable snapshot the partition starts at the committed offset (or
// StartOffset) with empty filters.
func (p *Processor) startWorker(ctx context.Context, g *generation, a kafka.PartitionAssignment) (*worker, error) {
	topic := p.o.InputTopic
	log := p.log.With("topic", topic, "partition", a.ID, "generation", g.gen.ID)
	w := &worker{
		p:         p,
		gen:       g,
		topic:     topic,
		partition: a.ID,
		log:       log,
		pm:        p.metrics.partition(topic, a.ID),
		route:     g.route,
		flushAt:   p.flushAt,
		srcTop:    []byte(topic),
		srcPart:   []byte(strconv.Itoa(a.ID)),
		position:  -1,
		recoverAt: p.failedOffset(a.ID),
	}
	w.acks = newAckTracker(a.ID, p.inflightCap(len(g.route.parts)))

	committed := a.Offset // absolute, or kafka.FirstOffset/LastOffset when none
	start := committed
	source := checkpoint.SourceEmpty
	var anchorEnds map[int]int64 // replay-scan start of the initial checkpoint, when known
	if p.o.Store != nil {
		r, err := p.restore(ctx, w, log)
		if err != nil {
			return nil, err
		}
		if r.found {
			start = r.meta.Offset
			source = r.source
			if r.pair != nil {
				w.pair = r.pair
			} else {
				anchorEnds = r.meta.OutputEnds // the scan from there covered everything since
			}
			w.suppress, w.suppressTo, w.replayFrom = r.suppress, r.suppressTo, r.meta.OutputEnds
		}
	}
	if w.pair == nil {
		// Allocated only now, so that a restored partition never holds
		// two pairs at once.
		pair, err := rotation.New(p.o.Filter)
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
	if start < 0 {
		var err error
		if start, err = p.logicalOffset(ctx, topic, a.ID, start); err != nil {
			return nil, err
		}
	}
	p.metrics.restores.WithLabelValues(string(source)).Inc()

	w.reader = kafka.NewReader(kafka.ReaderConfig{
		Brokers:   p.o.Brokers,
		Dialer:    p.readDialer,
		Topic:     topic,
		Partition: a.ID,
		MinBytes:  p.o.FetchMinBytes,
		MaxBytes:  p.o.FetchMaxBytes,
		MaxWait:   p.o.FetchMaxWait,
		// The default 100-message queue between kafka-go's fetch goroutine
		// and FetchMessage stalls the fetcher twice per 1 MB fetch of small
		// records; a deeper queue lets it run a whole fetch ahead.
		QueueCapacity: 4096,
		// Lag comes from each record's HighWaterMark; the reader's own lag
		// poller would cost a ListOffsets round trip per interval.
		ReadLagInterval: -1,
		Logger:          nil,
		ErrorLogger:     kafkaLogger{log: log},
	})
	if err := w.reader.SetOffset(start); err != nil {
		_ = w.reader.Close()
		return nil, fmt.Errorf("seek %s/%d to %d: %w", topic, a.ID, start, err)
	}
	w.position = start
	w.hwm = start
	w.cp.init(p.o.CheckpointInterval, p.o.Store, p.spares, committed)
	if committed < 0 {
		w.cp.last = -1
	}
	if p.o.Store != nil && source == checkpoint.SourceEmpty {
		// Anchor the partition before the first record: a crash before the
		// first periodic checkpoint then restores here and its replay scan
		// starts at today's output end, so even the first outputs are never
		// forwarded twice.
		ends, err := anchorEnds, error(nil)
		if ends == nil {
			ends, err = p.outputEnds(ctx, w.route, w.partition)
		}
		if err == nil {
			err = w.finishCheckpoint(ctx, start, ends, w.pair, time.Now())
		}
		if err != nil {
			_ = w.reader.Close()
			return nil, fmt.Errorf("write initial checkpoint of %s/%d: %w", topic, a.ID, err)
		}
		w.cp.last = start
	}
	log.Info("partition assigned", "committed", committed, "start", start, "source", string(source),
		"suppress", len(w.suppress))
	return w, nil
}

type restored struct {
	found      bool
	meta       checkpoint.Meta
	source     checkpoint.Source
	pair       *rotation.Pair // nil: options changed, start empty at meta.Offset
	suppress   map[int64]struct{}
	suppressTo int64
}

// restore loads the newest valid snapshot and scans the output for records
// it forwarded after the snapshot.
//
// Filter options changed since the snapshot (DEDUP_EXPECTED_KEYS, DEDUP_FP_RATE,
// DEDUP_WINDOW or DEDUP_MODE): a filter cannot be resized, so the pair
// starts empty, but at the snapshot's offset and with the replay scan. Every
// input below that offset was already decided and forwarded, so nothing is
// forwarded twice by the restart itself; the cost is that keys seen before
// the change are forgotten, as at a window reset. (Starting at the committed
// offset instead would re-forward first occurrences between it and the
// snapshot offset.)
func (p *Processor) restore(ctx context.Context, w *worker, log *slog.Logger) (restored, error) {
	want := p.filter
	var (
		got      *rotation.Pair
		mismatch bool
	)
	meta, source, err := p.o.Store.Load(ctx, w.topic, w.partition, func(m checkpoint.Meta, r io.Reader) error {
		if m.Group != "" && m.Group != p.o.GroupID {
			return fmt.Errorf("snapshot of group %q, want %q", m.Group, p.o.GroupID)
		}
		if m.Topic != w.topic || m.Partition != w.partition {
			return fmt.Errorf("snapshot of %s/%d, want %s/%d", m.Topic, m.Partition, w.topic, w.partition)
		}
		var pr rotation.Pair
		if _, err := pr.ReadFrom(r); err != nil {
			return fmt.Errorf("decode filter pair: %w", err)
		}
		got, mismatch = &pr, pr.Options() != want
		return nil
	})
	var loadErr *checkpoint.LoadError
	switch {
	case err == nil:
	case errors.Is(err, checkpoint.ErrNotFound):
		log.Info("no checkpoint: starting with empty filters")
		return restored{}, nil
	case errors.As(err, &loadErr):
		// Every snapshot was rejected. Crash-looping would not make one
		// valid: start empty at the committed offset, loudly.
		log.Error("every checkpoint rejected: starting with empty filters at the committed offset", "err", err)
		return restored{}, nil
	default:
		return restored{}, fmt.Errorf("load checkpoint of %s/%d: %w", w.topic, w.partition, err)
	}
	r := restored{found: true, meta: meta, source: source, pair: got}
	if mismatch {
		log.Warn("checkpoint built with other filter options: starting with empty filters at its offset",
			"snapshot", fmt.Sprintf("%+v", got.Options()), "configured", fmt.Sprintf("%+v", want), "offset", meta.Offset)
		r.pair = nil
		r.source = checkpoint.SourceEmpty
	}
	began := time.Now()
	suppress, err := checkpoint.ScanOutput(ctx, checkpoint.ScanOptions{
		Brokers:         p.o.Brokers,
		Dialer:          p.o.Dialer,
		Transport:       p.scanTransport(),
		OutputTopic:     p.o.OutputTopic,
		From:            meta.OutputEnds,
		SourceTopic:     w.topic,
		SourcePartition: w.partition,
		MinOffset:       meta.Offset,
		HeaderTopic:     HeaderSourceTopic,
		HeaderPartition: HeaderSourcePartition,
		HeaderOffset:    HeaderSourceOffset,
	})
	if err != nil {
		return restored{}, fmt.Errorf("scan output after checkpoint of %s/%d: %w", w.topic, w.partition, err)
	}
	for off := range suppress {
		r.suppressTo = max(r.suppressTo, off+1)
	}
	if len(suppress) > 0 {
		r.suppress = suppress
	}
	log.Info("checkpoint restored", "source", string(r.source), "offset", meta.Offset, "seq", meta.Seq,
		"created", meta.Created, "already_forwarded", len(suppress), "scan", time.Since(began))
	return r, nil
}

// logicalOffset turns kafka.FirstOffset/LastOffset into an absolute offset,
// so that the worker knows its position before the first record.
func (p *Processor) logicalOffset(ctx context.Context, topic string, partition int, logical int64) (int64, error) {
	req := kafka.FirstOffsetOf(partition)
	if logical == kafka.LastOffset {
		req = kafka.LastOffsetOf(partition)
	}
	res, err := p.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: {req}}})
	if err != nil {
		return 0, fmt.Errorf("list offsets of %s/%d: %w", topic, partition, err)
	}
	for _, po := range res.Topics[topic] {
		if po.Partition != partition {
			continue
		}
		if po.Error != nil {
			return 0, fmt.Errorf("list offsets of %s/%d: %w", topic, partition, po.Error)
		}
		if logical == kafka.LastOffset {
			return po.LastOffset, nil
		}
		return po.FirstOffset, nil
	}
	return 0, fmt.Errorf("list offsets of %s/%d: partition missing from response", topic, partition)
}
