package offsets

import (
	"context"
	"fmt"

	"github.com/segmentio/kafka-go"
)

// Range is a partition's first offset and its end (high watermark): the
// offset the next record will get.
type Range struct{ First, End int64 }

// List asks for the first and end offsets of partitions of topic in one
// ListOffsets request.
func List(ctx context.Context, c *kafka.Client, topic string, partitions []int) (map[int]Range, error) {
	reqs := make([]kafka.OffsetRequest, 0, 2*len(partitions))
	for _, p := range partitions {
		reqs = append(reqs, kafka.FirstOffsetOf(p), kafka.LastOffsetOf(p))
	}
	res, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		return nil, fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	out := make(map[int]Range, len(partitions))
	for _, po := range res.Topics[topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("list offsets of %s/%d: %w", topic, po.Partition, po.Error)
		}
		out[po.Partition] = Range{First: po.FirstOffset, End: po.LastOffset}
	}
	for _, p := range partitions {
		if _, ok := out[p]; !ok {
			return nil, fmt.Errorf("list offsets of %s/%d: no answer", topic, p)
		}
	}
	return out, nil
}

// EndSum is the sum of the end offsets of topic's partitions 0 to
// partitions-1: how many records the topic has been given, whatever
// retention has removed since.
func EndSum(ctx context.Context, c *kafka.Client, topic string, partitions int) (int64, error) {
	ps := make([]int, partitions)
	for i := range ps {
		ps[i] = i
	}
	ranges, err := List(ctx, c, topic, ps)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, r := range ranges {
		sum += r.End
	}
	return sum, nil
}
