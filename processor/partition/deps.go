package partition

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/checkpoint"
	"dedup/key"
	"dedup/rotation"
)

// Source headers added to every forwarded record.
const (
	HeaderSourceTopic     = "dedup-source-topic"
	HeaderSourcePartition = "dedup-source-partition"
	HeaderSourceOffset    = "dedup-source-offset"
)

// Keys extracts a record's dedup key (key.Source): the key or why there is
// none, with key.Waiting for a record whose schema is not known yet, which
// waits (Wait) and is extracted again.
type Keys interface {
	Extract(m *kafka.Message, a *key.Arena) ([]byte, key.Status)
	Wait(ctx context.Context, m *kafka.Message) error
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

// Membership is the member's proof that it still belongs to the
// generation (the owner's lease). Both methods may be called from the
// saver goroutine.
type Membership interface {
	// Fence returns nil while the membership is confirmed, else an error:
	// no checkpoint is saved without it (a member that may have lost the
	// partition could outrank the new owner's snapshot).
	Fence() error
	// Confirm confirms the membership now (a heartbeat answered).
	Confirm(ctx context.Context) error
}

// Group is the consumer group's committed offsets of this partition.
// Called from the worker and saver goroutines.
type Group interface {
	// Commit commits offset (the next to read), with the output end
	// offsets of the checkpoint at offset (nil without a Store).
	Commit(ctx context.Context, offset int64, ends map[int]int64) error
	// CommittedEnds reads the committed offset (< 0: none) and the output
	// end offsets recorded with it (nil: none): the replay scan's start
	// when every snapshot is rejected.
	CommittedEnds(ctx context.Context) (offset int64, ends map[int]int64, err error)
}

// Offsets reads offsets from the brokers.
type Offsets interface {
	// OutputEnds reads the end offsets of every output partition of the
	// generation's routing (Router.AllOutputs). Called from the saver
	// goroutine too.
	OutputEnds(ctx context.Context) (map[int]int64, error)
	// Bounds reads the input partition's log start and end offsets.
	Bounds(ctx context.Context) (first, end int64, err error)
	// DroppedEnds reads the end offsets of every partition of the drop
	// topic (Drops.Route.AllOutputs); asked only with Deps.Drops. Called
	// from the saver goroutine too.
	DroppedEnds(ctx context.Context) (map[int]int64, error)
}

// Owner is what the partition hands back to the one that started it.
// Called from the worker goroutine only.
type Owner interface {
	// Delivered: the output of Deps.RecoverAt is acknowledged or was found
	// in the output.
	Delivered(offset int64)
	// Keep is given the pair at the stop when the final checkpoint (or
	// commit) covers exactly the partition's position, with that position
	// and the checkpoint chain it continues.
	Keep(k Kept)
	// Crashed, when it reports true at the stop, makes the partition stop
	// like a killed process: no final checkpoint, no final commit.
	Crashed() bool
	// OutputRefused: an output was refused before it was written (too
	// large, or keyless for a compacted topic).
	OutputRefused()
}

// Clock reads the wall clock.
type Clock interface {
	Now() time.Time
}

// systemClock is the default Clock.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Deps is everything one partition's pipeline uses. The owner builds it
// per assignment; the partition reaches nothing else: what it asks of its
// owner goes through the named interfaces above, no closures.
type Deps struct {
	GroupID     string
	Generation  int32  // the consumer-group generation: snapshots carry it
	Topic       string // input topic
	Partition   int
	Committed   int64 // the group's committed offset, or kafka.FirstOffset/LastOffset when none
	OutputTopic string
	// Repartitioned: Topic is the repartition topic, whose records hop 1
	// wrote with the origin trailer (origin.go). The partition takes each
	// input record once however often hop 1 sent it (its high-water marks
	// per input partition, checkpointed with its filters), its outputs
	// carry the input record's key and source headers plus the
	// repartition headers, and Scan must match the repartition headers.
	Repartitioned bool

	Keys          Keys
	RetractHeader string // header whose presence marks a retraction (empty = none)
	Writer        Writer
	Route         Router
	FlushAt       int // outputs buffered before they go to the writer while behind
	// Limit is the largest output the Writer can deliver: a larger one is
	// refused before it is written, goes to DeadLetter when set (else it
	// is skipped), and Owner.OutputRefused is called.
	Limit      Limit
	DeadLetter DeadLetter
	// Drops, when set, is where the records dropped as duplicates are
	// written too (DROPPED_TOPIC, drop.go); nil: they are only counted.
	Drops *Drops
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

	// MaxClockSkew is how far ahead of Clock.Now a record's timestamp may
	// be and still move the partition's event time; a record further ahead
	// is decided in the current window. Positive.
	MaxClockSkew time.Duration
	// Clock is the skew rule's wall clock, read once per tick (never per
	// record). Nil: the system's (time.Now); tests replay input at another
	// time with their own.
	Clock Clock

	Store              Store               // nil: no checkpoints, commits only
	Spares             chan *rotation.Pair // the instance's spare pair; nil without a Store
	CheckpointInterval time.Duration
	// ChainRatio is CHECKPOINT_CHAIN_RATIO: a checkpoint is an increment
	// while the chain's increments are smaller than this times its base,
	// else a new base. Zero or negative: every checkpoint is a base.
	ChainRatio  float64
	StopTimeout time.Duration // bound on the final flush, checkpoint and commit
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

	// Membership fences checkpoint saves. Nil: no fencing (tests).
	Membership Membership
	// Group commits the partition's offsets and reads them back. Required.
	Group Group
	// Offsets reads offsets from the brokers. Required.
	Offsets Offsets
	// Owner is told what the partition hands back. Nil: nothing is handed
	// back (no pair is kept, the stop is never a crash's).
	Owner Owner

	// RecoverAt is the input offset whose output failed in an earlier
	// generation and is not yet delivered, or -1; Owner.Delivered is
	// called once its output is acknowledged or found in the output.
	RecoverAt int64
	// Warm is the partition's pair kept in memory from the generation just
	// before, covering exactly the inputs below Committed: the partition
	// resumes with it, without a restore, and continues its checkpoint
	// chain. nil: restore from the Store.
	Warm *Kept
	// Questions are the owner's questions about keys, each answered from
	// the live filters at the worker's next tick (ask.go). Nil: none.
	Questions <-chan KeyQuestion

	Metrics *Metrics
	Totals  *Totals
	Log     *slog.Logger
}
