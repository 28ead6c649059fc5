package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/segmentio/kafka-go"
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
	return own, own
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

// readRange calls fn for every record of (topic, partition) with
// from <= offset < to, in offset order. Offsets missing from the log
// (compacted away, deleted by retention) are skipped.
func readRange(ctx context.Context, c *kafka.Client, topic string, partition int, from, to int64, fn func(*kafka.Record) error) error {
	off := from
	for off < to {
		res, err := c.Fetch(ctx, &kafka.FetchRequest{
			Topic: topic, Partition: partition, Offset: off,
			MinBytes: 1, MaxBytes: fetchMaxBytes, MaxWait: fetchMaxWait,
		})
		if err != nil {
			return fmt.Errorf("fetch %s/%d at %d: %w", topic, partition, off, err)
		}
		if res.Error != nil {
			if errors.Is(res.Error, kafka.OffsetOutOfRange) && off < res.LogStartOffset {
				off = res.LogStartOffset
				continue
			}
			return fmt.Errorf("fetch %s/%d at %d: %w", topic, partition, off, res.Error)
		}
		progressed := false
		for {
			rec, err := res.Records.ReadRecord()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("read %s/%d at %d: %w", topic, partition, off, err)
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
		if !progressed {
			// Nothing readable between off and the high watermark.
			return nil
		}
	}
	return nil
}
