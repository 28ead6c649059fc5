// Package offsets reads the offset range of Kafka partitions.
//
// What it guarantees: List answers for every partition asked, or returns
// an error naming the topic (and the partition when one failed or was
// missing from the answer); it never returns a partial map.
package offsets
