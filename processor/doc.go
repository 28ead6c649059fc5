// Package processor is the deduplication stage: it reads an input topic as
// a member of a consumer group, drops records whose dedup key was seen
// within the window, and writes the rest to an output topic.
//
// The Processor runs the group: it joins generations, starts one partition
// pipeline (package processor/partition) per assigned partition from an
// explicit partition.Deps (its way back into the Processor is the
// partitionGroup, partitionOffsets and partitionOwner of generation.go and
// the lease, package processor/lease), replaces the output's writer after
// produce failures and shuts down. The other concerns have packages of
// their own: processor/output (the writers and every produce failure),
// processor/cluster (admin requests, the cluster watch, connections),
// processor/lease (membership), processor/metrics, processor/assignment
// (balancers). What one partition guarantees (window
// semantics, retractions, routing, commit after acknowledgement,
// checkpoints and the replay scan) is documented in package partition.
//
// What the Processor guarantees:
//
//   - Every assigned partition of the input topic is consumed by exactly one
//     pipeline per generation; a pipeline that stops ends the generation,
//     and the group rejoins.
//   - The writer's transport classifies each produce outcome (OutputError,
//     docs/delivery.md): only a request that certainly appended nothing is
//     retried by the writer; one whose outcome is unknown (connection lost
//     after sending, timeout, REQUEST_TIMED_OUT) is never sent again. A
//     record the writer cannot deliver (an unknown outcome, or retries
//     spent) ends the generation like a lost rebalance: nothing at or past
//     it is committed or checkpointed, the writer is closed and replaced
//     (new connections), and the partitions restore in process from their
//     checkpoints with the replay scan, which finds what landed by the
//     source headers, after a pause that grows from 100ms to 5s. Healthy
//     reports ErrRecovering until the failed records are delivered; if that
//     takes longer than Options.RecoveryTimeout, Run returns the
//     *ProduceError. Without a Store the partitions restart from the
//     committed offset, so outputs after it are forwarded again
//     (at-least-once).
//   - An output larger than the output limit (BatchBytes, or the output
//     topic's max.message.bytes less the batch header, read at each
//     generation's start) is never written: it goes to DeadLetterTopic,
//     waited for, or is skipped and counted; the partition goes on
//     (output/outputlimit.go, output/deadletter.go, partition/refuse.go).
//     Records the broker refuses though they passed the check end the
//     generation; the next reads the limits again and the partitions
//     concerned write their next outputs alone (output/probe.go), so that
//     the refused record is named and settled the same way.
//   - Any other refusal for good (an authorization failure, a deleted
//     topic) stops its input partition only:
//     nothing at or past it is committed, the partition is logged, counted
//     in dedup_partitions_stalled and Healthy reports ErrOutputRefused,
//     until the record is delivered after the partition is assigned again.
//   - On cancel, Run stops reading, flushes what is in flight, checkpoints,
//     commits, leaves the group and returns nil; the writer is closed last,
//     so nothing this process queued lands after Run returns.
//   - Nothing is produced without the member's lease (lease/lease.go, from
//     its own heartbeats): the writer's transport asks it before each
//     Produce request and its connections before each write of one to the
//     socket (output/fencedconn.go), so a member paused past its session
//     sends nothing after the group moved its partitions (docs/fencing.md).
//   - kafka-go writes no producer ids, so a request whose outcome is unknown
//     is resolved by the replay scan, which is exact when the broker is
//     done with the request by then (docs/delivery.md states when).
//
// Memory: (assigned partitions + 1) × the pair size (rotation.Pair.SizeBytes,
// dedup_filter_bytes) + per partition what package partition lists + the
// writer's open batches (BatchBytes per output partition). The "+ 1" is the
// one spare pair a periodic checkpoint copies into: partitions take turns
// with it (a partition whose saver waits for the spare keeps consuming and
// checkpoints when its turn comes). Without a Store there is no spare.
// Pairs kept across a rebalance (warm.go) are the previous generation's
// partitions' own; those not resumed are released before the next
// generation allocates any.
//
// Files: processor.go (New, Run, readiness, health, progress), options.go
// (Options, their validation and defaults, and what they make of memory:
// a partition's share of FETCH_BUFFER_BYTES, the predicted memory),
// group.go (joining generations, failed joins, replacing the writer after
// a produce failure, the recovery deadline), generation.go (generations
// and the partitions' Deps), commit.go (offset commits with their
// checkpoint's output end offsets), warm.go (pairs kept across a
// rebalance), damaged.go (partitions held back by damaged checkpoints),
// keyask.go (questions about a key, answered by the partitions' workers).
// The dedup key is found by package key.
//
// Concurrency: Processor methods are safe for concurrent use; Run is called
// once. The writer and the metrics are shared by the partitions and safe
// for concurrent use.
package processor
