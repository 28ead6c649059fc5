// Package repartition is hop 1 of REPARTITION_TOPIC: it reads the input,
// takes each record's dedup key and sends the record to the repartition
// topic keyed by it, with the origin trailer (partition.Origin)
// that let hop 2 (a processor.Processor with Options.Repartitioned)
// turn it back into the input record and drop re-sends.
//
// What it guarantees:
//
//   - Each input record reaches the repartition topic at least once, with
//     its value, timestamp (a record without one is sent with -1, read
//     back as none) and headers, and an origin trailer at the end of its
//     value naming its input topic, partition and offset and holding its
//     key. A keyed record goes to the partition of its dedup key
//     (murmur2, as the Java client's default partitioner); an unkeyed one
//     to the input partition's number modulo the partition count, so that
//     one input partition's unkeyed records stay in one repartition
//     partition, in order.
//   - Order per input partition within each repartition partition, under
//     retries and lost acknowledgements: a partition's records go out one
//     batch at a time, each repartition partition's share of a batch as
//     requests sent one after the other, never retried; the next batch is
//     sent only once every request of the one before is acknowledged. On
//     any failure (an error or an unknown outcome) the partition drops its
//     connections, waits, and sends again from the first record not acknowledged, after
//     whatever of the failed batch landed. Hop 2 drops what it had taken
//     by its high-water marks.
//   - An input offset is committed (to Options.GroupID, a group of its own)
//     only after everything below it is acknowledged.
//   - Logs that go back are named at error and counted: a repartition
//     partition whose acknowledged base offset is at or below one
//     acknowledged before to the same input partition's worker
//     (Metrics.OutputTruncations), and an input partition whose log ends
//     below the offset a session resumes at (Metrics.InputTruncations),
//     which is then read on from its end once a reset naming it and the
//     end (partition.Origin.Reset) is acknowledged by every repartition
//     partition: hop 2 lowers its marks of the old log, so the new log's
//     records are not taken for re-sends (worker.sendResets).
//
// Files: repartition.go (Options, Run, the group), partition.go (one
// input partition's loop), fetch.go (its fetches), topic.go (creating and
// checking the repartition topic), status.go (readiness and health for the
// probes), route.go (the partition of a dedup key).
package repartition

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/errgroup"

	"dedup/key"
	"dedup/processor/cluster"
)

// Options configure hop 1.
type Options struct {
	Brokers   []string
	Dialer    *kafka.Dialer    // TLS/SASL for the group and the readers (nil = kafka.DefaultDialer)
	Transport *kafka.Transport // TLS/SASL for produce and admin requests (nil = kafka.DefaultTransport's settings)
	// GroupID is hop 1's own consumer group (<GROUP_ID>-repartition): its
	// committed offsets are input offsets, hop 2's repartition offsets.
	GroupID     string
	InputTopic  string
	Topic       string // the repartition topic
	Key         key.Source
	StartOffset int64 // kafka.FirstOffset (default) or kafka.LastOffset

	SessionTimeout    time.Duration // default 30s
	RebalanceTimeout  time.Duration // default SessionTimeout
	HeartbeatInterval time.Duration // default SessionTimeout/10, at most 3s

	// BatchSize is the records of one produce request at most (default
	// 1000); a batch read from an input partition holds BatchSize records
	// per repartition partition at most.
	BatchSize int
	// BatchBytes bounds a batch's keys, values and headers, and one
	// produce request's (default 1 MiB; a larger record goes alone).
	BatchBytes int
	// Compression of the produce requests (PRODUCE_COMPRESSION, as the
	// output's; zero = none).
	Compression   kafka.Compression
	FetchMaxBytes int           // one fetch at most, per input partition held (default 1 MiB)
	FetchMaxWait  time.Duration // default 250ms
	// CommitInterval is how often acknowledged offsets are committed
	// (default 1s); they are also committed at the end of a generation.
	CommitInterval time.Duration
	// RetryBackoff is the pause before a partition sends again after a
	// failed batch (default 200ms, doubling to 5s while failures go on).
	RetryBackoff time.Duration
	// RecoveryTimeout is how long an input partition's batches may keep
	// failing before Status reports hop 1 unhealthy (default 1m).
	RecoveryTimeout time.Duration
	// Status, when set, is kept up to date for the probes.
	Status *Status
	// Cluster, when set, is a cluster watch of the input and the
	// repartition topic that Run runs (hop 1 alone, REPARTITION_HOPS=rekey;
	// with both hops, hop 2's watch speaks for the process). The group is
	// not joined while it names a cause, and Status's readiness names it.
	Cluster *cluster.Watch

	Metrics Metrics
	Logger  *slog.Logger
}

// Metrics are hop 1's series, labelled by input topic and partition. Nil
// vectors are not updated.
type Metrics struct {
	Rekeyed  *prometheus.CounterVec // records acknowledged by the repartition topic
	Restarts *prometheus.CounterVec // failed batches, each followed by a re-send from the first record not acknowledged
	Lag      *prometheus.GaugeVec   // input records not yet acknowledged by the repartition topic
	// Skipped counts input offsets deleted before hop 1 read them
	// (dedup_input_skipped_offsets_total, as hop 2 counts its own).
	Skipped *prometheus.CounterVec
	// InputTruncations counts input partitions found ending below the
	// offset hop 1 was to read next (dedup_input_truncations_total, as
	// hop 2 counts its own).
	InputTruncations *prometheus.CounterVec
	// OutputTruncations counts repartition partitions found truncated
	// under hop 1's acknowledged produces, labelled by the repartition
	// topic and its partition (dedup_output_truncations_total, as hop 2
	// counts its output's).
	OutputTruncations *prometheus.CounterVec
	// Unhealthy is 1 while Status.Healthy fails (batches failing past
	// RecoveryTimeout, or Run failed), else 0.
	Unhealthy prometheus.Gauge
	// The group's, as hop 2 has them; set only where hop 1 runs alone, so
	// that they are this process's group's: input partitions held
	// (dedup_assigned_partitions), generations joined and failed joins.
	Assigned    prometheus.Gauge
	Generations prometheus.Counter
	JoinFails   prometheus.Counter
}

func (o *Options) defaults() error {
	var errs []error
	if len(o.Brokers) == 0 {
		errs = append(errs, errors.New("no brokers"))
	}
	if o.GroupID == "" || o.InputTopic == "" || o.Topic == "" {
		errs = append(errs, errors.New("group, input topic and repartition topic are required"))
	}
	if o.InputTopic != "" && o.InputTopic == o.Topic {
		errs = append(errs, fmt.Errorf("input and repartition topic are both %q", o.Topic))
	}
	if o.StartOffset == 0 {
		o.StartOffset = kafka.FirstOffset
	}
	o.SessionTimeout = cmp.Or(o.SessionTimeout, 30*time.Second)
	o.RebalanceTimeout = cmp.Or(o.RebalanceTimeout, o.SessionTimeout)
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = min(o.SessionTimeout/10, 3*time.Second)
	}
	o.BatchSize = cmp.Or(o.BatchSize, 1000)
	o.BatchBytes = cmp.Or(o.BatchBytes, 1<<20)
	o.FetchMaxBytes = cmp.Or(o.FetchMaxBytes, 1<<20)
	o.FetchMaxWait = cmp.Or(o.FetchMaxWait, 250*time.Millisecond)
	o.CommitInterval = cmp.Or(o.CommitInterval, time.Second)
	o.RetryBackoff = cmp.Or(o.RetryBackoff, 200*time.Millisecond)
	o.RecoveryTimeout = cmp.Or(o.RecoveryTimeout, time.Minute)
	if o.Status == nil {
		o.Status = &Status{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return errors.Join(errs...)
}

// Run is hop 1 as one member of its group, until ctx ends. The
// repartition topic must exist (EnsureTopic). Its error, if any, is also
// Options.Status's.
func Run(ctx context.Context, o Options) (err error) {
	defer func() {
		if err != nil && o.Status != nil {
			o.Status.stopped(err)
			if o.Metrics.Unhealthy != nil {
				o.Metrics.Unhealthy.Set(1)
			}
		}
	}()
	if err := o.defaults(); err != nil {
		return fmt.Errorf("repartition options: %w", err)
	}
	o.Status.mu.Lock()
	o.Status.timeout = o.RecoveryTimeout
	o.Status.cluster = o.Cluster
	o.Status.mu.Unlock()
	if o.Metrics.Unhealthy != nil {
		o.Metrics.Unhealthy.Set(0)
	}
	log := o.Logger.With("hop", "repartition")
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                     o.GroupID,
		Brokers:                o.Brokers,
		Dialer:                 o.Dialer,
		Topics:                 []string{o.InputTopic},
		SessionTimeout:         o.SessionTimeout,
		RebalanceTimeout:       o.RebalanceTimeout,
		HeartbeatInterval:      o.HeartbeatInterval,
		JoinGroupBackoff:       time.Second,
		StartOffset:            o.StartOffset,
		WatchPartitionChanges:  true,
		PartitionWatchInterval: 5 * time.Second,
		ErrorLogger:            cluster.Logger{Log: log.With("component", "group")},
	})
	if err != nil {
		return fmt.Errorf("create repartition consumer group: %w", err)
	}
	// One tracker of repartition truncations per input partition, kept
	// across generations: a partition's produces, in one generation and
	// from one to the next (kafka-go ends a generation only once its
	// workers returned), go one after the other per repartition partition.
	// Other input partitions' workers write to the same repartition
	// partitions at the same time; they only move its log forward.
	truncations := map[int]*cluster.Truncations{}
	eg, egCtx := errgroup.WithContext(ctx)
	eg.Go(func() error {
		<-egCtx.Done()
		return cg.Close()
	})
	eg.Go(func() error {
		o.Status.watch(egCtx, o.Metrics.Unhealthy, log)
		return nil
	})
	if o.Cluster != nil {
		eg.Go(func() error {
			o.Cluster.Run(egCtx)
			return nil
		})
	}
	eg.Go(func() error {
		for {
			// As hop 2: a member that cannot consume (a topic missing, the
			// brokers lost) takes no new generation, so that kafka-go's
			// partition watch does not drive the group through one after
			// another.
			if o.Cluster != nil && o.Cluster.Wait(egCtx) != nil {
				return nil
			}
			gen, err := cg.Next(egCtx)
			switch {
			case egCtx.Err() != nil, errors.Is(err, kafka.ErrGroupClosed):
				return nil
			case err != nil:
				if o.Cluster != nil {
					if cause := o.Cluster.Err(); cause != nil {
						// The watch has logged the cause, once.
						log.Debug("join repartition consumer group", "group", o.GroupID, "err", err, "cause", cause)
						continue
					}
				}
				inc(o.Metrics.JoinFails)
				log.Warn("join repartition consumer group", "group", o.GroupID, "err", err)
				cluster.Sleep(egCtx, time.Second)
				continue
			}
			inc(o.Metrics.Generations)
			runGeneration(&o, log, gen, truncations)
		}
	})
	return eg.Wait()
}

// runGeneration runs every assigned input partition until the generation
// ends.
func runGeneration(o *Options, log *slog.Logger, gen *kafka.Generation, truncations map[int]*cluster.Truncations) {
	held := len(gen.Assignments[o.InputTopic])
	o.Status.joined(gen.ID, held)
	if o.Metrics.Assigned != nil {
		o.Metrics.Assigned.Add(float64(held))
	}
	gen.Start(func(ctx context.Context) {
		<-ctx.Done()
		o.Status.left(gen.ID)
		if o.Metrics.Assigned != nil {
			o.Metrics.Assigned.Sub(float64(held))
		}
	})
	for _, a := range gen.Assignments[o.InputTopic] {
		t, ok := truncations[a.ID]
		if !ok {
			// Its log line names the repartition partition as topic and
			// partition, and the writer as input_partition.
			t = cluster.NewTruncations(o.Topic, "repartition", o.Metrics.OutputTruncations,
				log.With("input_topic", o.InputTopic, "input_partition", a.ID))
			truncations[a.ID] = t
		}
		p := &worker{o: o, gen: gen, part: a.ID, start: a.Offset, truncated: t,
			log: log.With("topic", o.InputTopic, "partition", a.ID, "generation", gen.ID)}
		gen.Start(p.run)
	}
}

// inc increments c unless it is nil (a metric not wired).
func inc(c prometheus.Counter) {
	if c != nil {
		c.Inc()
	}
}
