package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/errgroup"

	"dedup/internal/leader"
	"dedup/processor/assignment"
	"dedup/processor/cluster"
	"dedup/processor/lease"
	"dedup/processor/metrics"
	"dedup/processor/output"
	"dedup/processor/partition"
	"dedup/rotation"
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

// HeaderError names why a record went to the dead-letter topic.
const HeaderError = partition.HeaderError

// Metrics holds every dedup_ family (package processor/metrics).
type Metrics = metrics.Metrics

// NewMetrics creates the dedup_ families and registers them on reg
// (metrics.New).
func NewMetrics(reg prometheus.Registerer) *Metrics { return metrics.New(reg) }

// What the stage's parts report, named here for the stage's users.
type OutputError = output.OutputError // a failed produce request, classified

const (
	OutputRetriable = output.OutputRetriable
	OutputAmbiguous = output.OutputAmbiguous
	OutputRefused   = output.OutputRefused

	OutcomeForwarded    = metrics.OutcomeForwarded
	OutcomeDuplicate    = metrics.OutcomeDuplicate
	OutcomeRetraction   = metrics.OutcomeRetraction
	OutcomeUnkeyed      = metrics.OutcomeUnkeyed
	OutcomeDeadLettered = metrics.OutcomeDeadLettered
	OutcomeRefused      = metrics.OutcomeRefused
	AnomalyFuture       = metrics.AnomalyFuture
	AnomalyMissing      = metrics.AnomalyMissing
)

var (
	ErrAmbiguous          = output.ErrAmbiguous
	ErrRefused            = output.ErrRefused
	ErrOutputRefused      = output.ErrOutputRefused // Healthy: input partitions stopped by a refused output
	ErrRecovering         = output.ErrRecovering    // Healthy: outputs that failed not yet delivered
	ErrFenced             = lease.ErrFenced
	ErrTopicMissing       = cluster.ErrTopicMissing       // Readiness: a topic does not exist
	ErrBrokersUnreachable = cluster.ErrBrokersUnreachable // Readiness: no broker answers
)

// Progress holds cumulative counts of input records by outcome, cheap to
// read at any time.
type Progress struct {
	In, Forwarded, Duplicates, Retractions, Unkeyed uint64
	Suppressed                                      uint64 // replayed records already in the output
	// Records the output refused for good: written to the dead-letter
	// topic, or skipped (refused) without one or when it refused them too.
	DeadLettered, Refused uint64
	// Dropped is how many of the Duplicates were written to the drop
	// topic (Options.DroppedTopic).
	Dropped uint64
}

// Decided is how many of the records read have been decided, whatever the
// outcome.
func (p Progress) Decided() uint64 {
	return p.Written() + p.Duplicates + p.Suppressed + p.DeadLettered + p.Refused
}

// Written is how many records were handed to the output: first
// occurrences, retractions and unkeyed records are all forwarded.
func (p Progress) Written() uint64 { return p.Forwarded + p.Retractions + p.Unkeyed }

// ErrRunTwice is returned by a second call of Run.
var ErrRunTwice = errors.New("processor already run")

// ErrStopUnfinished is what Run returns (wrapped, with each partition's
// cause) when a stop could not checkpoint or commit every partition's
// position: the next start replays from the last commit, exactly-once all
// the same.
var ErrStopUnfinished = errors.New("stop: final checkpoint or commit failed")

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
	kadmin  cluster.Admin // the admin requests on client
	// out holds the writers, made by Run; its writer is replaced after a
	// produce failure (Run's loop) and when the output limit changes (each
	// generation's supervisor).
	out *output.Output
	// failures are the outputs not yet delivered, by input partition
	// (recoveries, isolated and stalled partitions), and the broken
	// writer: the one owner of produce-failure state.
	failures *output.Failures
	// The partition readers' dialer: Options.Dialer with connections that
	// skip needless read-deadline updates (deadlineConn).
	readDialer *kafka.Dialer

	progress partition.Totals

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
	lease atomic.Pointer[lease.Lease]
	clock func() time.Duration

	// crashed makes partitions stop like a killed process: no final
	// checkpoint, no final commit. Tests of restore and replay set it.
	crashed atomic.Bool

	keyAsks keyAsks // the running partitions' workers, for AskKey

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
	// damaged: input partitions not started because every snapshot of
	// each is damaged (CHECKPOINT_ON_DAMAGE=refuse).
	damaged map[int]*partition.DamagedError
	// unknown: input partitions stopped at a repartition record of a
	// newer re-key hop, until hop 2 is upgraded.
	unknown map[int]*partition.UnknownRecordError

	cluster *cluster.Watch // the cluster watch and what it last saw
}

// New validates o, fills defaults and returns a Processor. It does not
// touch Kafka.
func New(o Options) (*Processor, error) {
	o, spare, err := validate(o)
	if err != nil {
		return nil, err
	}
	o = withDefaults(o)
	p := &Processor{
		o:         o,
		log:       o.Logger,
		metrics:   o.Metrics,
		storeKind: storeKind(o.Store),
		flushAt:   min(o.BatchSize, 1024),
		admin:     cluster.NewTransport(o.Transport),

		readDialer: cluster.CoalescingDialer(o.Dialer, cluster.ReadDeadlineSlack(o.FetchMaxWait)),
	}
	p.filter = spare.Options()
	p.pairBytes = int64(spare.SizeBytes())
	p.skew = min(o.MaxClockSkew, p.filter.Window)
	if p.skew < o.MaxClockSkew {
		p.log.Info("max clock skew longer than the window: applied as the window",
			"max_clock_skew", o.MaxClockSkew, "window", p.filter.Window)
	}
	if o.Store != nil {
		p.spares = make(chan *rotation.Pair, 1)
		p.spare = spare
	}
	p.adminRT = leader.Follow(p.admin)
	p.client = &kafka.Client{Addr: kafka.TCP(o.Brokers...), Timeout: 10 * time.Second, Transport: p.adminRT}
	p.kadmin = cluster.Admin{Client: p.client, Input: o.InputTopic, Output: o.OutputTopic, Dropped: o.DroppedTopic}
	p.failures = output.NewFailures(p.log, o.InputTopic, o.OutputTopic, p.metrics.Stalled).WithDropped(o.DroppedTopic)
	p.series = map[int]struct{}{}
	p.kept = map[int]keptPair{}
	watched := cluster.Config{
		Brokers: o.Brokers, Transport: o.Transport,
		Input: o.InputTopic, Output: o.OutputTopic, DeadLetter: o.DeadLetterTopic, Dropped: o.DroppedTopic,
		Log: p.log, Connected: p.metrics.Connected, Missing: p.metrics.Missing,
		Refresh: p.refreshClients,
	}
	if o.Repartitioned && o.RekeyInput != "" {
		// Both hops in one process: the input is hop 1's, and this
		// Processor reads the repartition topic.
		watched.Input, watched.Repartition = o.RekeyInput, o.InputTopic
	}
	p.cluster = cluster.New(watched)
	p.metrics.FPTarget.Set(o.Filter.FPRate)
	p.metrics.ExpectedKeys.Set(float64(o.Filter.ExpectedKeys))
	p.metrics.WindowSeconds.Set(o.Filter.Window.Seconds())
	p.predictMemory(0, 0)
	if p.storeKind != "" {
		p.metrics.CheckpointSeconds.WithLabelValues(p.storeKind)
	}
	// Eager: alerts on produce errors name this series, so it exists at 0
	// before the first failure.
	p.metrics.ProduceErrors.WithLabelValues(o.OutputTopic)
	if o.DroppedTopic != "" {
		p.metrics.ProduceErrors.WithLabelValues(o.DroppedTopic)
	}
	return p, nil
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

	p.out = output.New(p.outputConfig())
	defer func() {
		// Last: Close waits for every batch still in the writer, so nothing
		// this process queued lands after it exits.
		err = errors.Join(err, p.out.Close())
		p.admin.CloseIdleConnections()
	}()

	balancers, sticky, err := assignment.Balancers(p.o.GroupBalancer, p.log.With("component", "group"))
	if err != nil {
		return err
	}
	eg, egCtx := errgroup.WithContext(runCtx)
	eg.Go(func() error {
		p.cluster.Run(egCtx)
		return nil
	})
	eg.Go(func() error {
		p.out.Truncations().Watch(egCtx, p.kadmin.OutputEnds)
		return nil
	})
	eg.Go(func() error {
		p.out.DroppedTruncations().Watch(egCtx, p.kadmin.DroppedEnds) // nil without a drop topic: returns
		return nil
	})
	eg.Go(func() error {
		// No group is joined while a topic is missing or the brokers are
		// lost: a member that cannot consume would only drive generations.
		if p.cluster.Wait(egCtx) != nil {
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
	if err := p.cluster.Err(); err != nil {
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
	case len(p.unknown) > 0:
		return p.unknownErr()
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
	return p.failures.Err()
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
		Dropped:      p.progress.Dropped.Load(),
	}
}
