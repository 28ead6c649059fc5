package main

import (
	"context"
	"log/slog"

	"dedup/checkpoint"
)

// openStore builds the checkpoint store CHECKPOINT_STORE names. The Kafka
// store creates its compacted topic when missing (kfake compacts too, so it
// works against the embedded broker as well).
func openStore(ctx context.Context, cfg *Config, conn *Connection, log *slog.Logger) (checkpoint.Store, error) {
	if cfg.CheckpointStore == storeFile {
		return checkpoint.NewFileStore(checkpoint.FileOptions{
			Dir:    cfg.CheckpointDir,
			Keep:   cfg.CheckpointKeep,
			Group:  cfg.GroupID,
			Logger: log,
		})
	}
	return checkpoint.NewKafkaStore(ctx, checkpoint.KafkaOptions{
		Brokers:   conn.Brokers,
		Dialer:    conn.Dialer,
		Transport: conn.Transport,
		Topic:     cfg.CheckpointTopic,
		Group:     cfg.GroupID,
		Keep:      cfg.CheckpointKeep,
		Logger:    log,
	})
}
