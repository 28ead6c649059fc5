package partition

import "github.com/segmentio/kafka-go"

// Router chooses the output partition of a forwarded record.
//
// With as many output as input partitions, a record keeps its input
// partition: per-key order and co-partitioning survive unchanged. Otherwise
// the record key is hashed like the Java client's default partitioner:
// toPositive(murmur2(key)) % partitions, which kafka.Murmur2Balancer
// implements. A record without a Kafka key goes to input partition modulo
// the output count, so replays route it the same way (Java would pick a
// sticky random partition).
type Router struct {
	same  bool
	parts []int // 0..n-1, what Murmur2Balancer picks from
	hash  kafka.Murmur2Balancer
}

// NewRouter returns the router between topics with these partition counts.
func NewRouter(inputPartitions, outputPartitions int) Router {
	parts := make([]int, outputPartitions)
	for i := range parts {
		parts[i] = i
	}
	return Router{
		same:  inputPartitions == outputPartitions,
		parts: parts,
		hash:  kafka.Murmur2Balancer{Consistent: true},
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
