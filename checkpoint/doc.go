// Package checkpoint stores snapshots of per-partition filter state together
// with the input offset they cover, restores them, and performs the replay
// scan of the output topic that makes output exactly-once.
//
// A partition's state is stored as chains: a base (a full snapshot) and
// increments, each naming its base (Meta.Base) and the piece it follows
// (Meta.Prev), that the caller applies in order on top of the base. A
// snapshot written before chains existed is a base. Below, "snapshot"
// means a base; "piece" either.
//
// The state is opaque: Save streams an io.WriterTo into a standard zstd
// frame (entropy-coded literals: see literals.go for why no match search),
// Load hands the decompressed bytes to a decode func. The package knows
// nothing of the processor's loop or of the filters' format.
//
// Files, one concern each: chain.go what both stores share of chains (the
// order Load applies increments in, List's order); file.go is the FileStore;
// kafka.go the KafkaStore's Save/Load/List, kafka_keys.go its key scheme,
// kafka_topic.go the topic it creates and checks, kafka_index.go the index
// of a checkpoint partition, kafka_chunks.go the chunk writer,
// kafka_probe.go the write probe of `dedup check`, kafka_moved.go the
// snapshots found away from their checkpoint partition; meta.go a
// piece's metadata, format.go what a store says of a newer release's
// format, errors.go the typed errors; codec.go and
// literals.go the compression; scan.go and fetch.go the replay scan.
//
// Guarantees, for both stores:
//
//   - When Save returns nil the piece is durable (file: fsynced file and
//     directory; kafka: acknowledged by all in-sync replicas) and Meta.Seq is
//     greater than that of every piece of the partition Save could see
//     (bases and increments share the numbers).
//   - A piece is visible only once complete: a file appears by a hard
//     link of a fully written and fsynced temporary; a Kafka manifest is
//     written after all of its chunks. A crash mid-Save leaves nothing Load
//     would pick up.
//   - Save stores an increment only when it continues its chain: its base
//     is held (not pruned, not kept aside as damaged), has the increment's
//     (Epoch, Generation), and Meta.Prev is the newest piece of the chain;
//     otherwise it refuses with a *ChainError (ErrChainBroken) and
//     publishes nothing. Of two increments racing for one place at most one
//     is stored by the file store (checked again after linking) and by one
//     KafkaStore (its Saves of a checkpoint partition are serialised); two
//     KafkaStores of one generation writing one chain (which the group
//     protocol rules out) are checked again before the manifest only when
//     anything else landed, and Load keeps the lower Seq of two increments
//     with one Prev. The returned Meta carries ChainBytes, the stored size
//     of the chain's increments so far.
//   - decode only ever sees bytes whose checksums (CRC-32C of the stored
//     bytes, and of each chunk in Kafka) match what Save computed.
//   - Load tries the newest snapshot first and falls back to older ones when
//     a snapshot is damaged, truncated, partly missing or refused by decode;
//     it returns ErrNotFound when there is none and a *LoadError naming every
//     rejected snapshot when all fail. It never panics on damaged data.
//   - After its base, Load applies the base's increments in Prev order and
//     returns the last piece applied (the head). A damaged or refused
//     increment ends the chain there; increments after a gap or after it
//     are unreachable; each is reported (below) and the head before is
//     returned with SourceFallback. Restoring from that head and replaying
//     the input from its Offset (the replay scan from its OutputEnds) is
//     exactly-once like any fallback.
//   - Concurrent Saves of one partition (goroutines, or processes sharing a
//     directory or topic) never corrupt each other's snapshots; the newest
//     one Load finds is complete.
//   - Snapshots rank by (Epoch, Generation, Seq): a snapshot of an older
//     consumer-group generation never wins Load over a newer one, whatever
//     its Seq, and Save refuses with a *StaleError when the partition
//     already holds a snapshot of a newer generation (checked again just
//     before publishing). See docs/fencing.md.
//   - Save keeps the best Keep snapshots per partition by that rank, with
//     their increments, and removes (tombstones, for Kafka) the others and
//     their increments. Increments do not count against Keep, and those of
//     a kept snapshot are removed only when superseded (below).
//   - A damaged snapshot (a *CorruptError, or a *RefusedError from decode)
//     is logged at warn level naming it when found, handed to the report
//     of WithDamageReport, and kept: the file store moves it to the
//     partition's damaged/ directory (at most 3 kept), the Kafka store
//     leaves its records in place; neither counts it against Keep
//     (damage.go, file_damage.go). So is a damaged increment. An increment
//     Load could not reach (ErrChainGap) is reported likewise but left in
//     place, and removed with its base.
//   - A superseded increment is no damage: one whose base is gone, or, in
//     a chain older than the one a restore takes now, one whose Kafka
//     chunks are gone and every later one of that chain (what a release
//     before chains leaves: it prunes bases by its own count and tombstones
//     the chunks of pieces it cannot see). Save removes them, logged once
//     at info, and reports none. A missing chunk of the chain in use, a
//     checksum mismatch, a truncated piece or unreadable metadata is
//     damage wherever it is.
//   - Save records the writing release's version in Meta.Writer. What a
//     store holds and this release does not read (Kafka records of an
//     unknown kind, files of an unknown kind in a partition's directory,
//     metadata fields it does not know) is logged once per kind at warn,
//     naming the writer when recorded, and ignored.
//
// FileStore and KafkaStore are safe for concurrent use and report their
// Kind ("file", "kafka") for metrics labels. ScanOutput is a plain function
// with no state.
package checkpoint
