package repartition

import "github.com/segmentio/kafka-go"

// KeyPartition is the repartition partition hop 1 sends a record with
// dedup key dk to, of count partitions: murmur2 of the key, as the Java
// client's default partitioner and the hop's own balancer place it. So
// the filters that hold a key are those of this partition alone.
func KeyPartition(dk []byte, count int) int {
	all := make([]int, count)
	for i := range all {
		all[i] = i
	}
	return kafka.Murmur2Balancer{}.Balance(kafka.Message{Key: dk}, all...)
}
