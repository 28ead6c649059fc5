package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/errgroup"

	"dedup/checkpoint"
	"dedup/internal/leader"
	"dedup/key"
	"dedup/processor/assignment"
	"dedup/processor/partition"
	"dedup/rotation"
	"dedup/sizing"
)

// Source headers added to every forwarded record.
const (
	HeaderSourceTopic     = partition.HeaderSourceTopic
	HeaderSourcePartition = partition.HeaderSourcePartition
	HeaderSourceOffset    = partition.HeaderSourceOffset
)

// Store is what the processor needs of a checkpoint store
// (*checkpoint.FileStore and *checkpoint.KafkaStore implement it). A store
// with a Kind() string method names its dedup_checkpoint_duration_seconds
// series; others are "other".
type Store = partition.Store

// ProduceError is a forwarded record the writer failed to deliver.
type ProduceError = partition.ProduceError

// Options configure a Processor. Zero durations and sizes take the
// defaults named on each field.
type Options struct {
	Brokers     []string
	Dialer      *kafka.Dialer    // TLS/SASL for the group and the readers (nil = kafka.DefaultDialer)
	Transport   *kafka.Transport // TLS/SASL for the writer and admin requests (nil = kafka.DefaultTransport)
	GroupID     string
	InputTopic  string
	OutputTopic string
	// DeadLetterTopic receives the records the output refuses for good
	// (too large), with a dedup-error header naming why; empty: such a
	// record is logged, counted and skipped.
	DeadLetterTopic string
	StartOffset     int64 // kafka.FirstOffset (default) or kafka.LastOffset: where a partition with no commit and no checkpoint starts

	SessionTimeout    time.Duration // group session timeout (default 30s)
	RebalanceTimeout  time.Duration // default: SessionTimeout
	HeartbeatInterval time.Duration // default: SessionTimeout/10, at most 3s
	// GroupBalancer names how the group assigns input partitions, in any
	// case: "sticky" (default), "range" or "roundrobin" (assignment.Balancers).
	GroupBalancer string
	// PartitionWatchInterval is how often the member checks the input
	// topic's partition count; partitions added to it start a rebalance
	// that assigns them (default 5s).
	PartitionWatchInterval time.Duration

	Key           key.Source // required
	RetractHeader string     // header whose presence marks a retraction (empty = no retractions)
	Filter        rotation.Options

	// MaxClockSkew is how far ahead of the wall clock a record's timestamp
	// may be and still move its partition's event time (default
	// DefaultMaxClockSkew). A record stamped further ahead is decided in
	// the current window, as a record without timestamp is, and counted in
	// dedup_timestamp_anomalies_total{kind="future"}. A skew longer than
	// the window is applied as the window, so that no record the rule lets
	// through moves the window by more than one rotation.
	MaxClockSkew time.Duration
	// Now is the wall clock of the skew rule (nil = time.Now). Read once
	// per partition tick, never per record.
	Now func() time.Time

	BatchSize    int           // writer batch, records (default 1000)
	BatchBytes   int64         // writer batch, bytes (default 1 MiB)
	BatchTimeout time.Duration // writer linger (default 5ms)
	// Compression of the writer's batches (zero = none). The broker keeps
	// a batch as it was produced, so the codec also sets the output's
	// storage and its consumers' decoding cost.
	Compression kafka.Compression

	FetchMinBytes int           // default 1
	FetchMaxBytes int           // one fetch at most (default 10 MiB)
	FetchMaxWait  time.Duration // default 250ms
	// FetchBufferBytes is what the assigned partitions together hold of
	// records fetched but not yet produced and acknowledged: each
	// partition's reader queue, fetch size and ack ring are sized from its
	// share, at least sizing.MinPartitionShare (default
	// sizing.DefaultFetchBufferBytes).
	FetchBufferBytes int64

	CheckpointInterval time.Duration // checkpoint (or, without a Store, commit) period (default 10s)
	// ChainRatio is how large a chain's increments grow, relative to its
	// base, before a checkpoint writes a new base (CHECKPOINT_CHAIN_RATIO;
	// 0: checkpoint.DefaultChainRatio; negative: every checkpoint is a base).
	ChainRatio float64
	Store      Store // nil = no checkpoints: at-least-once output
	// OnDamage is what a partition whose every snapshot is damaged does
	// (CHECKPOINT_ON_DAMAGE; default partition.OnDamageEmpty).
	OnDamage partition.OnDamage

	// RecoveryTimeout bounds how long outputs may stay undeliverable: after
	// a produce failure the stage replaces its writer and restores the
	// partitions in process, again and again with a growing pause, until
	// the failed records are delivered; if that has not happened after
	// RecoveryTimeout, Run returns the *ProduceError (default 1m).
	RecoveryTimeout time.Duration

	Metrics *Metrics     // nil = a private registry
	Logger  *slog.Logger // nil = slog.Default()
}

// Progress holds cumulative counts of input records by outcome, cheap to
// read at any time.
type Progress struct {
	In, Forwarded, Duplicates, Retractions, Unkeyed uint64
	Suppressed                                      uint64 // replayed records already in the output
	// Records the output refused for good: written to the dead-letter
	// topic, or skipped (refused) without one or when it refused them too.
	DeadLettered, Refused uint64
}

// Decided is how many of the records read have been decided, whatever the
// outcome.
func (p Progress) Decided() uint64 {
	return p.Written() + p.Duplicates + p.Suppressed + p.DeadLettered + p.Refused
}

// Written is how many records were handed to the output: first
// occurrences, retractions and unkeyed records are all forwarded.
func (p Progress) Written() uint64 { return p.Forwarded + p.Retractions + p.Unkeyed }

// DefaultMaxClockSkew is Options.MaxClockSkew's default: far above the
// disagreement of synchronised clocks (milliseconds) and a producer's
// batching delay, far below the windows the stage is run with, and small
// against the hour-scale mistakes it stops (a wrong time zone, a clock
// reset, seconds read as milliseconds or milliseconds as microseconds).
const DefaultMaxClockSkew = 5 * time.Minute

// ErrRunTwice is returned by a second call of Run.
var ErrRunTwice = errors.New("processor already run")

// ErrStopUnfinished is what Run returns (wrapped, with each partition's
// cause) when a stop could not checkpoint or commit every partition's
// position: the next start replays from the last commit, exactly-once all
// the same.
var ErrStopUnfinished = errors.New("stop: final checkpoint or commit failed")

// ErrRecovering is what Healthy reports (wrapped, with the *ProduceError)
// while outputs that failed have not yet been delivered.
var ErrRecovering = errors.New("recovering from a produce failure")

// Processor deduplicates InputTopic into OutputTopic as one consumer-group
// member. Its methods are safe for concurrent use; Run is called once.
type Processor struct {
	o         Options
	log       *slog.Logger
	metrics   *Metrics
	storeKind string        // dedup_checkpoint_duration_seconds{store}
	skew      time.Duration // o.MaxClockSkew, at most the window
	flushAt   int
	started   atomic.Bool
	filter    rotation.Options // o.Filter with defaults, as a pair reports it
	pairBytes int64            // one partition's filter pair (rotation.Pair.SizeBytes)

	// spares holds the one spare filter pair of the instance (with a
	// Store): a periodic checkpoint copies a partition's pair into it and
	// saves the copy in the background. Partitions take turns: a saver
	// waits for the pair (in the background, the worker never waits) and
	// gives it back once its save has finished or failed. Memory is thus
	// (assigned partitions + 1) pairs, not 2 per partition.
	spares chan *rotation.Pair
	// spare is the pair Run warms and then puts into spares.
	spare *rotation.Pair

	client *kafka.Client    // admin requests: metadata, list offsets
	admin  *kafka.Transport // the client's own connections, dropped on recovery
	// adminRT is admin as the client and the replay scan use it: its
	// cached metadata dropped when a leader moves.
	adminRT *leader.Transport
	out     *output // the writer of the next generation; Run replaces it after a produce failure
	// limits and dlq are read and replaced at the start of each generation
	// by its supervisor (applyLimits); dlq is nil without DeadLetterTopic.
	limits topicLimits
	dlq    *deadLetter
	// The partition readers' dialer: Options.Dialer with connections that
	// skip needless read-deadline updates (deadlineConn).
	readDialer *kafka.Dialer

	progress partition.Totals

	replaced atomic.Uint64 // writers replaced after produce failures (tests observe recoveries)

	stalls stalls // input partitions stopped by a refused output
	// plainProduce hands produce outcomes to kafka.Writer unclassified
	// (its blind retries) and asks no lease before producing: kafka-go's
	// own produce path, the reference of the produce-path benchmark only.
	plainProduce bool

	commitMu       sync.Mutex  // one offset commit at a time
	metadataWarned atomic.Bool // a commit went without its output ends (logged once)

	// lease is the current generation's proof of membership, nil between
	// generations: the writer sends nothing without a valid one
	// (fenceProduce). clock is the lease's monotonic clock (nil: the
	// real one; tests move it).
	lease atomic.Pointer[lease]
	clock func() time.Duration

	settle partition.Completion // how the writer's acknowledgements settle

	// crashed makes partitions stop like a killed process: no final
	// checkpoint, no final commit. Tests of restore and replay set it.
	crashed atomic.Bool

	mu     sync.Mutex
	series map[int]struct{} // input partitions whose per-partition series exist
	// kept holds, between two generations, the pairs of the partitions
	// this member gave up cleanly (warm.go).
	kept  map[int]keptPair
	fatal error
	// unfinished are the partitions whose final checkpoint or commit
	// failed while Run's context was ending (the stop), reported by Run.
	unfinished []error
	stopping   context.Context // Run's own ctx: done when the stop began
	cancel     context.CancelFunc
	inGen      bool
	assigned   int
	readyN     int
	stuck      recovery
	// damaged: input partitions not started because every snapshot of
	// each is damaged (CHECKPOINT_ON_DAMAGE=refuse).
	damaged map[int]*partition.DamagedError
	// isolateAt: input partition -> offset from which its outputs are
	// written alone after the broker refused a batch (isolate), until
	// delivered or unassigned.
	isolateAt map[int]int64

	cluster *clusterState // what the cluster watch last saw (cluster.go)
	// outTransport is the current writer's transport, for the cluster
	// watch to refresh (p.out belongs to Run's loop).
	outTransport atomic.Pointer[kafka.Transport]
}

// New validates o, fills defaults and returns a Processor. It does not
// touch Kafka.
func New(o Options) (*Processor, error) {
	var errs []error
	if len(o.Brokers) == 0 {
		errs = append(errs, errors.New("no brokers"))
	}
	if o.GroupID == "" {
		errs = append(errs, errors.New("empty group id"))
	}
	if o.InputTopic == "" {
		errs = append(errs, errors.New("empty input topic"))
	}
	if o.OutputTopic == "" {
		errs = append(errs, errors.New("empty output topic"))
	}
	if o.InputTopic != "" && o.InputTopic == o.OutputTopic {
		errs = append(errs, fmt.Errorf("input and output topic are both %q", o.InputTopic))
	}
	if o.DeadLetterTopic != "" && (o.DeadLetterTopic == o.InputTopic || o.DeadLetterTopic == o.OutputTopic) {
		errs = append(errs, fmt.Errorf("dead-letter topic %q is the input or output topic", o.DeadLetterTopic))
	}
	if o.Key.IsZero() {
		errs = append(errs, errors.New("no key source"))
	}
	spare, err := rotation.New(o.Filter) // validates the options; kept as the spare pair
	if err != nil {
		errs = append(errs, err)
	}
	if o.StartOffset == 0 {
		o.StartOffset = kafka.FirstOffset
	}
	if o.GroupBalancer == "" {
		o.GroupBalancer = assignment.DefaultName
	}
	o.GroupBalancer = strings.ToLower(o.GroupBalancer)
	if _, _, err := assignment.Balancers(o.GroupBalancer, nil); err != nil {
		errs = append(errs, err)
	}
	if o.StartOffset != kafka.FirstOffset && o.StartOffset != kafka.LastOffset {
		errs = append(errs, fmt.Errorf("start offset %d: want kafka.FirstOffset or kafka.LastOffset", o.StartOffset))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"session timeout", o.SessionTimeout}, {"rebalance timeout", o.RebalanceTimeout},
		{"heartbeat interval", o.HeartbeatInterval}, {"batch timeout", o.BatchTimeout},
		{"fetch max wait", o.FetchMaxWait}, {"checkpoint interval", o.CheckpointInterval},
		{"recovery timeout", o.RecoveryTimeout}, {"max clock skew", o.MaxClockSkew},
		{"partition watch interval", o.PartitionWatchInterval},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s %v: want >= 0", d.name, d.v))
		}
	}
	if o.BatchSize < 0 || o.BatchBytes < 0 || o.FetchMinBytes < 0 || o.FetchMaxBytes < 0 || o.FetchBufferBytes < 0 {
		errs = append(errs, errors.New("negative batch or fetch size"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("validate processor options: %w", err)
	}
	o = withDefaults(o)
	p := &Processor{
		o:         o,
		log:       o.Logger,
		metrics:   o.Metrics,
		storeKind: storeKind(o.Store),
		flushAt:   min(o.BatchSize, 1024),
		admin:     newTransport(o),

		readDialer: coalescingDialer(o.Dialer, readDeadlineSlack(o.FetchMaxWait)),
	}
	p.filter = spare.Options()
	p.pairBytes = int64(spare.SizeBytes())
	p.skew = min(o.MaxClockSkew, p.filter.Window)
	if p.skew < o.MaxClockSkew {
		p.log.Info("max clock skew longer than the window: applied as the window",
			"max_clock_skew", o.MaxClockSkew, "window", p.filter.Window)
	}
	p.settle = p.newCompletion()
	if o.Store != nil {
		p.spares = make(chan *rotation.Pair, 1)
		p.spare = spare
	}
	p.adminRT = leader.Follow(p.admin)
	p.client = &kafka.Client{Addr: kafka.TCP(o.Brokers...), Timeout: 10 * time.Second, Transport: p.adminRT}
	p.stuck.failedAt = map[int]int64{}
	p.isolateAt = map[int]int64{}
	p.series = map[int]struct{}{}
	p.kept = map[int]keptPair{}
	p.cluster = newClusterState()
	for _, t := range p.watchedTopics() {
		p.metrics.cluster.missing.WithLabelValues(t) // alerts name these series: they exist at 0
	}
	p.metrics.fpTarget.Set(o.Filter.FPRate)
	p.metrics.expectedKeys.Set(float64(o.Filter.ExpectedKeys))
	p.metrics.windowSeconds.Set(o.Filter.Window.Seconds())
	p.predictMemory(0, 0)
	if p.storeKind != "" {
		p.metrics.checkpointSeconds.WithLabelValues(p.storeKind)
	}
	// Eager: alerts on produce errors name this series, so it exists at 0
	// before the first failure.
	p.metrics.produceErrors.WithLabelValues(o.OutputTopic)
	return p, nil
}

func withDefaults(o Options) Options {
	if o.SessionTimeout == 0 {
		o.SessionTimeout = 30 * time.Second
	}
	if o.RebalanceTimeout == 0 {
		o.RebalanceTimeout = o.SessionTimeout
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = min(3*time.Second, max(10*time.Millisecond, o.SessionTimeout/10))
	}
	if o.PartitionWatchInterval == 0 {
		o.PartitionWatchInterval = 5 * time.Second
	}
	if o.BatchSize == 0 {
		o.BatchSize = 1000
	}
	if o.BatchBytes == 0 {
		o.BatchBytes = 1 << 20
	}
	if o.BatchTimeout == 0 {
		o.BatchTimeout = 5 * time.Millisecond
	}
	if o.FetchMinBytes == 0 {
		o.FetchMinBytes = 1
	}
	if o.FetchMaxBytes == 0 {
		o.FetchMaxBytes = 10 << 20
	}
	if o.FetchMaxWait == 0 {
		o.FetchMaxWait = 250 * time.Millisecond
	}
	if o.FetchBufferBytes == 0 {
		o.FetchBufferBytes = sizing.DefaultFetchBufferBytes
	}
	if o.CheckpointInterval == 0 {
		o.CheckpointInterval = 10 * time.Second
	}
	if o.ChainRatio == 0 {
		o.ChainRatio = checkpoint.DefaultChainRatio
	}
	if o.RecoveryTimeout == 0 {
		o.RecoveryTimeout = time.Minute
	}
	if o.MaxClockSkew == 0 {
		o.MaxClockSkew = DefaultMaxClockSkew
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	return o
}

// storeKind names a store for the {store} label: the kind it reports.
func storeKind(s Store) string {
	if s == nil {
		return ""
	}
	if k, ok := s.(interface{ Kind() string }); ok {
		return k.Kind()
	}
	return "other"
}

// Run consumes until ctx is cancelled or a fatal error occurs. On cancel it
// stops reading, flushes what is in flight, checkpoints, commits, leaves
// the group and returns nil.
//
// A record the writer fails to deliver (after its retries) ends the
// generation as a rebalance does: the partitions stop without committing or
// checkpointing past it, the writer is closed (Close waits for every batch
// in it) and replaced by one with new connections, and after a pause the
// next generation restores the partitions from their checkpoints with the
// replay scan (without a Store: from the committed offsets, so outputs
// after the commit are forwarded again). Healthy reports ErrRecovering
// until the failed records are delivered; if that takes longer than
// Options.RecoveryTimeout, Run returns the *ProduceError, having committed
// only what precedes it, so a restart replays from there and loses nothing.
func (p *Processor) Run(ctx context.Context) (err error) {
	if !p.started.CompareAndSwap(false, true) {
		return ErrRunTwice
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.mu.Lock()
	p.cancel = cancel
	p.stopping = ctx
	p.mu.Unlock()

	p.out = p.newOutput()
	defer func() {
		// Last: Close waits for every batch still in the writer, so nothing
		// this process queued lands after it exits.
		err = errors.Join(err, p.out.close())
		if p.dlq != nil {
			p.dlq.close()
		}
		p.admin.CloseIdleConnections()
	}()

	balancers, sticky, err := assignment.Balancers(p.o.GroupBalancer, p.log.With("component", "group"))
	if err != nil {
		return err
	}
	eg, egCtx := errgroup.WithContext(runCtx)
	eg.Go(func() error {
		p.watchCluster(egCtx)
		return nil
	})
	eg.Go(func() error {
		// No group is joined while a topic is missing or the brokers are
		// lost: a member that cannot consume would only drive generations.
		if p.cluster.wait(egCtx) != nil {
			return nil
		}
		return p.consume(egCtx, balancers, sticky)
	})
	err = eg.Wait()
	p.forgetSeries(nil) // the member owns no partition any more
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.kept)
	if p.fatal != nil {
		return p.fatal
	}
	if err == nil && ctx.Err() != nil && len(p.unfinished) > 0 {
		return fmt.Errorf("%w: %w", ErrStopUnfinished, errors.Join(p.unfinished...))
	}
	return err
}

// Ready reports whether the member is in a generation and every partition
// assigned to it is restored and consuming.
func (p *Processor) Ready() bool { return p.Readiness() == nil }

// Readiness is nil when Ready, else why not: the brokers lost or a topic
// missing (wrapping ErrBrokersUnreachable or ErrTopicMissing), the error
// that stopped the processor, no generation yet, partitions refused for
// damaged checkpoints (wrapping ErrCheckpointDamaged), or partitions still
// restoring.
func (p *Processor) Readiness() error {
	if err := p.cluster.err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.fatal != nil:
		return p.fatal
	case !p.inGen:
		return errors.New("not in a consumer-group generation")
	case len(p.damaged) > 0:
		return p.damagedErr()
	case p.readyN != p.assigned:
		return fmt.Errorf("%d of %d assigned partitions consuming", p.readyN, p.assigned)
	}
	return nil
}

// Healthy returns nil while the processor runs well; the error that
// stopped it; while outputs that failed are not yet delivered, an error
// wrapping ErrRecovering and the *ProduceError; while input partitions are
// stopped by a refused output, an error wrapping ErrOutputRefused and the
// *ProduceError.
func (p *Processor) Healthy() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fatal != nil {
		return p.fatal
	}
	if !p.stuck.since.IsZero() {
		return fmt.Errorf("%w since %s: %w", ErrRecovering, p.stuck.since.Format(time.RFC3339), p.stuck.err)
	}
	return p.stalls.err()
}

// Progress returns cumulative counts since New.
func (p *Processor) Progress() Progress {
	return Progress{
		In:          p.progress.In.Load(),
		Forwarded:   p.progress.Forwarded.Load(),
		Duplicates:  p.progress.Duplicates.Load(),
		Retractions: p.progress.Retractions.Load(),
		Unkeyed:     p.progress.Unkeyed.Load(),
		Suppressed:  p.progress.Suppressed.Load(),

		DeadLettered: p.progress.DeadLettered.Load(),
		Refused:      p.progress.Refused.Load(),
	}
}

// predictMemory sets dedup_memory_predicted_bytes for assigned input
// partitions and outputs output partitions, with the memory model `dedup
// size` prints and the deploy tests hold the manifests to (sizing),
// so that a dashboard can set the resident memory against it. Without a
// checkpoint store the spare pair is not held.
func (p *Processor) predictMemory(assigned, outputs int) {
	live := sizing.Instance{PairBytes: p.pairBytes, Partitions: assigned, OutputPartitions: outputs,
		FetchBufferBytes: p.o.FetchBufferBytes, ProduceBatchBytes: p.o.BatchBytes}.LiveBytes()
	if p.o.Store == nil {
		live -= p.pairBytes
	}
	p.metrics.memPredicted.Set(float64(live))
}
