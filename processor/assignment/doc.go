// Package assignment holds the consumer group balancer that keeps
// partitions with the member that owned them in the previous generation.
//
// kafka-go's consumer groups rebalance eagerly: every membership change
// revokes every partition of every member. With range or round-robin
// assignment most partitions then land on another member and each move
// costs a final checkpoint and a restore. Sticky gives each partition back
// to its previous owner wherever balance allows, so a change costs only
// the partitions that must move.
//
// The previous assignment travels in the member's user data, as in Kafka's
// sticky assignor: each member records what it was assigned at the start
// of every generation (Sticky.Record) and reports it, with the generation
// number, when it joins the next one. The leader decodes every member's
// report; a report that cannot be read is ignored, never an error.
package assignment
