package partition

import (
	"context"
	"io"
	"log/slog"
	"time"

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

// Keys extracts a record's dedup key; ok is false for a record without one.
type Keys interface {
	Extract(m *kafka.Message) (key []byte, ok bool)
}

// Writer queues outputs; it must not wait for their acknowledgement, which
// arrives through Completion.Settle.
type Writer interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// Store is what a partition needs of a checkpoint store.
type Store interface {
	Save(ctx context.Context, m checkpoint.Meta, state io.WriterTo) (checkpoint.Meta, error)
	Load(ctx context.Context, topic string, partition int, decode func(checkpoint.Meta, io.Reader) error) (checkpoint.Meta, checkpoint.Source, error)
}

// Deps is everything one partition's pipeline uses. The owner builds it
// per assignment; the partition reaches nothing else.
type Deps struct {
	Group       string
	Generation  int32  // the consumer-group generation: snapshots carry it
	Topic       string // input topic
	Partition   int
	Committed   int64 // the group's committed offset, or kafka.FirstOffset/LastOffset when none
	OutputTopic string

	Keys          Keys
	RetractHeader string // header whose presence marks a retraction (empty = none)
	Writer        Writer
	Route         Router
	FlushAt       int // outputs buffered before they go to the writer while behind
	// Limit is the largest output the Writer can deliver: a larger one is
	// refused before it is written, goes to DeadLetter when set (else it
	// is skipped), and OutputRefused is called.
	Limit         Limit
	DeadLetter    DeadLetter
	OutputRefused func()
	// Probe, when set, writes the first IsolateCount outputs at or after
	// input offset IsolateFrom one at a time, each alone and waited for:
	// the broker refused a batch holding one of them, and a refusal of a
	// lone record names it (it is then refused as a too large one is).
	Probe        Writer
	IsolateFrom  int64
	IsolateCount int
	InflightCap  int // ack ring size: outputs in flight at most
	ReadQueue    int // reader QueueCapacity: records fetched ahead (0 = 4096)

	// Reader is the input reader's configuration without topic, partition
	// and loggers (brokers, dialer, fetch sizes).
	Reader kafka.ReaderConfig
	Filter rotation.Options // with defaults, as a pair reports them

	// MaxClockSkew is how far ahead of Now a record's timestamp may be and
	// still move the partition's event time; a record further ahead is
	// decided in the current window. Positive.
	MaxClockSkew time.Duration
	// Now is the skew rule's wall clock, read once per tick (never per
	// record). Required; tests replay input at another time with their own.
	Now func() time.Time

	Store              Store               // nil: no checkpoints, commits only
	Spares             chan *rotation.Pair // the instance's spare pair; nil without a Store
	CheckpointInterval time.Duration
	StopTimeout        time.Duration // bound on the final flush, checkpoint and commit
	// Scan is the replay scan's configuration without the source and
	// range (brokers, transport, output topic, headers).
	Scan checkpoint.ScanOptions
	// OnDamage is CHECKPOINT_ON_DAMAGE: what a partition whose every
	// snapshot is damaged does (OnDamageEmpty when zero).
	OnDamage OnDamage
	// RefusedBefore is set on the processor's retries of a partition
	// refused for damaged snapshots: a Load that then finds none means an
	// operator removed them, and the partition starts empty at the
	// committed offset with the replay scan, as OnDamageEmpty would have.
	RefusedBefore bool

	// Fence returns nil while the member's membership is confirmed
	// (its lease holds), else an error: no checkpoint is saved without it.
	// Confirm confirms the membership now. Nil: no fencing (tests).
	Fence   func() error
	Confirm func(ctx context.Context) error

	// Commit commits offset (the next to read) of the partition, with the
	// output end offsets of the checkpoint at offset (nil without a Store).
	Commit func(ctx context.Context, offset int64, ends map[int]int64) error
	// CommittedEnds reads the committed offset (< 0: none) and the output
	// end offsets recorded with it (nil: none): the replay scan's start
	// when every snapshot is rejected.
	CommittedEnds func(ctx context.Context) (offset int64, ends map[int]int64, err error)
	// OutputEnds reads the end offsets of every output partition of the
	// generation's routing (Route.AllOutputs).
	OutputEnds func(ctx context.Context) (map[int]int64, error)
	// Resolve turns kafka.FirstOffset or kafka.LastOffset into an offset.
	Resolve func(ctx context.Context, logical int64) (int64, error)
	// RecoverAt is the input offset whose output failed in an earlier
	// generation and is not yet delivered, or -1; Delivered is called once
	// its output is acknowledged or found in the output.
	RecoverAt int64
	Delivered func(offset int64)
	// Warm is the partition's pair kept in memory from the generation just
	// before, covering exactly the inputs below Committed: the partition
	// resumes with it, without a restore. nil: restore from the Store.
	Warm *rotation.Pair
	// Keep, when set, is given the pair at the stop when the final
	// checkpoint (or commit) covers exactly the partition's position, with
	// that position.
	Keep func(pair *rotation.Pair, offset int64)
	// Crashed, when it reports true at the stop, makes the partition stop
	// like a killed process: no final checkpoint, no final commit.
	Crashed func() bool

	Metrics *Metrics
	Totals  *Totals
	Log     *slog.Logger
}
