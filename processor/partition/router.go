package partition

import (
	"github.com/segmentio/kafka-go"

	"dedup/checkpoint"
)

// Router chooses the output partition of a forwarded record.
//
// With as many output as input partitions, a record keeps its input
// partition: per-key order and co-partitioning survive unchanged. Otherwise
// the record key is hashed like the Java client's default partitioner:
// toPositive(murmur2(key)) % partitions, which kafka.Murmur2Balancer
// implements. A record without a Kafka key goes to input partition modulo
// the output count, so replays route it the same way (Java would pick a
// sticky random partition).
//
// Partitions added to the input topic alone make the counts differ, and
// records are then hashed: a key produced by a key-hashing producer goes
// to the output partition it went to before (murmur2 modulo the same
// output count), whichever input partition it now arrives on.
type Router struct {
	same   bool
	inputs int
	parts  []int // 0..n-1, what Murmur2Balancer picks from
	hash   kafka.Murmur2Balancer
}

// NewRouter returns the router between topics with these partition counts.
func NewRouter(inputPartitions, outputPartitions int) Router {
	parts := make([]int, outputPartitions)
	for i := range parts {
		parts[i] = i
	}
	return Router{
		same:   inputPartitions == outputPartitions,
		inputs: inputPartitions,
		parts:  parts,
		hash:   kafka.Murmur2Balancer{Consistent: true},
	}
}

func (pt Router) partition(inputPartition int, key []byte) int {
	switch {
	case pt.same:
		return inputPartition
	case key == nil:
		return inputPartition % len(pt.parts)
	}
	return pt.hash.Balance(kafka.Message{Key: key}, pt.parts...)
}

// Outputs returns the output partitions inputPartition writes to: its own
// when partitions are kept, else all.
func (pt Router) Outputs(inputPartition int) []int {
	if pt.same {
		return []int{inputPartition}
	}
	return pt.parts
}

// OutputPartitions returns how many partitions the output topic has.
func (pt Router) OutputPartitions() int { return len(pt.parts) }

// InputPartitions returns how many partitions the input topic has.
func (pt Router) InputPartitions() int { return pt.inputs }

// AllOutputs returns every output partition: a checkpoint records the end
// of each, so that a restore under any routing has a bound on each.
func (pt Router) AllOutputs() []int { return pt.parts }

// ReachedSince returns the output partitions where outputs of
// inputPartition written since snapshot m can be: those this router
// reaches when the partition counts are those m recorded (counts only
// grow, so every generation in between routed as this one), else every
// output partition (nil).
func (pt Router) ReachedSince(inputPartition int, m checkpoint.Meta) []int {
	if m.InputPartitions == pt.inputs && m.OutputPartitions == len(pt.parts) {
		return pt.Outputs(inputPartition)
	}
	return nil
}

// RouteChosen is the writer's Balancer: kafka-go ignores Message.Partition
// on write, so the worker stores its choice there and this hands it back.
// Should the writer's view of the topic disagree (partitions added since the
// generation started), it falls back to the key hash over what it sees.
func RouteChosen(m kafka.Message, partitions ...int) int {
	if m.Partition >= 0 && m.Partition < len(partitions) && partitions[m.Partition] == m.Partition {
		return m.Partition
	}
	return kafka.Murmur2Balancer{Consistent: true}.Balance(m, partitions...)
}
