package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"
)

// decider is one partition's deduplication state in a kafka-go loop
// contender. Owned by one goroutine.
type decider interface {
	// seen reports whether key, in a record of time ts, was seen before,
	// and records it.
	seen(key []byte, ts time.Time) bool
}

// state describes a contender's deciders once the input is consumed.
type state interface {
	decider(partition int) decider
	// bytes returns the memory the state takes and how that was found.
	bytes() (int64, string)
}

// Header names the loop contenders add to every forwarded record, matching
// the stage's, so that every contender writes the same output bytes.
const (
	headerSourceTopic     = "dedup-source-topic"
	headerSourcePartition = "dedup-source-partition"
	headerSourceOffset    = "dedup-source-offset"
)

// Writer settings shared by every kafka-go contender (the stage's defaults
// from the configuration table).
const (
	batchSize    = 1000
	batchBytes   = 1 << 20
	batchTimeout = 5 * time.Millisecond
	fetchMaxByte = 10 << 20
	fetchMaxWait = 250 * time.Millisecond
	// readerQueue is the reader's message queue, as the stage sets it.
	readerQueue = 4096
)

// inFlightPerPartition bounds the records of one input partition handed to
// the asynchronous writer and not yet acknowledged, as the stage bounds them
// (processor's inflightCap), so that a fast reader cannot buffer the input in
// memory and every contender holds as much in flight.
func inFlightPerPartition(outputPartitions int) int {
	return min(1<<18, max(8192, 2*batchSize*max(1, outputPartitions)))
}

// runLoop is the kafka-go consume→produce loop the copy, exact-set and
// library-filter contenders share: one reader and one goroutine per input
// partition, one asynchronous writer routing each record to the output
// partition of the same number. It uses the stage's kafka-go settings (a
// deep reader queue, no lag polling, outputs handed to the writer in slices
// of up to a batch, flushed early when caught up with the partition's end),
// so that what differs between contenders is the deduplication itself.
func runLoop(ctx context.Context, s Spec, rep *reporter, newState func(Spec) state) (Result, error) {
	st := newState(s)
	var (
		in, out   atomic.Uint64
		firstRead atomic.Int64 // unix nanoseconds
		lastAck   atomic.Int64
		errMu     sync.Mutex
		writeErr  error
	)
	window := semaphore.NewWeighted(int64(inFlightPerPartition(len(s.Ends)) * len(s.Ends)))
	w := &kafka.Writer{
		Addr:         kafka.TCP(s.Brokers...),
		Topic:        s.OutputTopic,
		Balancer:     kafka.BalancerFunc(func(m kafka.Message, _ ...int) int { return m.Partition }),
		BatchSize:    batchSize,
		BatchBytes:   batchBytes,
		BatchTimeout: batchTimeout,
		RequiredAcks: kafka.RequireAll,
		Async:        true,
		Completion: func(msgs []kafka.Message, err error) {
			if err != nil {
				errMu.Lock()
				writeErr = errors.Join(writeErr, err)
				errMu.Unlock()
			} else {
				out.Add(uint64(len(msgs)))
				lastAck.Store(time.Now().UnixNano())
			}
			window.Release(int64(len(msgs)))
		},
	}

	pctx, stopProgress := context.WithCancel(ctx)
	defer stopProgress()
	go rep.reportProgress(pctx, progressInterval, in.Load)

	g, gctx := errgroup.WithContext(ctx)
	for p, end := range s.Ends {
		if end == 0 {
			continue
		}
		d := st.decider(p)
		g.Go(func() error {
			r := kafka.NewReader(kafka.ReaderConfig{
				Brokers:         s.Brokers,
				Topic:           s.InputTopic,
				Partition:       p,
				MinBytes:        1,
				MaxBytes:        fetchMaxByte,
				MaxWait:         fetchMaxWait,
				QueueCapacity:   readerQueue,
				ReadLagInterval: -1,
			})
			defer r.Close()
			partition := []byte(strconv.Itoa(p))
			topic := []byte(s.InputTopic)
			buf := make([]kafka.Message, 0, batchSize)
			flush := func() error {
				if len(buf) == 0 {
					return nil
				}
				if err := window.Acquire(gctx, int64(len(buf))); err != nil {
					return err
				}
				if err := w.WriteMessages(gctx, buf...); err != nil {
					return fmt.Errorf("write: %w", err)
				}
				clear(buf)
				buf = buf[:0]
				return nil
			}
			for {
				m, err := r.FetchMessage(gctx)
				if err != nil {
					return fmt.Errorf("fetch partition %d: %w", p, err)
				}
				firstRead.CompareAndSwap(0, time.Now().UnixNano())
				if !d.seen(m.Key, m.Time) {
					buf = append(buf, kafka.Message{
						Key:       m.Key,
						Value:     m.Value,
						Time:      m.Time,
						Partition: p,
						Headers: append(m.Headers,
							kafka.Header{Key: headerSourceTopic, Value: topic},
							kafka.Header{Key: headerSourcePartition, Value: partition},
							kafka.Header{Key: headerSourceOffset, Value: strconv.AppendInt(nil, m.Offset, 10)},
						),
					})
				}
				in.Add(1)
				done := m.Offset+1 >= end
				if len(buf) == cap(buf) || m.Offset+1 >= m.HighWaterMark || done {
					if err := flush(); err != nil {
						return err
					}
				}
				if done {
					return nil
				}
			}
		})
	}
	runErr := g.Wait()
	closeErr := w.Close() // flushes and waits for every completion
	if err := errors.Join(runErr, closeErr, writeErr); err != nil {
		return Result{}, err
	}
	stopProgress()
	res := Result{In: in.Load(), Out: out.Load()}
	if f, l := firstRead.Load(), lastAck.Load(); f != 0 && l > f {
		res.Elapsed = time.Duration(l - f)
	}
	res.StateBytes, res.StateHow = st.bytes()
	return res, nil
}
