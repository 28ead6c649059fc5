// Package lease is a consumer-group member's proof that it still belongs
// to one generation, from its own heartbeats (docs/fencing.md). The group
// runner makes one per generation and confirms it; the partitions ask it
// before a checkpoint is saved (it is their partition.Membership), and the
// output's transports ask it before each produce request and each write of
// one to the socket, so that a member paused past its session sends
// nothing after the group moved its partitions. Its own package because
// both the group (package processor) and the output (processor/output)
// depend on it, and neither on the other for it: the output is handed the
// fence as a function.
//
// Files: lease.go (Lease, ErrFenced).
//
// Concurrency: a Lease is safe for concurrent use.
package lease
