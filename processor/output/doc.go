// Package output is everything the stage writes to the output, drop and
// dead-letter topics, and the one owner of produce failures.
//
// Output holds the writers: the one asynchronous writer the partitions
// share (Writer: kafka.Writer → metadata cache → outcomes → kafka.Transport,
// with its own connections, the records of its requests encoded by the
// stage; with DROPPED_TOPIC a drop writer of the stage's own for it on the
// same transport, failing, aborted and closed with the first),
// the dead-letter writer, and the output limits read of the topics at each
// generation's start. A broken writer is closed
// (Abort) and a new one opened (Renew) between generations.
//
// What it guarantees:
//
//   - Every produce outcome is classified (OutputError, docs/delivery.md):
//     only a request that certainly appended nothing is retried by the
//     writer; one whose outcome is unknown, or a refusal of the records
//     themselves, aborts the writer at once, so no later batch lands ahead
//     of the records being resolved.
//   - Nothing is produced without the fence (the member's lease): the
//     writer's transport asks it before each Produce request, its
//     connections before each write of one to the socket.
//   - An output larger than the output limit is never handed to the writer;
//     the dead-letter writer writes one record at a time, each waited for.
//   - An output partition whose offsets go back (truncated, or the topic
//     created again) is reported: the writer's acknowledged base offsets
//     only grow otherwise, and the partition's end never falls to its last
//     acknowledged record (cluster.Truncations, fed here). So is a drop
//     topic partition's (Output.DroppedTruncations).
//
// Failures is the state of the outputs not yet delivered, by input
// partition: recovering (the generation ends, the writer is replaced, the
// partition restores and replays), isolated (it also writes its next
// outputs alone, a Probe, to name a refused record) and stalled (refused
// for good: it stops consuming). Each ends when the partition's output up
// to the offset is delivered or the partition moves to another member.
// It also names the writer a record failed in, the one to replace.
//
// Files: output.go (Config, Output: the writers' owner), writer.go (the
// shared writer and its metadata cache), completion.go (the writer's
// acknowledgements and the last offset of each acknowledged batch,
// routing), produce.go (produce outcomes classified, and
// acknowledged base offsets handed to cluster.Truncations), rawbatch.go
// (a produce request's records encoded as kafka-go encodes them, sent as a
// raw record set), dropwriter.go (the drop topic's writer: batches
// encoded as the partitions hand the drops over, sent, retried and
// completed as kafka.Writer does),
// failures.go (Failures), fencedconn.go (connections fenced per write),
// outputlimit.go (the output limits), deadletter.go (the dead-letter
// writer), probe.go (single outputs written alone).
//
// Concurrency: Writer, Probe and Failures are safe for concurrent use;
// Output's writers are replaced by the group runner's loop and each
// generation's supervisor in turn.
package output
