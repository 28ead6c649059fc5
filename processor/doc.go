// Package processor is the deduplication stage: it reads an input topic as
// a member of a consumer group, drops records whose dedup key was seen
// within the window, and writes the rest to an output topic.
//
// What it guarantees:
//
//   - Time is the record timestamp. A key forwarded less than one window
//     earlier is dropped; one forwarded two windows or more earlier is
//     forwarded; in between, either (rotation.Pair decides).
//   - A record carrying Options.RetractHeader removes its key from the
//     filters and is itself forwarded. A record without a dedup key is
//     forwarded and counted as unkeyed; nothing is dropped for being
//     malformed.
//   - Forwarded records keep key, value, timestamp and headers and gain the
//     HeaderSource* headers. They go to the input record's partition when
//     both topics have as many partitions, else where the Java client's
//     default partitioner (murmur2 of the key) puts them.
//   - An input offset is committed only after every output before it is
//     acknowledged (RequiredAcks: all). The writer's transport classifies
//     each produce outcome (OutputError, docs/delivery.md): only a request
//     that certainly appended nothing is retried by the writer; one whose
//     outcome is unknown (connection lost after sending, timeout,
//     REQUEST_TIMED_OUT) is never sent again. A record the writer cannot
//     deliver (an unknown outcome, or retries spent) ends the generation
//     like a lost rebalance:
//     nothing at or past it is committed or checkpointed, the writer is
//     closed and replaced (new connections), and the partitions restore in
//     process from their checkpoints with the replay scan, after a pause
//     that grows from 100ms to 5s. Healthy reports ErrRecovering until the
//     failed records are delivered; if that takes longer than
//     Options.RecoveryTimeout, Run returns the *ProduceError. Without a
//     Store the partitions restart from the committed offset, so outputs
//     after it are forwarded again (at-least-once).
//   - A record the output refuses for good (MESSAGE_TOO_LARGE, an
//     authorization failure, a deleted topic) stops its input partition
//     only: nothing at or past it is committed, the partition is logged,
//     counted in dedup_partitions_stalled and Healthy reports
//     ErrOutputRefused, until the record is delivered after the partition
//     is assigned again.
//   - With a Store, each partition checkpoints its filters with the input
//     offset they cover and the output end offsets read before the copy;
//     a restarted member restores the newest valid snapshot, seeks to its
//     offset, scans the output from those end offsets and does not forward
//     again what already landed: after a crash, every first occurrence is
//     in the output once. Without a Store, output is at-least-once.
//   - kafka-go writes no producer ids, so a request whose outcome is unknown
//     is resolved by that replay scan, which is exact when the broker is
//     done with the request by then (docs/delivery.md states when).
//
// Memory: (assigned partitions + 1) × the pair size (rotation.Pair.SizeBytes,
// dedup_filter_bytes) + per partition an ack ring (48 bytes per output in
// flight, at most max(8192, 2 × BatchSize × output partitions) slots) and a
// reader fetch of up to FetchMaxBytes with a 4096-message queue + the
// writer's open batches (BatchBytes per output partition). The "+ 1" is the
// one spare pair a periodic checkpoint copies into: partitions take turns
// with it (a partition whose saver waits for the spare keeps consuming and
// checkpoints when its turn comes), and the final checkpoint at revocation
// saves the stopped worker's own pair. Without a Store there is no spare.
//
// Concurrency: one worker goroutine per assigned partition owns its reader,
// filter pair and ack tracker; the writer and the metrics are shared and
// safe for concurrent use. Processor methods are safe for concurrent use;
// Run is called once.
package processor
