package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/checkpoint"
	"dedup/processor"
)

// Cluster is the Kafka the binary talks to: the configured brokers, or the
// embedded broker it started itself.
type Cluster struct {
	Conn     *Connection
	Embedded *EmbeddedBroker // nil with KAFKA_BROKERS set
}

// openCluster starts the embedded broker when KAFKA_BROKERS is empty and
// prints how to reach it; otherwise it only builds the connection settings.
func openCluster(ctx context.Context, cfg *Config, log *slog.Logger, stdout io.Writer) (*Cluster, error) {
	if !cfg.Embedded() {
		conn, err := newConnection(cfg, cfg.BrokerList())
		if err != nil {
			return nil, err
		}
		return &Cluster{Conn: conn}, nil
	}
	b, err := StartEmbeddedBroker(ctx, EmbeddedOptions{
		Addr:       cfg.EmbeddedBrokerAddr,
		DataDir:    cfg.DataDir,
		Topics:     []string{cfg.InputTopic, cfg.OutputTopic},
		Partitions: cfg.EmbeddedPartitions,
		SASL:       cfg,
		Logger:     log,
	})
	if err != nil {
		return nil, err
	}
	log.Info("embedded broker started", "addr", b.Addr(), "dir", b.Dir(), "partitions", cfg.EmbeddedPartitions)
	printKcatHelp(stdout, b.Addr(), cfg)
	conn, err := newConnection(cfg, []string{b.Addr()})
	if err != nil {
		return nil, errors.Join(err, b.Close())
	}
	return &Cluster{Conn: conn, Embedded: b}, nil
}

// Close stops the embedded broker, if any, after the clients are done.
func (c *Cluster) Close() error {
	c.Conn.Transport.CloseIdleConnections()
	if c.Embedded == nil {
		return nil
	}
	if err := c.Embedded.Close(); err != nil {
		return fmt.Errorf("close embedded broker: %w", err)
	}
	return nil
}

// Stage is one running deduplication stage with its checkpoint store and
// status endpoints. Run it once.
type Stage struct {
	cfg    *Config
	log    *slog.Logger
	proc   *processor.Processor
	store  checkpoint.Store
	status *StatusServer // nil when METRICS_ADDR is empty
}

// newStage builds everything that can fail fast (store, metrics port)
// before any record is read.
func newStage(ctx context.Context, cfg *Config, cluster *Cluster, log *slog.Logger) (*Stage, error) {
	store, err := openStore(ctx, cfg, cluster.Conn, log)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint store: %w", err)
	}
	reg := newRegistry()
	key, _ := processor.ParseKeySource(cfg.Key) // validated with the configuration
	start := kafka.FirstOffset
	if cfg.StartOffset == "latest" {
		start = kafka.LastOffset
	}
	proc, err := processor.New(processor.Options{
		Brokers:            cluster.Conn.Brokers,
		Dialer:             cluster.Conn.Dialer,
		Transport:          cluster.Conn.Transport,
		GroupID:            cfg.GroupID,
		InputTopic:         cfg.InputTopic,
		OutputTopic:        cfg.OutputTopic,
		StartOffset:        start,
		SessionTimeout:     cfg.SessionTimeout,
		GroupBalancer:      cfg.GroupBalancer,
		Key:                key,
		RetractHeader:      cfg.RetractHeader,
		Filter:             cfg.filterOptions(),
		BatchSize:          cfg.ProduceBatchSize,
		BatchBytes:         cfg.ProduceBatchBytes,
		BatchTimeout:       cfg.ProduceBatchTimeout,
		FetchMinBytes:      cfg.FetchMinBytes,
		FetchMaxBytes:      cfg.FetchMaxBytes,
		FetchMaxWait:       cfg.FetchMaxWait,
		CheckpointInterval: cfg.CheckpointInterval,
		Store:              store,
		Metrics:            processor.NewMetrics(reg),
		Logger:             log,
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("create processor: %w", err), store.Close())
	}
	s := &Stage{cfg: cfg, log: log, proc: proc, store: store}
	if cfg.MetricsAddr != "" {
		s.status, err = ListenStatus(cfg.MetricsAddr, reg, proc, log)
		if err != nil {
			return nil, errors.Join(err, store.Close())
		}
		log.Info("serving /metrics, /healthz, /readyz", "addr", s.status.Addr())
	}
	return s, nil
}

// Progress reads the processor's cumulative counters.
func (s *Stage) Progress() processor.Progress { return s.proc.Progress() }

// Run consumes until ctx ends, then gives the processor SHUTDOWN_TIMEOUT to
// flush, checkpoint, commit and leave the group, and closes the store and
// the status server. The errors of every step are joined.
func (s *Stage) Run(ctx context.Context) error {
	if s.status != nil {
		go s.status.Serve()
	}
	done := make(chan error, 1)
	go func() { done <- s.proc.Run(ctx) }()

	var runErr error
	deadline := time.Time{} // no bound on closing after a failure: nothing waits on us
	select {
	case runErr = <-done:
		if runErr != nil {
			runErr = fmt.Errorf("run processor: %w", runErr)
		}
	case <-ctx.Done():
		// One deadline covers the whole stop, so that the process exits
		// within SHUTDOWN_TIMEOUT of the signal.
		deadline = time.Now().Add(s.cfg.ShutdownTimeout)
		s.log.Info("stopping: flushing, checkpointing and leaving the group", "timeout", s.cfg.ShutdownTimeout)
		timer := time.NewTimer(s.cfg.ShutdownTimeout)
		defer timer.Stop()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				runErr = fmt.Errorf("stop processor: %w", err)
			}
		case <-timer.C:
			runErr = fmt.Errorf("stop processor: not done within SHUTDOWN_TIMEOUT %s", s.cfg.ShutdownTimeout)
		}
	}
	return errors.Join(runErr, s.close(deadline))
}

// closeGrace bounds the wait for HTTP requests in flight.
const closeGrace = 2 * time.Second

func (s *Stage) close(deadline time.Time) error {
	var errs []error
	if err := s.store.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close checkpoint store: %w", err))
	}
	if s.status != nil {
		if d := time.Now().Add(closeGrace); deadline.IsZero() || d.Before(deadline) {
			deadline = d
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		errs = append(errs, s.status.Shutdown(ctx))
	}
	return errors.Join(errs...)
}
