// Package copyloop is the plain kafka-go consume→produce loop the
// benchmarks measure the stage against: one partition-bound reader and one
// goroutine per input partition, one asynchronous writer, each record
// written to the output partition of the same number. It is the reference
// of the processor's stage-versus-copy benchmark and the body of every
// loop contender of dedup-bench (with a decider per partition for the
// exact set and the other filter libraries).
//
// It uses the stage's kafka-go settings as the caller gives them (a deep
// reader queue, no lag polling, outputs handed to the writer in slices of up
// to a batch, flushed early when caught up with the partition's end), so
// that what differs between the loop and the stage is what the stage does
// beyond copying.
package copyloop

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

// Options configure one run of the loop. The input and output topics must
// have the same partition count.
type Options struct {
	Brokers     []string
	InputTopic  string
	OutputTopic string
	// Ends holds, per input partition, the offset at which the loop has read
	// the partition: Run returns once every partition reached its end. A
	// partition whose end is 0 is not read.
	Ends []int64

	// Dialer is the readers' dialer and Transport the writer's; nil takes
	// kafka-go's defaults (for the writer, a kafka.Transport of its own,
	// closed when Run returns).
	Dialer    *kafka.Dialer
	Transport kafka.RoundTripper

	// Reader settings.
	FetchMinBytes int
	FetchMaxBytes int
	FetchMaxWait  time.Duration
	QueueCapacity int

	// Writer settings: BatchSize is also the most records handed to the
	// writer in one WriteMessages call.
	BatchSize    int
	BatchBytes   int64
	BatchTimeout time.Duration
	MaxAttempts  int
	Compression  kafka.Compression // zero: none

	// MaxInFlight bounds the records handed to the writer and not yet
	// acknowledged, over all partitions; 0 sets no bound.
	MaxInFlight int

	// SourceHeaders, when set, names the three headers each output gains:
	// the source topic, partition and offset, as the stage adds them.
	SourceHeaders *SourceHeaders

	// Seen, when set, returns one partition's decider, called by that
	// partition's goroutine alone: a record whose key it reports seen is
	// not written. Nil forwards every record.
	Seen func(partition int) func(key []byte, ts time.Time) bool

	// Read, when set, is called once per record read.
	Read func()
}

// SourceHeaders are the names of the headers that identify an output's
// input record.
type SourceHeaders struct{ Topic, Partition, Offset string }

// Result is what a run did.
type Result struct {
	In, Out uint64
	// FirstRead is when the first record was read, LastAck when the last
	// output was acknowledged.
	FirstRead, LastAck time.Time
}

// Run copies the input to the output until every partition reached its end
// and every output is acknowledged, or ctx ends.
func Run(ctx context.Context, o Options) (Result, error) {
	var (
		in, out   atomic.Uint64
		firstRead atomic.Int64 // unix nanoseconds
		lastAck   atomic.Int64
		errMu     sync.Mutex
		writeErr  error
	)
	var window *semaphore.Weighted
	if o.MaxInFlight > 0 {
		window = semaphore.NewWeighted(int64(o.MaxInFlight))
	}
	rt := o.Transport
	if rt == nil {
		// Not kafka.DefaultTransport: its pools would outlive the run and
		// go on dialing the brokers.
		own := &kafka.Transport{}
		defer own.CloseIdleConnections()
		rt = own
	}
	w := &kafka.Writer{
		Addr:         kafka.TCP(o.Brokers...),
		Topic:        o.OutputTopic,
		Balancer:     kafka.BalancerFunc(func(m kafka.Message, _ ...int) int { return m.Partition }),
		BatchSize:    o.BatchSize,
		BatchBytes:   o.BatchBytes,
		BatchTimeout: o.BatchTimeout,
		MaxAttempts:  o.MaxAttempts,
		Compression:  o.Compression,
		RequiredAcks: kafka.RequireAll,
		Async:        true,
		Transport:    rt,
		Completion: func(msgs []kafka.Message, err error) {
			if err != nil {
				errMu.Lock()
				writeErr = errors.Join(writeErr, err)
				errMu.Unlock()
			} else {
				out.Add(uint64(len(msgs)))
				lastAck.Store(time.Now().UnixNano())
			}
			if window != nil {
				window.Release(int64(len(msgs)))
			}
		},
	}

	g, gctx := errgroup.WithContext(ctx)
	for p, end := range o.Ends {
		if end == 0 {
			continue
		}
		var seen func([]byte, time.Time) bool
		if o.Seen != nil {
			seen = o.Seen(p)
		}
		g.Go(func() error {
			r := kafka.NewReader(kafka.ReaderConfig{
				Brokers:         o.Brokers,
				Dialer:          o.Dialer,
				Topic:           o.InputTopic,
				Partition:       p,
				MinBytes:        o.FetchMinBytes,
				MaxBytes:        o.FetchMaxBytes,
				MaxWait:         o.FetchMaxWait,
				QueueCapacity:   o.QueueCapacity,
				ReadLagInterval: -1,
			})
			defer r.Close()
			if err := r.SetOffset(kafka.FirstOffset); err != nil {
				return fmt.Errorf("seek partition %d: %w", p, err)
			}
			topic, partition := []byte(o.InputTopic), []byte(strconv.Itoa(p))
			buf := make([]kafka.Message, 0, max(1, o.BatchSize))
			flush := func() error {
				if len(buf) == 0 {
					return nil
				}
				if window != nil {
					if err := window.Acquire(gctx, int64(len(buf))); err != nil {
						return err
					}
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
				if seen == nil || !seen(m.Key, m.Time) {
					h := m.Headers
					if sh := o.SourceHeaders; sh != nil {
						h = append(make([]kafka.Header, 0, len(m.Headers)+3), m.Headers...)
						h = append(h,
							kafka.Header{Key: sh.Topic, Value: topic},
							kafka.Header{Key: sh.Partition, Value: partition},
							kafka.Header{Key: sh.Offset, Value: strconv.AppendInt(nil, m.Offset, 10)})
					}
					buf = append(buf, kafka.Message{Key: m.Key, Value: m.Value, Headers: h, Time: m.Time, Partition: p})
				}
				in.Add(1)
				if o.Read != nil {
					o.Read()
				}
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
	errMu.Lock()
	err := errors.Join(runErr, closeErr, writeErr)
	errMu.Unlock()
	if err != nil {
		return Result{}, err
	}
	res := Result{In: in.Load(), Out: out.Load()}
	if f := firstRead.Load(); f != 0 {
		res.FirstRead = time.Unix(0, f)
	}
	if l := lastAck.Load(); l != 0 {
		res.LastAck = time.Unix(0, l)
	}
	return res, nil
}
