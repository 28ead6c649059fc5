package repartition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/segmentio/kafka-go"
)

// fetcher reads one input partition for a session: a goroutine fetches
// over one connection to the partition's leader and hands each fetch's
// records over at once. kafka.Reader hands them over one by one, a
// channel operation, a clock read and a read deadline each, which hop 1
// would pay on every record before anything else.
type fetcher struct {
	fetches chan fetched
	stop    context.CancelFunc
	done    chan struct{}
	err     error // why fetches closed; read after it is closed
}

// fetched is one fetch's records and the partition's high-water mark.
type fetched struct {
	msgs []kafka.Message
	hwm  int64
}

// fetchTimeout bounds reading one fetch's answer beyond its MaxWait.
const fetchTimeout = 30 * time.Second

// skipFunc is told of input offsets from..to-1 that were deleted before
// hop 1 read them.
type skipFunc func(from, to int64)

// truncFunc is told that the input partition's log ends at end, below the
// offset expected hop 1 was to read next.
type truncFunc func(expected, end int64)

// errOutOfRange ends a session whose fetch offset left the log (deleted
// below it, or the log truncated under it): the next session's seek
// resolves it at once.
var errOutOfRange = errors.New("fetch offset out of the log's range")

// startFetcher dials the leader of o.InputTopic/part and fetches from
// offset (absolute, or kafka.FirstOffset/LastOffset) until ctx ends or a
// fetch fails; it returns the absolute offset it starts at. An offset
// below the log start moves to it and is reported to skipped; one beyond
// the log end (truncated, or the topic created again) moves to the end and
// is reported to truncated.
func startFetcher(ctx context.Context, o *Options, part int, offset int64, log *slog.Logger, skipped skipFunc, truncated truncFunc) (*fetcher, int64, error) {
	d := o.Dialer
	if d == nil {
		d = kafka.DefaultDialer
	}
	var conn *kafka.Conn
	var err error
	for _, b := range o.Brokers {
		if conn, err = d.DialLeader(ctx, "tcp", b, o.InputTopic, part); err == nil {
			break
		}
	}
	if err != nil {
		return nil, 0, fmt.Errorf("dial leader of %s/%d: %w", o.InputTopic, part, err)
	}
	start, err := seek(conn, offset, skipped, truncated)
	if err != nil {
		conn.Close()
		return nil, 0, fmt.Errorf("seek %s/%d to %d: %w", o.InputTopic, part, offset, err)
	}
	log.Debug("fetching", "offset", start)
	fctx, stop := context.WithCancel(ctx)
	f := &fetcher{fetches: make(chan fetched, 1), stop: stop, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		defer conn.Close()
		defer close(f.fetches)
		f.err = f.run(fctx, conn, o)
	}()
	// A connection blocked in a read is closed when the session ends.
	go func() {
		select {
		case <-fctx.Done():
			conn.Close()
		case <-f.done:
		}
	}()
	return f, start, nil
}

// seek places conn at offset, resolved against the log's bounds.
func seek(conn *kafka.Conn, offset int64, skipped skipFunc, truncated truncFunc) (int64, error) {
	if err := conn.SetDeadline(time.Now().Add(fetchTimeout)); err != nil {
		return 0, err
	}
	defer conn.SetDeadline(time.Time{})
	first, last, err := conn.ReadOffsets()
	if err != nil {
		return 0, fmt.Errorf("read log bounds: %w", err)
	}
	switch {
	case offset == kafka.FirstOffset:
		offset = first
	case offset == kafka.LastOffset:
		offset = last
	case offset < first:
		skipped(offset, first)
		offset = first
	case offset > last:
		// Waiting for the log to pass the offset would leave what is
		// written below it unread: go on from the end, and say so.
		truncated(offset, last)
		offset = last
	}
	_, err = conn.Seek(offset, kafka.SeekAbsolute)
	return offset, err
}

// run fetches until ctx ends (nil) or a fetch fails.
func (f *fetcher) run(ctx context.Context, conn *kafka.Conn, o *Options) error {
	for ctx.Err() == nil {
		if err := conn.SetReadDeadline(time.Now().Add(o.FetchMaxWait + fetchTimeout)); err != nil {
			return err
		}
		b := conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: o.FetchMaxBytes, MaxWait: o.FetchMaxWait})
		got := fetched{hwm: b.HighWaterMark()}
		for {
			m, err := b.ReadMessage()
			if err != nil {
				break
			}
			got.msgs = append(got.msgs, m)
		}
		if err := b.Close(); err != nil {
			switch {
			case ctx.Err() != nil:
				return nil
			case errors.Is(err, kafka.RequestTimedOut):
				// The broker's answer to a fetch that waited MaxWait
				// without records (kfake's; kafka.Reader retries it too):
				// the connection stays usable.
				continue
			case errors.Is(err, kafka.OffsetOutOfRange):
				return fmt.Errorf("%w: %w", errOutOfRange, err)
			}
			return err
		}
		if len(got.msgs) == 0 {
			continue // nothing within MaxWait
		}
		select {
		case f.fetches <- got:
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// close stops the fetches and waits for the goroutine.
func (f *fetcher) close() {
	f.stop()
	<-f.done
}

// fetchErr is why the fetches ended, nil when the session's context did.
func (f *fetcher) fetchErr() error {
	<-f.done
	if f.err != nil && !errors.Is(f.err, context.Canceled) {
		return f.err
	}
	return nil
}
