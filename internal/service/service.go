package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"dedup/checkpoint"
	"dedup/internal/buildinfo"
	"dedup/internal/config"
	"dedup/internal/embedded"
	"dedup/key"
	"dedup/processor"
	watch "dedup/processor/cluster"
	pmetrics "dedup/processor/metrics"
	"dedup/processor/partition"
	"dedup/processor/repartition"
	"dedup/registry"
)

// cluster is the Kafka the binary talks to: the configured brokers, or the
// embedded broker it started itself.
type cluster struct {
	Conn     *config.Connection
	Embedded *embedded.Broker // nil with KAFKA_BROKERS set
}

// openCluster starts the embedded broker when KAFKA_BROKERS is empty and
// prints how to reach it; otherwise it only builds the connection settings.
func openCluster(ctx context.Context, cfg *config.Config, log *slog.Logger, stdout io.Writer) (*cluster, error) {
	if !cfg.Embedded() {
		conn, err := config.NewConnection(cfg, cfg.BrokerList())
		if err != nil {
			return nil, err
		}
		return &cluster{Conn: conn}, nil
	}
	log.Warn("KAFKA_BROKERS is empty: starting the embedded single-node broker, which is for trying dedup out, not for production; set KAFKA_BROKERS to use a real cluster",
		"addr", cfg.EmbeddedBrokerAddr)
	b, err := embedded.Start(ctx, embedded.Options{
		Addr:       cfg.EmbeddedBrokerAddr,
		DataDir:    cfg.DataDir,
		Topics:     cfg.EmbeddedTopics(),
		Partitions: cfg.EmbeddedPartitions,
		SASL:       cfg,
		Logger:     log,
	})
	if err != nil {
		return nil, err
	}
	log.Info("embedded broker started", "addr", b.Addr(), "dir", b.Dir(), "partitions", cfg.EmbeddedPartitions)
	embedded.PrintKcatHelp(stdout, b.Addr(), cfg)
	conn, err := config.NewConnection(cfg, []string{b.Addr()})
	if err != nil {
		return nil, errors.Join(err, b.Close())
	}
	return &cluster{Conn: conn, Embedded: b}, nil
}

// Close stops the embedded broker, if any, after the clients are done.
func (c *cluster) Close() error {
	c.Conn.Transport.CloseIdleConnections()
	if c.Embedded == nil {
		return nil
	}
	if err := c.Embedded.Close(); err != nil {
		return fmt.Errorf("close embedded broker: %w", err)
	}
	return nil
}

// stage is one running deduplication stage with its checkpoint store. Run
// it once. With REPARTITION_HOPS it runs one of the two hops: rekey has no
// processor and no store, dedup no hop 1.
type stage struct {
	cfg   *config.Config
	log   *slog.Logger
	proc  *processor.Processor // nil: REPARTITION_HOPS=rekey
	store checkpoint.Store     // nil with proc
	// hop1 is the re-key hop with REPARTITION_TOPIC (nil: one hop, or
	// REPARTITION_HOPS=dedup).
	hop1 *repartition.Options
	// schemas is the Schema Registry client of schema-framed keys (nil
	// without them).
	schemas *registry.Client
}

// probe answers /healthz and /readyz for every hop the stage runs.
func (s *stage) probe() Probe {
	p := stageProbe{hop2: s.proc}
	if s.schemas != nil {
		p.schemas = schemaStatus{s.schemas}
	}
	if s.hop1 != nil {
		p.hop1 = s.hop1.Status
	}
	return p
}

// newStage builds everything that can fail fast (store, processor options)
// before any record is read; the brokers have been reached.
func newStage(ctx context.Context, cfg *config.Config, cl *cluster, reg *prometheus.Registry, log *slog.Logger) (*stage, error) {
	if cfg.RepartitionTopic != "" {
		// Before the store: the checkpoint topic takes its partition count.
		// Either role creates it, whichever starts first.
		if _, err := repartition.EnsureTopic(ctx, cl.Conn.Brokers, cl.Conn.Transport, cfg.RepartitionTopic, cfg.InputTopic,
			cfg.RepartitionPartitions(), log); err != nil {
			return nil, fmt.Errorf("repartition topic: %w", err)
		}
	}
	keys, _ := key.Parse(cfg.Key) // validated with the configuration
	start := kafka.FirstOffset
	if cfg.StartOffset == "latest" {
		start = kafka.LastOffset
	}
	metrics := processor.NewMetrics(reg)
	st := &stage{cfg: cfg, log: log}
	schemas, err := cfg.Registry(log)
	if err != nil {
		return nil, fmt.Errorf("open schema registry client: %w", err)
	}
	// The registry's families exist whatever DEDUP_KEY reads, as every
	// family does from the start: without schema-framed keys nothing
	// fails, and they read so.
	stats := func() registry.Stats { return registry.Stats{Up: true} }
	if schemas != nil {
		st.schemas = schemas
		keys = keys.WithRegistry(schemas)
		stats = schemas.Stats
	}
	pmetrics.RegisterSchemaRegistry(reg, stats)
	if cfg.RunsRekey() {
		// This member re-keys the input into the repartition topic, in its
		// own group.
		st.hop1 = &repartition.Options{
			Brokers: cl.Conn.Brokers, Dialer: cl.Conn.Dialer, Transport: cl.Conn.Transport,
			GroupID: cfg.RepartitionGroup(), InputTopic: cfg.InputTopic, Topic: cfg.RepartitionTopic,
			Key: keys, StartOffset: start, SessionTimeout: cfg.SessionTimeout,
			// Hop 1's fetches are bounded apart from FETCH_BUFFER_BYTES (which
			// hop 2's readers share): 1 MiB per input partition holds batches.
			BatchSize: cfg.ProduceBatchSize, BatchBytes: int(cfg.ProduceBatchBytes), Compression: cfg.Compression(),
			FetchMaxBytes: min(cfg.FetchMaxBytes, 1<<20), FetchMaxWait: cfg.FetchMaxWait,
			RecoveryTimeout: cfg.RecoveryTimeout, Status: &repartition.Status{},
			Metrics: repartition.Metrics{Rekeyed: metrics.RepartitionRekeyed, Restarts: metrics.RepartitionRestarts,
				Lag: metrics.RepartitionInputLag, Unhealthy: metrics.RepartitionUnhealthy, Skipped: metrics.InputSkipped,
				InputTruncations: metrics.InputTruncations, OutputTruncations: metrics.OutputTruncations},
			Logger: log,
		}
	}
	if !cfg.RunsDedup() {
		rekeyAlone(st.hop1, cl.Conn, metrics, reg, log)
		return st, nil
	}
	store, err := OpenStore(ctx, cfg, cl.Conn, log)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint store: %w", err)
	}
	input, hop2Start := cfg.InputTopic, start
	if cfg.RepartitionTopic != "" {
		// Hop 2 deduplicates from the repartition topic. It holds only
		// what hop 1 sent: hop 2 reads it whole whatever
		// KAFKA_START_OFFSET says of the input.
		input, hop2Start = cfg.RepartitionTopic, kafka.FirstOffset
	}
	proc, err := processor.New(processor.Options{
		Brokers:            cl.Conn.Brokers,
		Dialer:             cl.Conn.Dialer,
		Transport:          cl.Conn.Transport,
		GroupID:            cfg.GroupID,
		InputTopic:         input,
		Repartitioned:      cfg.RepartitionTopic != "",
		RekeyInput:         rekeyInput(cfg),
		OutputTopic:        cfg.OutputTopic,
		DeadLetterTopic:    cfg.DeadLetterTopic,
		DroppedTopic:       cfg.DroppedTopic,
		DroppedSampleRate:  cfg.DroppedSampleRate,
		StartOffset:        hop2Start,
		SessionTimeout:     cfg.SessionTimeout,
		GroupBalancer:      cfg.GroupBalancer,
		Key:                keys,
		RetractHeader:      cfg.RetractHeader,
		Filter:             cfg.FilterOptions(),
		MaxClockSkew:       cfg.MaxClockSkew,
		RecoveryTimeout:    cfg.RecoveryTimeout,
		BatchSize:          cfg.ProduceBatchSize,
		BatchBytes:         cfg.ProduceBatchBytes,
		BatchTimeout:       cfg.ProduceBatchTimeout,
		Compression:        cfg.Compression(),
		FetchMinBytes:      cfg.FetchMinBytes,
		FetchMaxBytes:      cfg.FetchMaxBytes,
		FetchBufferBytes:   cfg.FetchBufferBytes,
		FetchMaxWait:       cfg.FetchMaxWait,
		CheckpointInterval: cfg.CheckpointInterval,
		ChainRatio:         cfg.ChainRatio(),
		Store:              store,
		OnDamage:           partition.OnDamage(cfg.CheckpointOnDamage),
		Metrics:            metrics,
		Logger:             log,
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("create processor: %w", err), store.Close())
	}
	st.proc, st.store = proc, store
	return st, nil
}

// rekeyInput is the input topic when this process runs both hops
// (REPARTITION_HOPS=both): hop 2's cluster watch then speaks for hop 1's
// input too.
func rekeyInput(cfg *config.Config) string {
	if cfg.RepartitionTopic != "" && cfg.RunsRekey() {
		return cfg.InputTopic
	}
	return ""
}

// rekeyAlone gives hop 1, run without hop 2 (REPARTITION_HOPS=rekey), what
// hop 2 would otherwise provide for the process: the cluster watch (over
// the input and the repartition topic) behind dedup_broker_connected,
// dedup_topic_missing and /readyz, and the group's series, which then
// count hop 1's group. The families that describe only hop 2's filters
// and memory are unregistered: at their zero values they would read as a
// configuration of 0 (target, keys, window) or a prediction of no memory.
func rekeyAlone(o *repartition.Options, conn *config.Connection, m *processor.Metrics, reg prometheus.Registerer, log *slog.Logger) {
	o.Cluster = watch.New(watch.Config{
		Brokers: conn.Brokers, Transport: conn.Transport,
		Input: o.InputTopic, Repartition: o.Topic,
		Log: log, Connected: m.Connected, Missing: m.Missing,
		Refresh: conn.Transport.CloseIdleConnections,
	})
	o.Metrics.Assigned, o.Metrics.Generations, o.Metrics.JoinFails = m.Assigned, m.Generations, m.JoinFails
	for _, c := range []prometheus.Collector{m.FPTarget, m.ExpectedKeys, m.WindowSeconds, m.MemPredicted} {
		reg.Unregister(c)
	}
}

// runHops runs the hops the stage has until ctx ends or one of them ends
// on its own (it failed), which ends the others, and joins their errors,
// the processor's first.
func (s *stage) runHops(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var hops []func(context.Context) error
	if s.proc != nil {
		hops = append(hops, s.proc.Run)
	}
	if s.hop1 != nil {
		hops = append(hops, func(ctx context.Context) error {
			if err := repartition.Run(ctx, *s.hop1); err != nil {
				return fmt.Errorf("run repartition hop: %w", err)
			}
			return nil
		})
	}
	errs := make([]error, len(hops))
	var wg sync.WaitGroup
	for i, run := range hops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = run(ctx)
			cancel()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Run consumes until ctx ends, then gives the processor SHUTDOWN_TIMEOUT to
// flush, checkpoint, commit and leave the group, and closes the store. The
// errors of every step are joined.
//
// One deadline covers the whole stop, so that the process exits within
// SHUTDOWN_TIMEOUT of the signal whatever the broker does. A processor
// still stopping at the deadline is left to the process's exit, and so is
// its store: closing the store under a save in flight is not safe, and
// Close would wait for that save.
func (s *stage) Run(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- s.runHops(ctx) }()

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
	if s.store == nil {
		return runErr
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

// Options configure the service.
type Options struct {
	Config *config.Config // loaded and validated
	Logger *slog.Logger
	Stdout io.Writer      // the embedded broker's kcat hints go here
	Build  buildinfo.Info // labels of dedup_build_info
}

// Run starts the stage and runs it until ctx ends, then stops it. A stop
// before the stage ran is ErrStoppedDuringStartup.
func Run(ctx context.Context, o Options) (err error) {
	svc, err := Start(ctx, o)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, svc.Close()) }()
	cfg := o.Config
	if cfg.RepartitionTopic != "" {
		o.Logger.Info("dedup running", "input", cfg.InputTopic, "repartition", cfg.RepartitionTopic, "hops", cfg.Hops(),
			"output", cfg.OutputTopic, "group", cfg.GroupID, "key", cfg.Key, "window", cfg.Window, "mode", cfg.Mode,
			"checkpoint_store", cfg.CheckpointStore)
		return svc.Run(ctx)
	}
	o.Logger.Info("dedup running", "input", cfg.InputTopic, "output", cfg.OutputTopic, "group", cfg.GroupID,
		"key", cfg.Key, "window", cfg.Window, "mode", cfg.Mode, "checkpoint_store", cfg.CheckpointStore)
	return svc.Run(ctx)
}

// closeGrace bounds the wait for HTTP requests in flight.
const closeGrace = 2 * time.Second

// ErrStoppedDuringStartup is a signal that arrived before the stage ran:
// nothing was consumed, so there is nothing to flush and the stop is clean.
var ErrStoppedDuringStartup = errors.New("stopped during start-up")

// Service is the stage with what surrounds it: the status server, which
// answers from the first moment (unhealthy until the stage runs), and the
// cluster (the brokers, or the embedded one).
type Service struct {
	cluster *cluster
	stage   *stage
	status  *statusServer
	probe   *keyProbe // PROBE_ADDR's key probe; nil when off
}

// Run runs the stage until ctx ends and stops it (stage.Run); Close
// afterwards.
func (s *Service) Run(ctx context.Context) error { return s.stage.Run(ctx) }

// Progress reads the processor's cumulative counters.
// (zero with REPARTITION_HOPS=rekey: nothing is decided).
func (s *Service) Progress() processor.Progress {
	if s.stage.proc == nil {
		return processor.Progress{}
	}
	return s.stage.proc.Progress()
}

// Conn is how the service reaches its brokers (the embedded one's
// address when it started one).
func (s *Service) Conn() *config.Connection { return s.cluster.Conn }

// Start runs start-up: the status server, the embedded broker when
// KAFKA_BROKERS is empty, reaching the brokers within KAFKA_STARTUP_TIMEOUT,
// then the store and processor. A signal during any of it returns
// ErrStoppedDuringStartup.
func Start(ctx context.Context, o Options) (_ *Service, err error) {
	cfg, log := o.Config, o.Logger
	s := &Service{}
	defer func() {
		if err != nil {
			if ctx.Err() != nil {
				log.Debug("start-up interrupted", "err", err)
				err = ErrStoppedDuringStartup
			}
			err = errors.Join(err, s.Close())
		}
	}()
	reg := newRegistry(cfg, o.Build)
	status := newStartupStatus()
	if cfg.ProbeAddr != "" {
		if s.probe, err = listenKeyProbe(cfg.ProbeAddr, cfg.Key, cfg.RepartitionTopic != "", log); err != nil {
			return nil, err
		}
		go s.probe.Serve()
		log.Info("serving the key probe GET /probe", "addr", s.probe.Addr())
	}
	if cfg.MetricsAddr != "" {
		if s.status, err = listenStatus(cfg.MetricsAddr, reg, status, s.probe.form(), log); err != nil {
			return nil, err
		}
		go s.status.Serve()
		log.Info("serving /metrics, /healthz, /readyz", "addr", s.status.Addr())
	}
	if s.cluster, err = openCluster(ctx, cfg, log, o.Stdout); err != nil {
		return nil, err
	}
	failures := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dedup_startup_connect_failures_total",
		Help: "Start-up attempts to reach the brokers that failed; rises until a broker answers or KAFKA_STARTUP_TIMEOUT ends the process.",
	})
	reg.MustRegister(failures)
	if err = reachBrokers(ctx, reachOptions{Conn: s.cluster.Conn, Timeout: cfg.StartupTimeout, Log: log, Status: status, Failures: failures}); err != nil {
		return nil, err
	}
	status.set("opening the checkpoint store")
	if s.stage, err = newStage(ctx, cfg, s.cluster, reg, log); err != nil {
		return nil, err
	}
	status.running(s.stage.probe())
	if s.probe != nil {
		s.probe.proc.Store(s.stage.proc)
	}
	return s, nil
}

// Close stops the status server and the embedded broker, if any.
func (s *Service) Close() error {
	var errs []error
	if s.stage != nil && s.stage.schemas != nil {
		s.stage.schemas.Close()
	}
	if s.status != nil {
		ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
		defer cancel()
		errs = append(errs, s.status.Shutdown(ctx))
		s.status = nil
	}
	if s.probe != nil {
		ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
		defer cancel()
		errs = append(errs, s.probe.Shutdown(ctx))
		s.probe = nil
	}
	if s.cluster != nil {
		errs = append(errs, s.cluster.Close())
		s.cluster = nil
	}
	return errors.Join(errs...)
}
