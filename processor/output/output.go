package output

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"dedup/processor/cluster"
	"dedup/processor/partition"
)

// Config is what the output writes with and to.
type Config struct {
	Brokers []string
	// Transport's settings (TLS, SASL, dialer) are those of every writer's
	// transport; each writer has its own connections (nil: defaults).
	Transport       *kafka.Transport
	Topic           string // the output topic
	InputTopic      string // for logs
	DeadLetterTopic string // empty: no dead-letter writer
	// DroppedTopic, when set, is written beside the output by the same
	// Writer (Writer.Dropped): the duplicates the partitions drop.
	DroppedTopic string
	BatchSize    int
	BatchBytes   int64 // PRODUCE_BATCH_BYTES; the writer's batches are at most Limit().Bytes
	BatchTimeout time.Duration
	Compression  kafka.Compression
	Admin        cluster.Admin // reads the topics' limits
	// Fence is asked right before each produce request and each write of
	// one to the socket: the member's lease (docs/fencing.md).
	Fence func() error
	// Plain hands produce outcomes to kafka.Writer unclassified (its blind
	// retries) and asks no fence: kafka-go's own produce path, the
	// reference of the produce-path benchmark only.
	Plain bool

	OutputErrors  *prometheus.CounterVec // dedup_output_errors_total{kind}
	Truncations   *prometheus.CounterVec // dedup_output_truncations_total{topic,partition}; nil: not checked
	ProduceErrors prometheus.Counter     // dedup_produce_errors_total{topic}
	DroppedErrors prometheus.Counter     // dedup_produce_errors_total{topic} of DroppedTopic; with it only
	Latency       prometheus.Observer    // dedup_end_to_end_latency_seconds
	Log           *slog.Logger
	Failures      *Failures // where the writer's failures are recorded

	settle    partition.Completion
	truncated *cluster.Truncations // shared by every writer to the output topic
	// droppedTruncated is the same check of DroppedTopic (nil without).
	droppedTruncated *cluster.Truncations
}

// Output owns the stage's writers: the one asynchronous writer the
// partitions share, the dead-letter writer, and the output limits read of
// the topics. Its writer is replaced after a produce failure (Abort, then
// Renew) and when the output limit changes (ApplyLimits). The group
// runner's loop and each generation's supervisor take turns calling it;
// Transport and Replaced are safe for concurrent use.
type Output struct {
	c      Config
	w      *Writer
	dlq    *deadLetter // nil without DeadLetterTopic, or until ApplyLimits
	limits topicLimits
	// transport is the current writer's, for the cluster watch to refresh.
	transport atomic.Pointer[kafka.Transport]
	replaced  atomic.Uint64 // writers replaced after produce failures (tests observe recoveries)
}

// New opens the output's writer.
func New(c Config) *Output {
	c.settle = newCompletion(c.Latency)
	c.truncated = cluster.NewTruncations(c.Topic, "output", c.Truncations, c.Log)
	if c.DroppedTopic != "" {
		c.droppedTruncated = cluster.NewTruncations(c.DroppedTopic, "drop topic", c.Truncations, c.Log)
	}
	o := &Output{c: c}
	o.setWriter()
	return o
}

// Truncations is the check of the output topic's partitions that every
// writer to it feeds (nil: not checked).
func (o *Output) Truncations() *cluster.Truncations { return o.c.truncated }

// DroppedTruncations is the same check of the drop topic's partitions
// (nil: no drop topic, or not checked).
func (o *Output) DroppedTruncations() *cluster.Truncations { return o.c.droppedTruncated }

// Settle is how the writer's acknowledgements settle the partitions' ack
// slots (partition.Completion).
func (o *Output) Settle() partition.Completion { return o.c.settle }

func (o *Output) setWriter() {
	o.w = newWriter(&o.c, o.Limit().Bytes, o.DroppedLimit().Bytes)
	o.transport.Store(o.w.transport)
}

// Writer is the current writer.
func (o *Output) Writer() *Writer { return o.w }

// DeadLetter is the dead-letter writer, nil without one.
func (o *Output) DeadLetter() partition.DeadLetter {
	if o.dlq == nil {
		return nil
	}
	return o.dlq
}

// Transport is the current writer's transport.
func (o *Output) Transport() *kafka.Transport { return o.transport.Load() }

// Replaced counts the writers replaced after produce failures.
func (o *Output) Replaced() uint64 { return o.replaced.Load() }

// Abort closes the broken writer: what it has not sent fails at once,
// what it sent is waited for, so that nothing it holds lands after the
// next restore's replay scan.
func (o *Output) Abort() {
	o.w.abort()
	if err := o.w.close(); err != nil {
		o.c.Log.Debug("close broken writer", "err", err) // the failure itself was logged
	}
}

// Renew opens a new writer after Abort, and a new dead-letter writer,
// whose pooled connections may be as dead as the writer's.
func (o *Output) Renew() {
	o.setWriter()
	if o.dlq != nil {
		o.dlq.close()
		o.dlq = o.newDeadLetter()
	}
	o.replaced.Add(1)
}

// Close waits for the writer's batches and closes every writer. Last:
// nothing this process queued lands after it.
func (o *Output) Close() error {
	err := o.w.close()
	if o.dlq != nil {
		o.dlq.close()
	}
	o.c.truncated.Forget()
	o.c.droppedTruncated.Forget()
	return err
}

// ErrRecovering is what Failures.Err reports (wrapped, with the
// *ProduceError) while outputs that failed have not yet been delivered.
var ErrRecovering = errors.New("recovering from a produce failure")

// ProduceError is a forwarded record the writer failed to deliver.
type ProduceError = partition.ProduceError
