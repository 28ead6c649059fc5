package processor

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"dedup/checkpoint"
	"dedup/key"
	"dedup/processor/assignment"
	"dedup/processor/partition"
	"dedup/rotation"
	"dedup/sizing"
)

// Options configure a Processor. Zero durations and sizes take the
// defaults named on each field.
type Options struct {
	Brokers     []string
	Dialer      *kafka.Dialer    // TLS/SASL for the group and the readers (nil = kafka.DefaultDialer)
	Transport   *kafka.Transport // TLS/SASL for the writer and admin requests (nil = kafka.DefaultTransport's settings; the connections are always the processor's own)
	GroupID     string
	InputTopic  string
	OutputTopic string
	// Repartitioned: InputTopic is a repartition topic the re-key hop
	// (processor/repartition) writes: this Processor is the second hop,
	// taking each input record once however often the first hop sent it,
	// its outputs naming the input record in their source headers and the
	// repartition record in the repartition headers
	// (partition.HeaderRepartition*).
	Repartitioned bool
	// RekeyInput, with Repartitioned, is the topic the re-key hop of the
	// same process reads (REPARTITION_HOPS=both): this Processor's cluster
	// watch, the process's only one, covers it too, so that its absence
	// shows in dedup_topic_missing and Readiness. Empty: hop 1 runs
	// elsewhere, or with a watch of its own.
	RekeyInput string
	// DeadLetterTopic receives the records the output refuses for good
	// (too large), with a dedup-error header naming why; empty: such a
	// record is logged, counted and skipped.
	DeadLetterTopic string
	// DroppedTopic, when set, receives the records dropped as duplicates,
	// unchanged, with the source headers and the drop headers
	// (partition.HeaderDrop*), written as exactly once as the output
	// (partition.Drops). DroppedSampleRate, 0 < r <= 1 (0: 1), writes that
	// share of them, chosen by the dedup key's hash.
	DroppedTopic      string
	DroppedSampleRate float64
	StartOffset       int64 // kafka.FirstOffset (default) or kafka.LastOffset: where a partition with no commit and no checkpoint starts

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

// DefaultMaxClockSkew is Options.MaxClockSkew's default: far above the
// disagreement of synchronised clocks (milliseconds) and a producer's
// batching delay, far below the windows the stage is run with, and small
// against the hour-scale mistakes it stops (a wrong time zone, a clock
// reset, seconds read as milliseconds or milliseconds as microseconds).
const DefaultMaxClockSkew = 5 * time.Minute

// validate reports every problem of o at once, and returns o with the
// start offset and balancer name normalised and the filter pair its
// filter options make (the spare pair).
func validate(o Options) (Options, *rotation.Pair, error) {
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
	if o.DroppedTopic != "" && (o.DroppedTopic == o.InputTopic || o.DroppedTopic == o.OutputTopic || o.DroppedTopic == o.DeadLetterTopic) {
		errs = append(errs, fmt.Errorf("drop topic %q is the input, output or dead-letter topic", o.DroppedTopic))
	}
	if o.DroppedSampleRate < 0 || o.DroppedSampleRate > 1 || math.IsNaN(o.DroppedSampleRate) {
		errs = append(errs, fmt.Errorf("drop sample rate %v: want 0 < r <= 1", o.DroppedSampleRate))
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
		return o, nil, fmt.Errorf("validate processor options: %w", err)
	}
	return o, spare, nil
}

func withDefaults(o Options) Options {
	orDefault(&o.SessionTimeout, 30*time.Second)
	orDefault(&o.RebalanceTimeout, o.SessionTimeout)
	orDefault(&o.HeartbeatInterval, min(3*time.Second, max(10*time.Millisecond, o.SessionTimeout/10)))
	orDefault(&o.PartitionWatchInterval, 5*time.Second)
	orDefault(&o.BatchSize, 1000)
	orDefault(&o.BatchBytes, 1<<20)
	orDefault(&o.BatchTimeout, 5*time.Millisecond)
	orDefault(&o.FetchMinBytes, 1)
	orDefault(&o.FetchMaxBytes, 10<<20)
	orDefault(&o.FetchMaxWait, 250*time.Millisecond)
	orDefault(&o.FetchBufferBytes, sizing.DefaultFetchBufferBytes)
	orDefault(&o.CheckpointInterval, 10*time.Second)
	orDefault(&o.ChainRatio, checkpoint.DefaultChainRatio)
	orDefault(&o.RecoveryTimeout, time.Minute)
	orDefault(&o.MaxClockSkew, DefaultMaxClockSkew)
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

// orDefault sets *v to def when it is the zero value.
func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
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

// Sizing: what the options make of the memory a member holds.

// predictMemory sets dedup_memory_predicted_bytes for assigned input
// partitions and outputs output partitions, with the memory model `dedup
// size` prints and the deploy tests hold the manifests to (package sizing),
// so that a dashboard can set the resident memory against it. Without a
// checkpoint store the spare pair is not held.
func (p *Processor) predictMemory(assigned, outputs int) {
	live := sizing.Instance{PairBytes: p.pairBytes, Partitions: assigned, OutputPartitions: outputs,
		FetchBufferBytes: p.o.FetchBufferBytes, ProduceBatchBytes: p.o.BatchBytes}.LiveBytes()
	if p.o.Store == nil {
		live -= p.pairBytes
	}
	p.metrics.MemPredicted.Set(float64(live))
}

// bufferSizes sizes a partition's reader and ack ring when assigned
// partitions share FetchBufferBytes and the output has outputs partitions
// (sizing.PartitionBuffers): the ring never beyond inflightCap.
func (p *Processor) bufferSizes(assigned, outputs int) sizing.Buffers {
	return sizing.PartitionBuffers(p.o.FetchBufferBytes, assigned, p.o.FetchMinBytes, p.o.FetchMaxBytes, p.inflightCap(outputs))
}

// partitionBuffers is bufferSizes for the partitions of the current
// generation (superviseGeneration sets p.assigned before any starts).
func (p *Processor) partitionBuffers(outputs int) sizing.Buffers {
	p.mu.Lock()
	n := p.assigned
	p.mu.Unlock()
	return p.bufferSizes(n, outputs)
}

// inflightCap sizes a partition's ack ring: room for two full writer
// batches per output partition, so batching never starves, bounded so
// a stalled writer holds a bounded amount of memory.
func (p *Processor) inflightCap(outputPartitions int) int {
	return min(1<<18, max(8192, 2*p.o.BatchSize*max(1, outputPartitions)))
}
