// Package checkpoint stores snapshots of per-partition filter state together
// with the input offset they cover, restores them, and performs the replay
// scan of the output topic that makes output exactly-once.
//
// The state is opaque: Save streams an io.WriterTo into a standard zstd
// frame (entropy-coded literals: see literals.go for why no match search),
// Load hands the decompressed bytes to a decode func. The package knows
// nothing of the processor's loop or of the filters' format.
//
// Files, one concern each: file.go is the FileStore;
// kafka.go the KafkaStore's Save/Load/List, kafka_keys.go its key scheme,
// kafka_topic.go the topic it creates and checks, kafka_index.go the index
// of a checkpoint partition, kafka_chunks.go the chunk writer,
// kafka_probe.go the write probe of `dedup check`, kafka_moved.go the
// snapshots found away from their checkpoint partition; meta.go a
// snapshot's metadata, errors.go the typed corruption errors; codec.go and
// literals.go the compression; scan.go and fetch.go the replay scan.
//
// Guarantees, for both stores:
//
//   - When Save returns nil the snapshot is durable (file: fsynced file and
//     directory; kafka: acknowledged by all in-sync replicas) and Meta.Seq is
//     greater than that of every snapshot of the partition Save could see.
//   - A snapshot is visible only once complete: a file appears by a hard
//     link of a fully written and fsynced temporary; a Kafka manifest is
//     written after all of its chunks. A crash mid-Save leaves nothing Load
//     would pick up.
//   - decode only ever sees bytes whose checksums (CRC-32C of the stored
//     bytes, and of each chunk in Kafka) match what Save computed.
//   - Load tries the newest snapshot first and falls back to older ones when
//     a snapshot is damaged, truncated, partly missing or refused by decode;
//     it returns ErrNotFound when there is none and a *LoadError naming every
//     rejected snapshot when all fail. It never panics on damaged data.
//   - Concurrent Saves of one partition (goroutines, or processes sharing a
//     directory or topic) never corrupt each other's snapshots; the newest
//     one Load finds is complete.
//   - Snapshots rank by (Epoch, Generation, Seq): a snapshot of an older
//     consumer-group generation never wins Load over a newer one, whatever
//     its Seq, and Save refuses with a *StaleError when the partition
//     already holds a snapshot of a newer generation (checked again just
//     before publishing). See docs/fencing.md.
//   - Save keeps the best Keep snapshots per partition by that rank and
//     removes (tombstones, for Kafka) the others.
//   - A damaged snapshot (a *CorruptError, or a *RefusedError from decode)
//     is logged at warn level naming it when found, handed to the report
//     of WithDamageReport, and kept: the file store moves it to the
//     partition's damaged/ directory (at most 3 kept), the Kafka store
//     leaves its records in place; neither counts it against Keep
//     (damage.go, file_damage.go).
//
// FileStore and KafkaStore are safe for concurrent use and report their
// Kind ("file", "kafka") for metrics labels. ScanOutput is a plain function
// with no state.
package checkpoint
