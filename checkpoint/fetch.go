package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/internal/leader"
)

const (
	fetchMaxBytes = 8 << 20
	fetchMaxWait  = 250 * time.Millisecond
)

// transportFor returns t, or a transport with the dialer's TLS and SASL
// settings, so that callers configured with either get the same security.
func transportFor(t kafka.RoundTripper, d *kafka.Dialer) (rt kafka.RoundTripper, own *kafka.Transport) {
	if t != nil {
		return t, nil
	}
	own = &kafka.Transport{}
	if d != nil {
		own.TLS, own.SASL, own.ClientID = d.TLS, d.SASLMechanism, d.ClientID
		if d.Timeout > 0 {
			own.DialTimeout = d.Timeout
		}
	}
	return leader.Follow(own), own
}

// partitionIDs returns the partitions of topic, or an error wrapping
// kafka.UnknownTopicOrPartition when it does not exist.
func partitionIDs(ctx context.Context, c *kafka.Client, topic string) ([]int, error) {
	res, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("read metadata of %s: %w", topic, err)
	}
	for _, t := range res.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return nil, fmt.Errorf("read metadata of %s: %w", topic, t.Error)
		}
		if len(t.Partitions) == 0 {
			return nil, fmt.Errorf("read metadata of %s: %w", topic, kafka.UnknownTopicOrPartition)
		}
		ids := make([]int, len(t.Partitions))
		for i, p := range t.Partitions {
			ids[i] = p.ID
		}
		return ids, nil
	}
	return nil, fmt.Errorf("read metadata of %s: %w", topic, kafka.UnknownTopicOrPartition)
}

// defaultPatience bounds how long a read keeps retrying fetches that bring
// nothing (empty or throttled answers, a leader moving) before it fails.
const defaultPatience = 30 * time.Second

// readRange calls fn for every record of (topic, partition) with
// from <= offset < to, in offset order. to is an end offset read before the
// call, so every offset below it exists or existed: an answer with nothing
// in it (a throttled or empty fetch, a leader change) is not the end of the
// data, and readRange fetches again, with a growing pause, until it reaches
// to. Offsets deleted by retention are skipped (the read moves to the log
// start offset). When to cannot be reached within patience (0: the
// default), readRange returns a *ReadError saying how far it got; errors
// returned by fn are returned as they are.
func readRange(ctx context.Context, c *kafka.Client, topic string, partition int, from, to int64, patience time.Duration, fn func(*kafka.Record) error) error {
	return readRangeMax(ctx, c, topic, partition, from, to, patience, fetchMaxBytes, fn)
}

// readRangeMax is readRange with fetches of at most maxBytes (a broker
// still answers with a whole first batch beyond it): a read of a few small
// records does not bring megabytes of the records after them.
func readRangeMax(ctx context.Context, c *kafka.Client, topic string, partition int, from, to int64, patience time.Duration, maxBytes int, fn func(*kafka.Record) error) error {
	if patience <= 0 {
		patience = defaultPatience
	}
	off := from
	var (
		stalled time.Time // since when no fetch has made progress; zero while progressing
		pause   time.Duration
		last    error // why the latest fetch brought nothing
	)
	fail := func(err error) error {
		return &ReadError{Topic: topic, Partition: partition, Reached: off, Target: to, Err: err}
	}
	for off < to {
		res, err := c.Fetch(ctx, &kafka.FetchRequest{
			Topic: topic, Partition: partition, Offset: off,
			MinBytes: 1, MaxBytes: int64(maxBytes), MaxWait: fetchMaxWait,
		})
		progressed := false
		switch {
		case err != nil:
			last = err
		case res.Error != nil:
			last = res.Error
			var kerr kafka.Error
			switch {
			case errors.Is(res.Error, kafka.OffsetOutOfRange) && off < res.LogStartOffset:
				off, progressed = min(res.LogStartOffset, to), true
			case errors.As(res.Error, &kerr) && !kerr.Temporary() && !errors.Is(res.Error, kafka.OffsetOutOfRange):
				return fail(res.Error) // authorization, unknown topic, ...: waiting will not help
			}
		default:
			last = errEmptyFetch
			if res.Throttle > 0 {
				last = fmt.Errorf("%w (throttled %v)", errEmptyFetch, res.Throttle)
			}
			for {
				rec, err := res.Records.ReadRecord()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return fail(fmt.Errorf("read record: %w", err))
				}
				if rec.Offset < off {
					continue // a fetch answers with whole batches
				}
				if rec.Offset >= to {
					return nil
				}
				if err := fn(rec); err != nil {
					return err
				}
				off, progressed = rec.Offset+1, true
			}
		}
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		if progressed {
			stalled, pause = time.Time{}, 0
			continue
		}
		now := time.Now()
		if stalled.IsZero() {
			stalled = now
		}
		if now.Sub(stalled) >= patience {
			return fail(fmt.Errorf("no progress for %v: %w", now.Sub(stalled).Round(time.Millisecond), last))
		}
		pause = min(max(2*pause, 10*time.Millisecond), 500*time.Millisecond)
		if res != nil && res.Throttle > pause {
			pause = res.Throttle
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fail(ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// errEmptyFetch is why a read waits: the broker answered with no records
// below the offset the read must reach.
var errEmptyFetch = errors.New("fetch returned no records")
