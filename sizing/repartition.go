package sizing

import (
	"cmp"
	"fmt"
	"io"
	"math/bits"
	"time"
)

// Repartition is the traffic of the repartition topic (REPARTITION_TOPIC):
// every input record crosses it once more, written by hop 1 and read by
// hop 2, and it keeps them for its retention.
type Repartition struct {
	RecordsPerSecond float64       // input records per second, all partitions (duplicates included)
	RecordBytes      int64         // mean input record: key, value and headers
	KeyBytes         int64         // mean dedup key (the repartition record's key)
	Retention        time.Duration // the repartition topic's retention.ms
	Replication      int           // its replication factor
	InputTopic       string        // named in every record's origin trailer
	Topic            string        // the repartition topic, named in every output's repartition headers
	// Hop 1's memory for each input partition an instance holds: fetches
	// of FetchBytes (0: Hop1FetchBytes) and the batch in hand, BatchBytes
	// at most (PRODUCE_BATCH_BYTES; 0: 1 MiB).
	FetchBytes int64
	BatchBytes int64
}

// Hop1FetchBytes is the most one fetch of hop 1 returns: the stage bounds
// it to 1 MiB (or FETCH_MAX_BYTES when smaller).
const Hop1FetchBytes = 1 << 20

// Hop1PartitionBytes is hop 1's memory per input partition an instance
// holds: three fetches' records (one being read, one handed over, one
// being taken into batches) and the batch in hand with its origin
// trailers.
func (r Repartition) Hop1PartitionBytes() int64 {
	fetch := cmp.Or(r.FetchBytes, Hop1FetchBytes)
	inHand := cmp.Or(r.BatchBytes, 1<<20)
	trailers := inHand / max(r.RecordBytes, 1) * r.OriginBytes()
	return 3*fetch + inHand + trailers
}

// OriginBytes is what a repartition record carries beyond its input
// record: the origin trailer of its value (topic, partition, offset,
// partition count and the input key moved into it, which leaves the key's
// own bytes as they were, and 9 bytes of flags, length and magic) and the
// dedup key as its key.
func (r Repartition) OriginBytes() int64 {
	return int64(len(r.InputTopic)) + 3 + 10 + 2 + 4 + 9 + r.KeyBytes // and three or four slashes
}

// OutputBytes is what an output record of hop 2 carries beyond one hop's
// output: the dedup-repartition header.
func (r Repartition) OutputBytes(repartitionTopic string) int64 {
	const name = "dedup-repartition"
	value := int64(len(repartitionTopic)) + 3 + 10 + 2 // and two slashes
	return varintLen(int64(len(name))) + int64(len(name)) + varintLen(value) + value
}

// Throughput is the repartition topic's bytes per second, produced by hop
// 1 and fetched by hop 2 alike (before compression and replication).
func (r Repartition) Throughput() float64 {
	return r.RecordsPerSecond * float64(r.RecordBytes+r.OriginBytes())
}

// Storage is what the repartition topic holds at its retention, all
// replicas (before compression).
func (r Repartition) Storage() float64 {
	return r.Throughput() * r.Retention.Seconds() * float64(max(r.Replication, 1))
}

// Write prints the repartition topic's figures and hop 1's memory, as
// counted in an instance that runs hop 1.
func (r Repartition) Write(w io.Writer) {
	r.writeTopic(w)
	fmt.Fprintf(w, "  hop 1 holds %s per input partition (3 fetches of %s, a batch of %s in hand), counted in the memory above\n",
		BytesIEC(float64(r.Hop1PartitionBytes())), BytesIEC(float64(cmp.Or(r.FetchBytes, Hop1FetchBytes))), BytesIEC(float64(cmp.Or(r.BatchBytes, 1<<20))))
}

// writeTopic prints the repartition topic's figures.
func (r Repartition) writeTopic(w io.Writer) {
	fmt.Fprintf(w, "\nRepartition topic (REPARTITION_TOPIC), %.0f records/s of %d bytes:\n", r.RecordsPerSecond, r.RecordBytes)
	fmt.Fprintf(w, "  throughput: %s/s produced by hop 1 and %s/s fetched by hop 2 (each record + %d bytes of origin trailer and dedup key)\n",
		BytesIEC(r.Throughput()), BytesIEC(r.Throughput()), r.OriginBytes())
	fmt.Fprintf(w, "  storage at retention %v, replication %d: %s (before compression)\n",
		r.Retention, max(r.Replication, 1), BytesIEC(r.Storage()))
	fmt.Fprintf(w, "  outputs carry %d bytes more each (repartition headers)\n", r.OutputBytes(r.Topic))
}

// varintLen is the length of i as a zig-zag varint.
func varintLen(i int64) int64 {
	u := uint64((i << 1) ^ (i >> 63))
	return int64(bits.Len64(u|1)+6) / 7
}
