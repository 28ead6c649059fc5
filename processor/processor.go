package processor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"dedup/checkpoint"
	"dedup/rotation"
)

// Source headers added to every forwarded record.
const (
	HeaderSourceTopic     = "dedup-source-topic"
	HeaderSourcePartition = "dedup-source-partition"
	HeaderSourceOffset    = "dedup-source-offset"
)

// Store is what the processor needs of a checkpoint store
// (*checkpoint.FileStore and *checkpoint.KafkaStore implement it).
type Store interface {
	Save(ctx context.Context, m checkpoint.Meta, state io.WriterTo) (checkpoint.Meta, error)
	Load(ctx context.Context, topic string, partition int, decode func(checkpoint.Meta, io.Reader) error) (checkpoint.Meta, checkpoint.Source, error)
}

// Options configure a Processor. Zero durations and sizes take the
// defaults named on each field.
type Options struct {
	Brokers     []string
	Dialer      *kafka.Dialer    // TLS/SASL for the group and the readers (nil = kafka.DefaultDialer)
	Transport   *kafka.Transport // TLS/SASL for the writer and admin requests (nil = kafka.DefaultTransport)
	GroupID     string
	InputTopic  string
	OutputTopic string
	StartOffset int64 // kafka.FirstOffset (default) or kafka.LastOffset: where a partition with no commit and no checkpoint starts

	SessionTimeout    time.Duration // group session timeout (default 30s)
	RebalanceTimeout  time.Duration // default: SessionTimeout
	HeartbeatInterval time.Duration // default: SessionTimeout/10, at most 3s

	Key           KeySource // required
	RetractHeader string    // header whose presence marks a retraction (empty = no retractions)
	Filter        rotation.Options

	BatchSize    int           // writer batch, records (default 1000)
	BatchBytes   int64         // writer batch, bytes (default 1 MiB)
	BatchTimeout time.Duration // writer linger (default 5ms)

	FetchMinBytes int           // default 1
	FetchMaxBytes int           // default 10 MiB
	FetchMaxWait  time.Duration // default 250ms

	CheckpointInterval time.Duration // checkpoint (or, without a Store, commit) period (default 10s)
	Store              Store         // nil = no checkpoints: at-least-once output

	Metrics *Metrics     // nil = a private registry
	Logger  *slog.Logger // nil = slog.Default()
	Version string       // dedup_build_info{version}; empty = the module's build info
}

// Progress holds cumulative counts of input records by outcome, cheap to
// read at any time.
type Progress struct {
	In, Forwarded, Duplicates, Retractions, Unkeyed uint64
	Suppressed                                      uint64 // replayed records already in the output
}

// ErrRunTwice is returned by a second call of Run.
var ErrRunTwice = errors.New("processor already run")

// Processor deduplicates InputTopic into OutputTopic as one consumer-group
// member. Its methods are safe for concurrent use; Run is called once.
type Processor struct {
	o       Options
	log     *slog.Logger
	metrics *Metrics
	started atomic.Bool

	progress struct {
		in, forwarded, duplicates, retractions, unkeyed, suppressed atomic.Uint64
	}

	mu      sync.Mutex
	healthy error
	ready   bool
}

// New validates o and returns a Processor. It does not touch Kafka.
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
	if o.Key.IsZero() {
		errs = append(errs, errors.New("no key source"))
	}
	// Filter options are validated by rotation.New once rotation lands.
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("validate processor options: %w", err)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	p := &Processor{o: o, log: o.Logger, metrics: o.Metrics}
	return p, nil
}

// Run consumes until ctx is cancelled or a fatal error occurs. On cancel it
// stops reading, flushes what is in flight, checkpoints, commits, leaves
// the group and returns nil.
func (p *Processor) Run(ctx context.Context) error {
	if !p.started.CompareAndSwap(false, true) {
		return ErrRunTwice
	}
	<-ctx.Done()
	return nil
}

// Ready reports whether every assigned partition is restored and consuming.
func (p *Processor) Ready() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ready
}

// Healthy returns nil while the processor runs well, or the error that
// stopped it.
func (p *Processor) Healthy() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.healthy
}

// Progress returns cumulative counts since New.
func (p *Processor) Progress() Progress {
	return Progress{
		In:          p.progress.in.Load(),
		Forwarded:   p.progress.forwarded.Load(),
		Duplicates:  p.progress.duplicates.Load(),
		Retractions: p.progress.retractions.Load(),
		Unkeyed:     p.progress.unkeyed.Load(),
		Suppressed:  p.progress.suppressed.Load(),
	}
}
