// Package offsets reads the offset range of Kafka partitions, and notices
// partitions the stage writes to whose log went back (Truncations).
//
// What it guarantees: List answers for every partition asked, or returns
// an error naming the topic (and the partition when one failed or was
// missing from the answer); it never returns a partial map. Truncations
// reports a partition once per acknowledged base offset at or below the
// one acknowledged before it, compared along one sequential writer.
package offsets
