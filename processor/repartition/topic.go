package repartition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/processor/cluster"
)

// Retention is the repartition topic's retention.ms when the stage
// creates it: a week, so that hop 2 may lag (or be down) that long before
// hop 1's records are deleted unread. Cleanup is delete: the topic is a
// stream, never compacted (compaction would keep one record per dedup key
// and lose the copies hop 2 must see, retractions among them).
const Retention = 7 * 24 * time.Hour

// TopicConfig is what EnsureTopic creates: cleanup.policy=delete and
// retention.ms=Retention.
func TopicConfig() []kafka.ConfigEntry {
	return []kafka.ConfigEntry{
		{ConfigName: "cleanup.policy", ConfigValue: "delete"},
		{ConfigName: "retention.ms", ConfigValue: strconv.FormatInt(Retention.Milliseconds(), 10)},
	}
}

// EnsureTopic creates the repartition topic when it is absent, with
// partitions partitions (0: as many as the input topic has), and returns
// its partition count.
func EnsureTopic(ctx context.Context, brokers []string, transport *kafka.Transport, topic, input string, partitions int, log *slog.Logger) (int, error) {
	rt := cluster.NewTransport(transport)
	defer rt.CloseIdleConnections()
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Transport: rt}
	n, err := partitionCount(ctx, c, topic)
	if err == nil {
		if partitions > 0 && n != partitions {
			log.Warn("repartition topic exists with another partition count than REPARTITION_PARTITIONS: using it as it is",
				"topic", topic, "partitions", n, "configured", partitions)
		}
		return n, nil
	}
	if !errors.Is(err, kafka.UnknownTopicOrPartition) {
		return 0, err
	}
	if partitions <= 0 {
		if partitions, err = partitionCount(ctx, c, input); err != nil {
			return 0, fmt.Errorf("count input partitions: %w", err)
		}
	}
	res, err := c.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: topic, NumPartitions: partitions, ReplicationFactor: -1, ConfigEntries: TopicConfig(),
	}}})
	if err != nil {
		return 0, fmt.Errorf("create topic %s: %w", topic, err)
	}
	if err := res.Errors[topic]; err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
		return 0, fmt.Errorf("create topic %s: %w", topic, err)
	}
	log.Info("created repartition topic", "topic", topic, "partitions", partitions)
	for {
		n, err := partitionCount(ctx, c, topic)
		if err == nil {
			return n, nil
		}
		if !errors.Is(err, kafka.UnknownTopicOrPartition) && !errors.Is(err, kafka.LeaderNotAvailable) {
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("wait for topic %s: %w", topic, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// partitionCount reads topic's partition count.
func partitionCount(ctx context.Context, c *kafka.Client, topic string) (int, error) {
	res, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return 0, fmt.Errorf("read metadata of %s: %w", topic, err)
	}
	for _, t := range res.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return 0, fmt.Errorf("read metadata of %s: %w", topic, t.Error)
		}
		if len(t.Partitions) == 0 {
			break
		}
		return len(t.Partitions), nil
	}
	return 0, fmt.Errorf("read metadata of %s: %w", topic, kafka.UnknownTopicOrPartition)
}
