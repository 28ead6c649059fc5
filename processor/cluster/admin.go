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
}

// OutputEnds reads the end offsets of output partitions parts.
func (a Admin) OutputEnds(ctx context.Context, parts []int) (map[int]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := offsets.List(ctx, a.Client, a.Output, parts)
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

// PartitionCounts reads how many partitions the input and output topics
// have; routing depends on whether they match.
func (a Admin) PartitionCounts(ctx context.Context) (in, out int, err error) {
	res, err := a.Client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{a.Input, a.Output}})
	if err != nil {
		return 0, 0, fmt.Errorf("read metadata: %w", err)
	}
	for _, t := range res.Topics {
		if t.Error != nil {
			return 0, 0, fmt.Errorf("read metadata of %s: %w", t.Name, t.Error)
		}
		switch t.Name {
		case a.Input:
			in = len(t.Partitions)
		case a.Output:
			out = len(t.Partitions)
		}
	}
	if in == 0 || out == 0 {
		return 0, 0, fmt.Errorf("read metadata: %s has %d partitions, %s has %d", a.Input, in, a.Output, out)
	}
	return in, out, nil
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
