package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/segmentio/kafka-go"

	"dedup/checkpoint"
	"dedup/internal/config"
	"dedup/internal/leader"
)

// OpenStore builds the checkpoint store CHECKPOINT_STORE names. The Kafka
// store creates its compacted topic when missing (kfake compacts too, so it
// works against the embedded broker as well).
func OpenStore(ctx context.Context, cfg *config.Config, conn *config.Connection, log *slog.Logger) (checkpoint.Store, error) {
	if cfg.CheckpointStore == config.StoreFile {
		return checkpoint.NewFileStore(checkpoint.FileOptions{
			Dir:    cfg.CheckpointDir,
			Keep:   cfg.CheckpointKeep,
			Group:  cfg.GroupID,
			Logger: log,
		})
	}
	// The checkpoint topic mirrors the input's partition count so that a
	// restore reads only its own partition's snapshots (with
	// REPARTITION_TOPIC, the partitions deduplicated are that topic's).
	input := cfg.InputTopic
	if cfg.RepartitionTopic != "" {
		input = cfg.RepartitionTopic
	}
	partitions, err := TopicPartitions(ctx, conn, input)
	if err != nil {
		log.Warn("checkpoint topic gets one partition: input topic not described", "topic", input, "err", err)
		partitions = 1
	}
	return checkpoint.NewKafkaStore(ctx, checkpoint.KafkaOptions{
		Brokers:    conn.Brokers,
		Dialer:     conn.Dialer,
		Transport:  leader.Follow(conn.Transport),
		Topic:      cfg.CheckpointTopic,
		Group:      cfg.GroupID,
		Keep:       cfg.CheckpointKeep,
		Partitions: partitions,
		Logger:     log,
	})
}

// ErrTopicNotFound is a topic the cluster does not list.
var ErrTopicNotFound = errors.New("topic not found")

// TopicPartitions asks the cluster how many partitions topic has, within
// the start-up metadata timeout.
func TopicPartitions(ctx context.Context, conn *config.Connection, topic string) (int, error) {
	client := &kafka.Client{Addr: kafka.TCP(conn.Brokers...), Transport: conn.Transport, Timeout: StartupMetadataTimeout}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return 0, fmt.Errorf("describe topic %s: %w", topic, err)
	}
	for _, t := range md.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return 0, fmt.Errorf("describe topic %s: %w", topic, t.Error)
		}
		if len(t.Partitions) > 0 {
			return len(t.Partitions), nil
		}
	}
	return 0, fmt.Errorf("describe topic %s: %w", topic, ErrTopicNotFound)
}
