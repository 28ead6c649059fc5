package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/offsets"
)

// Admin makes the stage's admin requests (metadata, offsets, topic
// configurations) on one client for its input and output topics.
type Admin struct {
	Client        *kafka.Client
	Input, Output string // topics
	Dropped       string // the drop topic; empty: none
}

// OutputEnds reads the end offsets of output partitions parts.
func (a Admin) OutputEnds(ctx context.Context, parts []int) (map[int]int64, error) {
	return a.Ends(ctx, a.Output, parts)
}

// DroppedEnds reads the end offsets of drop topic partitions parts.
func (a Admin) DroppedEnds(ctx context.Context, parts []int) (map[int]int64, error) {
	return a.Ends(ctx, a.Dropped, parts)
}

// Ends reads the end offsets of partitions parts of topic.
func (a Admin) Ends(ctx context.Context, topic string, parts []int) (map[int]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := offsets.List(ctx, a.Client, topic, parts)
	if err != nil {
		return nil, err
	}
	ends := make(map[int]int64, len(r))
	for part, o := range r {
		ends[part] = o.End
	}
	return ends, nil
}

// Bounds reads a partition's log start and end offsets, so that a
// partition knows where it may read before the first record.
func (a Admin) Bounds(ctx context.Context, topic string, partition int) (first, end int64, err error) {
	r, err := offsets.List(ctx, a.Client, topic, []int{partition})
	if err != nil {
		return 0, 0, err
	}
	return r[partition].First, r[partition].End, nil
}

// Counts are the partition counts of the stage's topics.
type Counts struct {
	In, Out int
	Dropped int // 0 without a drop topic
}

// PartitionCounts reads how many partitions the input, output (and drop)
// topics have; routing depends on whether they match.
func (a Admin) PartitionCounts(ctx context.Context) (Counts, error) {
	topics := []string{a.Input, a.Output}
	if a.Dropped != "" {
		topics = append(topics, a.Dropped)
	}
	res, err := a.Client.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		return Counts{}, fmt.Errorf("read metadata: %w", err)
	}
	var c Counts
	for _, t := range res.Topics {
		if t.Error != nil {
			return Counts{}, fmt.Errorf("read metadata of %s: %w", t.Name, t.Error)
		}
		switch t.Name {
		case a.Input:
			c.In = len(t.Partitions)
		case a.Output:
			c.Out = len(t.Partitions)
		case a.Dropped:
			c.Dropped = len(t.Partitions)
		}
	}
	if c.In == 0 || c.Out == 0 || (a.Dropped != "" && c.Dropped == 0) {
		return Counts{}, fmt.Errorf("read metadata: %s has %d partitions, %s has %d, drop topic %q %d", a.Input, c.In, a.Output, c.Out, a.Dropped, c.Dropped)
	}
	return c, nil
}

// BatchOverhead is a v2 record batch's header: what a broker counts
// against max.message.bytes besides the records.
const BatchOverhead = 61

// TopicSetting is what the output check needs of a topic's configuration.
type TopicSetting struct {
	MaxBytes  int64 // max.message.bytes (0: not set)
	Compacted bool  // cleanup.policy includes compact
}

// TopicSettings describes the max.message.bytes and cleanup.policy of
// topics.
func (a Admin) TopicSettings(ctx context.Context, topics []string) (map[string]TopicSetting, error) {
	req := &kafka.DescribeConfigsRequest{}
	for _, t := range topics {
		req.Resources = append(req.Resources, kafka.DescribeConfigRequestResource{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: t, ConfigNames: []string{"max.message.bytes", "cleanup.policy"},
		})
	}
	res, err := a.Client.DescribeConfigs(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("describe configs: %w", err)
	}
	got := map[string]TopicSetting{}
	var errs []error
	for _, r := range res.Resources {
		if r.Error != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", r.ResourceName, r.Error))
			continue
		}
		var set TopicSetting
		for _, e := range r.ConfigEntries {
			switch e.ConfigName {
			case "max.message.bytes":
				v, err := strconv.ParseInt(e.ConfigValue, 10, 64)
				if err != nil || v <= BatchOverhead {
					errs = append(errs, fmt.Errorf("topic %s: max.message.bytes %q", r.ResourceName, e.ConfigValue))
					continue
				}
				set.MaxBytes = v
			case "cleanup.policy":
				set.Compacted = strings.Contains(e.ConfigValue, "compact")
			}
		}
		got[r.ResourceName] = set
	}
	return got, errors.Join(errs...)
}
