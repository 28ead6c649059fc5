package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/segmentio/kafka-go"

	"dedup/checkpoint"
	"dedup/key"
	"dedup/processor"
	"dedup/processor/partition"
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
	log.Warn("KAFKA_BROKERS is empty: starting the embedded single-node broker, which is for trying dedup out, not for production; set KAFKA_BROKERS to use a real cluster",
		"addr", cfg.EmbeddedBrokerAddr)
	b, err := StartEmbeddedBroker(ctx, EmbeddedOptions{
		Addr:       cfg.EmbeddedBrokerAddr,
		DataDir:    cfg.DataDir,
		Topics:     cfg.embeddedTopics(),
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

// Stage is one running deduplication stage with its checkpoint store. Run
// it once.
type Stage struct {
	cfg   *Config
	log   *slog.Logger
	proc  *processor.Processor
	store checkpoint.Store
}

// newStage builds everything that can fail fast (store, processor options)
// before any record is read; the brokers have been reached.
func newStage(ctx context.Context, cfg *Config, cluster *Cluster, reg *prometheus.Registry, log *slog.Logger) (*Stage, error) {
	store, err := openStore(ctx, cfg, cluster.Conn, log)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint store: %w", err)
	}
	keys, _ := key.Parse(cfg.Key) // validated with the configuration
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
		DeadLetterTopic:    cfg.DeadLetterTopic,
		StartOffset:        start,
		SessionTimeout:     cfg.SessionTimeout,
		GroupBalancer:      cfg.GroupBalancer,
		Key:                keys,
		RetractHeader:      cfg.RetractHeader,
		Filter:             cfg.filterOptions(),
		MaxClockSkew:       cfg.MaxClockSkew,
		RecoveryTimeout:    cfg.RecoveryTimeout,
		BatchSize:          cfg.ProduceBatchSize,
		BatchBytes:         cfg.ProduceBatchBytes,
		BatchTimeout:       cfg.ProduceBatchTimeout,
		Compression:        cfg.compression(),
		FetchMinBytes:      cfg.FetchMinBytes,
		FetchMaxBytes:      cfg.FetchMaxBytes,
		FetchBufferBytes:   cfg.FetchBufferBytes,
		FetchMaxWait:       cfg.FetchMaxWait,
		CheckpointInterval: cfg.CheckpointInterval,
		Store:              store,
		OnDamage:           partition.OnDamage(cfg.CheckpointOnDamage),
		Metrics:            processor.NewMetrics(reg),
		Logger:             log,
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("create processor: %w", err), store.Close())
	}
	return &Stage{cfg: cfg, log: log, proc: proc, store: store}, nil
}

// Progress reads the processor's cumulative counters.
func (s *Stage) Progress() processor.Progress { return s.proc.Progress() }

// Run consumes until ctx ends, then gives the processor SHUTDOWN_TIMEOUT to
// flush, checkpoint, commit and leave the group, and closes the store. The
// errors of every step are joined.
//
// One deadline covers the whole stop, so that the process exits within
// SHUTDOWN_TIMEOUT of the signal whatever the broker does. A processor
// still stopping at the deadline is left to the process's exit, and so is
// its store: closing the store under a save in flight is not safe, and
// Close would wait for that save.
func (s *Stage) Run(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- s.proc.Run(ctx) }()

	var runErr error
	var deadline <-chan time.Time
	select {
	case err := <-done:
		// A processor that saw ctx end first and stopped is a clean stop,
		// whichever case the select picked.
		if err != nil && (ctx.Err() == nil || !errors.Is(err, context.Canceled)) {
			runErr = fmt.Errorf("run processor: %w", err)
		}
	case <-ctx.Done():
		s.log.Info("stopping: flushing, checkpointing and leaving the group", "timeout", s.cfg.ShutdownTimeout)
		timer := time.NewTimer(s.cfg.ShutdownTimeout)
		defer timer.Stop()
		deadline = timer.C
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				runErr = fmt.Errorf("stop processor: %w", err)
			}
		case <-deadline:
			return fmt.Errorf("stop processor: not done within SHUTDOWN_TIMEOUT %s", s.cfg.ShutdownTimeout)
		}
	}
	if deadline == nil {
		// The processor failed on its own: the store's close is bounded
		// all the same.
		timer := time.NewTimer(s.cfg.ShutdownTimeout)
		defer timer.Stop()
		deadline = timer.C
	}
	closed := make(chan error, 1)
	go func() { closed <- s.store.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("close checkpoint store: %w", err))
		}
	case <-deadline:
		runErr = errors.Join(runErr, fmt.Errorf("close checkpoint store: not done within SHUTDOWN_TIMEOUT %s", s.cfg.ShutdownTimeout))
	}
	return runErr
}

// closeGrace bounds the wait for HTTP requests in flight.
const closeGrace = 2 * time.Second

// errStoppedDuringStartup is a signal that arrived before the stage ran:
// nothing was consumed, so there is nothing to flush and the stop is clean.
var errStoppedDuringStartup = errors.New("stopped during start-up")

// service is the stage with what surrounds it: the status server, which
// answers from the first moment (unhealthy until the stage runs), and the
// cluster (the brokers, or the embedded one).
type service struct {
	Cluster *Cluster
	Stage   *Stage
	status  *StatusServer
}

// startService runs start-up: the status server, the embedded broker when
// KAFKA_BROKERS is empty, reaching the brokers within KAFKA_STARTUP_TIMEOUT,
// then the store and processor. A signal during any of it returns
// errStoppedDuringStartup.
func startService(ctx context.Context, cfg *Config, log *slog.Logger, stdout io.Writer) (_ *service, err error) {
	s := &service{}
	defer func() {
		if err != nil {
			if ctx.Err() != nil {
				log.Debug("start-up interrupted", "err", err)
				err = errStoppedDuringStartup
			}
			err = errors.Join(err, s.Close())
		}
	}()
	reg := newRegistry(cfg)
	status := newStartupStatus()
	if cfg.MetricsAddr != "" {
		if s.status, err = ListenStatus(cfg.MetricsAddr, reg, status, log); err != nil {
			return nil, err
		}
		go s.status.Serve()
		log.Info("serving /metrics, /healthz, /readyz", "addr", s.status.Addr())
	}
	if s.Cluster, err = openCluster(ctx, cfg, log, stdout); err != nil {
		return nil, err
	}
	failures := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dedup_startup_connect_failures_total",
		Help: "Start-up attempts to reach the brokers that failed; rises until a broker answers or KAFKA_STARTUP_TIMEOUT ends the process.",
	})
	reg.MustRegister(failures)
	if err = reachBrokers(ctx, reachOptions{Conn: s.Cluster.Conn, Timeout: cfg.StartupTimeout, Log: log, Status: status, Failures: failures}); err != nil {
		return nil, err
	}
	status.set("opening the checkpoint store")
	if s.Stage, err = newStage(ctx, cfg, s.Cluster, reg, log); err != nil {
		return nil, err
	}
	status.running(s.Stage.proc)
	return s, nil
}

// Close stops the status server and the embedded broker, if any.
func (s *service) Close() error {
	var errs []error
	if s.status != nil {
		ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
		defer cancel()
		errs = append(errs, s.status.Shutdown(ctx))
		s.status = nil
	}
	if s.Cluster != nil {
		errs = append(errs, s.Cluster.Close())
		s.Cluster = nil
	}
	return errors.Join(errs...)
}
