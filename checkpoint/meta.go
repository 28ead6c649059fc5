package checkpoint

import (
	"cmp"
	"context"
	"io"
	"time"
)

// Meta describes one snapshot: which input partition it belongs to, which
// input offsets it covers and where the replay scan of the output starts.
type Meta struct {
	Group       string        `json:"group"`
	Topic       string        `json:"topic"`     // input topic
	Partition   int           `json:"partition"` // input partition
	Offset      int64         `json:"offset"`    // next input offset to read: the state covers exactly the inputs below Offset
	OutputTopic string        `json:"output_topic"`
	OutputEnds  map[int]int64 `json:"output_ends"` // output partition -> end offset read before the state was copied, of every output partition
	Created     time.Time     `json:"created"`
	Seq         uint64        `json:"seq"`          // monotonically increasing per partition (set by the store on Save)
	RawBytes    int64         `json:"raw_bytes"`    // uncompressed state size (set by Save)
	StoredBytes int64         `json:"stored_bytes"` // compressed size as stored (set by Save)
	Checksum    uint32        `json:"checksum"`     // CRC-32C of the stored bytes (set by Save)

	// The partition counts of the input and output topics that routed the
	// outputs when the snapshot was taken. Counts only grow, so a restore
	// that sees the same counts knows the routing has not changed since
	// and scans only the output partitions the input partition reaches.
	// Zero in snapshots that predate them.
	InputPartitions  int `json:"input_partitions,omitempty"`
	OutputPartitions int `json:"output_partitions,omitempty"`

	// The drop topic (DROPPED_TOPIC) as OutputEnds and OutputPartitions
	// record the output: its end offsets read before the state was copied
	// and its partition count, where a restore's scan of the drops
	// starts. Empty in snapshots taken without a drop topic.
	DroppedTopic      string        `json:"dropped_topic,omitempty"`
	DroppedEnds       map[int]int64 `json:"dropped_ends,omitempty"`
	DroppedPartitions int           `json:"dropped_partitions,omitempty"`

	// Generation is the consumer-group generation of the member that took
	// the snapshot, Epoch counts restarts of the group's generation
	// numbering (a group deleted and created again starts over at 1): a
	// snapshot ranks by (Epoch, Generation, Seq), so a member that kept
	// writing after it lost the partition never outranks the new owner.
	// Zero for snapshots taken without a group.
	Generation int32  `json:"generation,omitempty"`
	Epoch      uint32 `json:"epoch,omitempty"`

	// A chain is a base (a full snapshot: Base 0) followed by increments
	// that the caller applies in order on top of it. Base is the Seq of the
	// base an increment chains to, Prev the Seq of the piece it directly
	// follows (the base, or the previous increment). Both are 0 for a base
	// and for every snapshot written before chains existed. An increment
	// has its base's Epoch and Generation, whoever wrote it (Owner).
	Base uint64 `json:"base,omitempty"`
	Prev uint64 `json:"prev,omitempty"`
	// Owner is, for an increment written by a member of a newer
	// generation than its base's (the chain continued after the partition
	// moved or stayed through a rebalance), that generation; 0 otherwise.
	// It fences: Save refuses a piece of an older generation once a
	// piece of the partition has a newer Owner (fenceOf), and Owner never
	// decreases along a chain. Generation keeps the base's, so that a
	// release that predates Owner reads the chain as one generation's.
	Owner int32 `json:"owner,omitempty"`
	// ChainBytes is, for an increment, the sum of StoredBytes of the
	// increments of its base up to and including this one (set by Save):
	// what a restore reads beyond the base. 0 for a base.
	ChainBytes int64 `json:"chain_bytes,omitempty"`

	// Writer is the version of the release that wrote the piece (set by
	// Save from internal/buildinfo), so that a release finding what it
	// does not read can name who wrote it. Releases that predate the field
	// ignore it, as every release ignores fields it does not know. Empty
	// in pieces written before it existed.
	Writer string `json:"writer,omitempty"`

	// newer names a field of the stored metadata that this release does
	// not know (set when a store reads it): a newer release wrote it.
	newer string
}

// Increment reports whether m describes an increment (not a base).
func (m Meta) Increment() bool { return m.Base != 0 }

// compareRank orders snapshots of one partition: by Epoch, then
// Generation, then Seq.
func compareRank(a, b Meta) int {
	return cmp.Or(cmp.Compare(a.Epoch, b.Epoch), cmp.Compare(a.Generation, b.Generation), cmp.Compare(a.Seq, b.Seq))
}

// compareFence orders by (Epoch, Generation) only: who may write.
func compareFence(a, b Meta) int {
	return compareRank(Meta{Epoch: a.Epoch, Generation: a.Generation}, Meta{Epoch: b.Epoch, Generation: b.Generation})
}

// fenceOf is the (Epoch, Generation) of the member that wrote m: its
// Owner's for an increment of a continued chain.
func fenceOf(m Meta) Meta {
	return Meta{Epoch: m.Epoch, Generation: max(m.Generation, m.Owner)}
}

// compareWriter orders pieces by the generation of the member that wrote
// them (fenceOf): the fence Save checks.
func compareWriter(a, b Meta) int { return compareFence(fenceOf(a), fenceOf(b)) }

// Store keeps snapshots of partition state, as chains of a base and
// increments (see Meta.Base). Implemented by *FileStore and
// *KafkaStore. Both are safe for concurrent use by several goroutines.
type Store interface {
	// Save compresses and stores state as the newest snapshot of
	// (m.Topic, m.Partition) and returns m with Seq, RawBytes, StoredBytes
	// and Checksum filled in. When Save returns nil the snapshot is durable.
	// Save refuses with a *StaleError when the store already holds a
	// piece of the partition written by a greater (Epoch, Generation)
	// (fenceOf: an increment's Owner counts).
	//
	// With m.Base != 0 the state is an increment of that base: Save refuses
	// with a *ChainError (wrapping ErrChainBroken) unless the base is held
	// and intact as far as its metadata shows, has m's Epoch and
	// Generation, m.Prev is the newest piece of its chain the store
	// holds, m.Owner is not below the Owner of m.Prev, and, for an
	// increment with an Owner, no base newer than m.Base is held; the
	// returned Meta carries ChainBytes.
	Save(ctx context.Context, m Meta, state io.WriterTo) (Meta, error)
	// Load restores the best intact base of (topic, partition), ranked by
	// (Epoch, Generation, Seq), and then its increments in Prev order:
	// decode is called with each piece's Meta and its decompressed,
	// checksum-verified state, the base first. decode of a base must
	// replace the caller's state (a base that fails after an earlier base
	// was decoded is followed by an older base); decode of an increment must
	// apply it whole or not at all (verify, then mutate).
	//
	// Load returns the Meta of the last piece applied (the head). An
	// increment that is damaged or refused by decode is reported as damaged
	// and ends the chain there; increments after a gap in the chain are
	// ignored and reported; the head before them is returned with
	// SourceFallback. A base that fails is reported and the next older base
	// is tried with its chain. Returns ErrNotFound when nothing exists, or a
	// *LoadError listing the bases rejected when every one failed.
	Load(ctx context.Context, topic string, partition int, decode func(Meta, io.Reader) error) (Meta, Source, error)
	// List returns every piece held, with its verdict, ordered by topic,
	// partition, then chain by chain, newest base first: each base followed
	// by its increments in ascending Seq. Increments whose base is not held
	// follow as a chain without its base, placed by their Base. Damaged
	// pieces kept aside by the file store come last in their partition.
	List(ctx context.Context) ([]Entry, error)
	Close() error
}

// Source tells where restored state came from.
type Source string

const (
	SourceLatest   Source = "latest"   // the newest snapshot
	SourceFallback Source = "fallback" // an older snapshot, or a chain cut short: newer pieces were rejected
	SourceEmpty    Source = "empty"    // no usable snapshot: the caller starts with empty state
)

// Entry is one piece (base or increment) as seen by List.
type Entry struct {
	Meta  Meta
	Where string // file path or Kafka manifest key
	Err   error  // nil: checksums verified
	// Damaged: the store found it damaged and keeps it aside for
	// inspection (the file store's damaged/ directory, or a Kafka
	// manifest it left in place); Load never uses it again.
	Damaged bool
	// part is the checkpoint partition the Kafka store found it in: one
	// manifest key can be in two after partitions were added.
	part int
}

// DefaultChainRatio is CHECKPOINT_CHAIN_RATIO's default: a chain's
// increments stay smaller than its base, so a restore reads at most twice
// the base, and a base is written again once as much has changed as it
// holds.
const DefaultChainRatio = 1.0
