package processor

import "github.com/segmentio/kafka-go"

// partitioner chooses the output partition of a forwarded record.
//
// With as many output as input partitions, a record keeps its input
// partition: per-key order and co-partitioning survive unchanged. Otherwise
// the record key is hashed like the Java client's default partitioner:
// toPositive(murmur2(key)) % partitions, which kafka.Murmur2Balancer
// implements. A record without a Kafka key goes to input partition modulo
// the output count, so replays route it the same way (Java would pick a
// sticky random partition).
type partitioner struct {
	same  bool
	parts []int // 0..n-1, what Murmur2Balancer picks from
	hash  kafka.Murmur2Balancer
}

func newPartitioner(inputPartitions, outputPartitions int) partitioner {
	parts := make([]int, outputPartitions)
	for i := range parts {
		parts[i] = i
	}
	return partitioner{
		same:  inputPartitions == outputPartitions,
		parts: parts,
		hash:  kafka.Murmur2Balancer{Consistent: true},
	}
}

func (pt partitioner) partition(inputPartition int, key []byte) int {
	switch {
	case pt.same:
		return inputPartition
	case key == nil:
		return inputPartition % len(pt.parts)
	}
	return pt.hash.Balance(kafka.Message{Key: key}, pt.parts...)
}

// routeChosen is the writer's Balancer: kafka-go ignores Message.Partition
// on write, so the worker stores its choice there and this hands it back.
// Should the writer's view of the topic disagree (partitions added since the
// generation started), it falls back to the key hash over what it sees.
func routeChosen(m kafka.Message, partitions ...int) int {
	if m.Partition >= 0 && m.Partition < len(partitions) && partitions[m.Partition] == m.Partition {
		return m.Partition
	}
	return kafka.Murmur2Balancer{Consistent: true}.Balance(m, partitions...)
}
