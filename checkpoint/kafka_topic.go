package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

// TopicSetting is one setting the store creates its topic with.
type TopicSetting struct {
	Name, Value string
	Why         string // what it is for, as `dedup check` says it
}

// Every checkpoint partition's keys are superseded within a few intervals:
// compaction is what holds it near Keep snapshots, and these settings are
// how soon it runs and how long what it removes stays readable
// (docs/checkpoints.md, "The topic's settings").
const (
	// TombstoneRetention (delete.retention.ms) is how long a tombstone
	// outlives the compaction that removed what it deletes. A reader that
	// read a record must reach its tombstone within it, or take a deleted
	// piece for a live one; the index re-reads a partition it has not
	// caught up on for half of it (refresh).
	TombstoneRetention = time.Hour
	// CompactionLag (min.compaction.lag.ms) keeps a record readable this
	// long after the tombstone that deletes it: a restore or `dedup
	// inspect` that indexed a piece before it was pruned still fetches it.
	CompactionLag = 10 * time.Minute
	// SegmentRoll (segment.ms) closes the active segment, which is never
	// compacted, this often; Kafka's 7-day default holds a week of
	// superseded pieces and tombstones.
	SegmentRoll = time.Hour
)

// TopicSettings are the settings the store creates its topic with;
// `dedup check` warns about an existing topic set otherwise.
// min.cleanable.dirty.ratio and max.compaction.lag.ms keep the broker's
// defaults: a partition is cleaned once its superseded bytes reach its
// live ones, which bounds it near twice Keep snapshots.
var TopicSettings = []TopicSetting{
	{"cleanup.policy", "compact", "retention would delete snapshots still in use"},
	{"delete.retention.ms", ms(TombstoneRetention), "longer keeps tombstones every restore reads; shorter than a reader takes to read a partition lets it miss one"},
	{"min.compaction.lag.ms", ms(CompactionLag), "a restore or inspect that listed a piece before it was pruned can still fetch it"},
	{"segment.ms", ms(SegmentRoll), "the active segment is never compacted"},
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// ensureTopic creates the topic when missing and returns its partitions.
func (s *KafkaStore) ensureTopic(ctx context.Context, partitions int) ([]int, error) {
	ids, err := partitionIDs(ctx, s.client, s.topic)
	if err == nil {
		return ids, nil
	}
	if !errors.Is(err, kafka.UnknownTopicOrPartition) {
		return nil, err
	}
	res, err := s.client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic:             s.topic,
		NumPartitions:     partitions,
		ReplicationFactor: -1,
		ConfigEntries:     topicConfig(),
	}}})
	if err != nil {
		return nil, fmt.Errorf("create topic %s: %w", s.topic, err)
	}
	if err := res.Errors[s.topic]; err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
		return nil, fmt.Errorf("create topic %s: %w", s.topic, err)
	}
	s.log.Info("created checkpoint topic", "topic", s.topic, "partitions", partitions)
	// Metadata may lag the creation: poll until the partitions show.
	for {
		ids, err := partitionIDs(ctx, s.client, s.topic)
		if err == nil {
			return ids, nil
		}
		if !errors.Is(err, kafka.UnknownTopicOrPartition) && !errors.Is(err, kafka.LeaderNotAvailable) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for topic %s: %w", s.topic, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func topicConfig() []kafka.ConfigEntry {
	entries := make([]kafka.ConfigEntry, len(TopicSettings))
	for i, ts := range TopicSettings {
		entries[i] = kafka.ConfigEntry{ConfigName: ts.Name, ConfigValue: ts.Value}
	}
	return entries
}

// readTopicConfig reads the topic's configuration: lowers the chunk size
// below max.message.bytes, bounds the age of a chain's base when the
// topic is not compacted, and takes how long its tombstones last.
func (s *KafkaStore) readTopicConfig(ctx context.Context) error {
	res, err := s.client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic,
		ResourceName: s.topic,
	}}}) // all configs: some brokers report the broker-level name (message.max.bytes) too

	if err != nil {
		s.log.Warn("cannot read checkpoint topic configuration", "topic", s.topic, "err", err)
		return nil
	}
	policy, retentionMs, retentionBytes := "", int64(-1), int64(-1)
	for _, r := range res.Resources {
		if r.Error != nil {
			s.log.Warn("cannot read checkpoint topic configuration", "topic", s.topic, "err", r.Error)
			continue
		}
		for _, e := range r.ConfigEntries {
			switch e.ConfigName {
			case "cleanup.policy":
				policy = e.ConfigValue
			case "retention.ms":
				retentionMs, _ = strconv.ParseInt(e.ConfigValue, 10, 64)
			case "retention.bytes":
				retentionBytes, _ = strconv.ParseInt(e.ConfigValue, 10, 64)
			case "delete.retention.ms":
				if v, err := strconv.ParseInt(e.ConfigValue, 10, 64); err == nil && v >= 0 {
					s.tombstoneLife = time.Duration(v) * time.Millisecond
				}
			case "max.message.bytes", "message.max.bytes":
				max, err := strconv.Atoi(e.ConfigValue)
				if err != nil || max <= 0 || s.chunk+recordOverhead <= max {
					continue
				}
				if max-recordOverhead < minChunkBytes {
					return fmt.Errorf("topic %s: max.message.bytes %d leaves no room for chunks", s.topic, max)
				}
				s.log.Info("checkpoint chunk size lowered to fit max.message.bytes", "topic", s.topic,
					"chunk_bytes", max-recordOverhead, "max.message.bytes", max)
				s.chunk = max - recordOverhead
			}
		}
	}
	if policy == "" || strings.Contains(policy, "compact") {
		return nil
	}
	// Retention deletes what is older than retention.ms whether a chain
	// still needs it or not: a base rewritten at half that age keeps every
	// chain in use younger than it. retention.bytes cannot be bounded so.
	if retentionMs > 0 {
		s.baseMaxAge = time.Duration(retentionMs) * time.Millisecond / 2
	}
	s.log.Warn("checkpoint topic is not compacted: retention deletes snapshots, and pruned ones stay until it does; "+
		"set cleanup.policy=compact", "topic", s.topic, "cleanup.policy", policy, "retention.ms", retentionMs,
		"base_rewritten_within", s.baseMaxAge)
	if retentionBytes > 0 {
		s.log.Error("checkpoint topic is not compacted and has retention.bytes: retention can delete snapshots still in use, "+
			"and a restore then finds them damaged or missing; set cleanup.policy=compact", "topic", s.topic,
			"retention.bytes", retentionBytes)
	}
	return nil
}

// BaseMaxAge is how old a chain's base may grow before the next checkpoint
// writes a new one (0: no bound): half the retention.ms of a checkpoint
// topic that is not compacted, so retention never deletes a chain in use.
func (s *KafkaStore) BaseMaxAge() time.Duration { return s.baseMaxAge }

// Keys.
