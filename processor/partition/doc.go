// Package partition is one input partition's pipeline for one consumer-group
// generation: read → key → pair → write, then acknowledgement tracking,
// checkpoints and commits. Start builds it from a Deps (its only link to
// the rest of the stage: values, and the named interfaces Membership,
// Group, Offsets, Owner and Clock for what it asks of its owner) and
// restores it; Worker.Run consumes until the generation ends and then
// stops it.
//
// What it guarantees:
//
//   - Time is the record timestamp. A key forwarded less than one window
//     earlier is dropped; one forwarded two windows or more earlier is
//     forwarded; in between, either (rotation.Pair decides). A timestamp
//     further ahead of Deps.Clock than Deps.MaxClockSkew, or none (0 or
//     negative), does not move time: the record is decided in the current
//     window, so no record can clear the filters by its timestamp alone.
//   - A record carrying Deps.RetractHeader removes its key from the filters
//     and is itself forwarded. A record without a dedup key is forwarded and
//     counted as unkeyed; nothing is dropped for being malformed.
//   - Forwarded records keep key, value, timestamp and headers and gain the
//     HeaderSource* headers (a record read without a timestamp is written
//     with -1: kafka-go cannot write 0). Router sends them to the input record's
//     partition when both topics have as many partitions, else where the
//     Java client's default partitioner (murmur2 of the key) puts them.
//   - An input offset is committed (Deps.Group) only after every output
//     before it is acknowledged (the ack ring, settled by
//     Completion.Settle); a failed output is never retired, so nothing at or
//     past it is committed or checkpointed, and Run returns the
//     *ProduceError.
//   - With a Store, the partition checkpoints its filters with the input
//     offset they cover, the end offsets of every output partition read
//     before the copy and the partition counts that route the outputs;
//     Start restores the newest valid snapshot, seeks to its offset, scans
//     the output partitions its outputs can have reached since, each from
//     its recorded end, and does not forward again what already landed:
//     after a crash, every first occurrence is in the output once. Without
//     a Store, output is at-least-once.
//   - A snapshot built with other filter options starts new, empty filters
//     at its offset and is kept as a legacy pair (legacy.go): never
//     written, asked after the new pair, aged by the stream's event time
//     (forward only, as the new pair), with keys retracted since kept exactly, saved in every checkpoint (state.go)
//     and released once it would hold no key in its window.
//   - With Deps.Drops every duplicate (a share, by the dedup key's hash)
//     is also written to the drop topic, unchanged, with the source and
//     drop headers, through the ack ring as an output is; checkpoints
//     record the drop topic's ends and a restore scans it, so each drop is
//     there once.
//   - With Deps.Repartitioned the partition reads the repartition topic:
//     each record is turned back into the input record hop 1 copied
//     (the origin trailer), a record at or below its input partition's
//     high-water mark is hop 1's re-send and dropped, the marks are saved
//     in every checkpoint piece and restored with it, and outputs carry
//     the repartition headers besides the source headers naming the input.
//   - Given Deps.Warm (a pair its owner kept from the generation just
//     before, covering exactly the inputs below Deps.Committed), Start
//     resumes with it and its checkpoint chain: no store read, no scan. At
//     the stop, a partition checkpointed and committed exactly at its
//     position hands its pair to Deps.Owner (Owner.Keep).
//   - A chain restored whole, or a kept pair's, goes on with increments
//     of this generation (checkpoint.Meta.Owner): a move writes no base. A
//     restored chain is claimed at Start by an empty increment, which
//     fences the previous owner out of it.
//   - The hot path waits for nothing but the reader: the writer is
//     asynchronous, and a periodic checkpoint costs the worker a flush and
//     an in-memory copy: of the words its pair wrote since the previous
//     checkpoint (an increment), or of the whole pair into the instance's
//     spare (a base: when there is no chain to go on with, after a failure,
//     and once the increments reach Deps.ChainRatio times the base). The saver does
//     the rest in the background. At revocation the stopped worker's own
//     pair (or its increment) is saved, within Deps.StopTimeout.
//
// Memory per partition: its filter pair (and a legacy pair while one is
// kept), an ack ring (48 bytes per output in
// flight, Deps.InflightCap slots), the output header arena, and a reader
// fetch of up to the reader's MaxBytes with a 4096-message queue.
//
// Files: worker.go (the hot path, top to bottom), start.go (restore and
// start), stop.go, checkpointer.go, acks.go (ack ring and the writer's
// completion), arena.go (output headers), router.go (output partition),
// metrics.go (counts and gauges), logattr.go (offset log fields), deps.go
// (what the owner provides, and the interfaces it implements), legacy.go and state.go (filters from before an
// options change, and the snapshot payload), replay.go (where a restore's
// replay scan starts), refuse.go (records the output cannot take),
// skipped.go (input below the log start), origin.go (repartitioned
// records: the origin trailer, high-water marks and their checkpoint section), damage.go (every snapshot
// damaged: CHECKPOINT_ON_DAMAGE), drop.go (duplicates written to
// DROPPED_TOPIC: their headers, sample and replay scan), ask.go (what the filters say of a key,
// never adding it: dedup explain and the key probe).
//
// Concurrency: one worker goroutine owns the reader, pair, arena and ack
// ring tail; one saver goroutine per partition runs its checkpoints and
// reaches the partition only through its checkpointer (copies fixed
// before it starts, concurrency-safe parts, channels), never the Worker;
// Completion.Settle may run on any writer goroutine.
package partition
