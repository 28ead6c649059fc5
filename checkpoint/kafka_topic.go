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
		ConfigEntries:     []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}},
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

// fitChunks reads the topic's configuration: warns when it is not compacted
// and lowers the chunk size below max.message.bytes.
func (s *KafkaStore) fitChunks(ctx context.Context) error {
	res, err := s.client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic,
		ResourceName: s.topic,
	}}}) // all configs: some brokers report the broker-level name (message.max.bytes) too

	if err != nil {
		s.log.Warn("cannot read checkpoint topic configuration", "topic", s.topic, "err", err)
		return nil
	}
	for _, r := range res.Resources {
		if r.Error != nil {
			s.log.Warn("cannot read checkpoint topic configuration", "topic", s.topic, "err", r.Error)
			continue
		}
		for _, e := range r.ConfigEntries {
			switch e.ConfigName {
			case "cleanup.policy":
				if !strings.Contains(e.ConfigValue, "compact") {
					s.log.Warn("checkpoint topic is not compacted: old snapshots are kept until retention deletes them",
						"topic", s.topic, "cleanup.policy", e.ConfigValue)
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
	return nil
}

// Keys.
