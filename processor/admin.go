package processor

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/checkpoint"
	"dedup/offsets"
)

// Admin requests on the processor's client: metadata and offsets.

// outputEnds reads the end offsets of output partitions parts.
func (p *Processor) outputEnds(ctx context.Context, parts []int) (map[int]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := offsets.List(ctx, p.client, p.o.OutputTopic, parts)
	if err != nil {
		return nil, err
	}
	ends := make(map[int]int64, len(r))
	for part, o := range r {
		ends[part] = o.End
	}
	return ends, nil
}

// logicalOffset turns kafka.FirstOffset/LastOffset into an absolute offset,
// so that a partition knows its position before the first record.
func (p *Processor) logicalOffset(ctx context.Context, topic string, partition int, logical int64) (int64, error) {
	r, err := offsets.List(ctx, p.client, topic, []int{partition})
	if err != nil {
		return 0, err
	}
	if logical == kafka.LastOffset {
		return r[partition].End, nil
	}
	return r[partition].First, nil
}

// partitionCounts reads how many partitions the input and output topics
// have; routing depends on whether they match.
func (p *Processor) partitionCounts(ctx context.Context) (in, out int, err error) {
	res, err := p.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{p.o.InputTopic, p.o.OutputTopic}})
	if err != nil {
		return 0, 0, fmt.Errorf("read metadata: %w", err)
	}
	for _, t := range res.Topics {
		if t.Error != nil {
			return 0, 0, fmt.Errorf("read metadata of %s: %w", t.Name, t.Error)
		}
		switch t.Name {
		case p.o.InputTopic:
			in = len(t.Partitions)
		case p.o.OutputTopic:
			out = len(t.Partitions)
		}
	}
	if in == 0 || out == 0 {
		return 0, 0, fmt.Errorf("read metadata: %s has %d partitions, %s has %d", p.o.InputTopic, in, p.o.OutputTopic, out)
	}
	return in, out, nil
}

// scanOptions is the replay scan's configuration, without the source
// partition and range: the admin connections when a transport is
// configured, else none (the scan then builds one from the Dialer, which
// carries TLS/SASL in that case).
func (p *Processor) scanOptions() checkpoint.ScanOptions {
	o := checkpoint.ScanOptions{
		Brokers:         p.o.Brokers,
		Dialer:          p.o.Dialer,
		OutputTopic:     p.o.OutputTopic,
		HeaderTopic:     HeaderSourceTopic,
		HeaderPartition: HeaderSourcePartition,
		HeaderOffset:    HeaderSourceOffset,
	}
	if p.o.Transport != nil {
		o.Transport = p.adminRT
	}
	return o
}
