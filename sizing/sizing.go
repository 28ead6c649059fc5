package sizing

import (
	"math/bits"
	"strconv"
)

// RuntimeBase is the memory of an instance that does not grow with its
// partitions: the Go runtime, the HTTP server, the checkpoint encoder. It
// was measured as the live heap after a GC above the pairs, with margin
// (docs: sizing).
const RuntimeBase = 32 << 20

// DefaultFetchBufferBytes is FETCH_BUFFER_BYTES's default: what an
// instance's partitions together hold between fetch and produce
// acknowledgement, whatever their number (docs: sizing).
const DefaultFetchBufferBytes = 32 << 20

// MinPartitionShare is the least a partition's readers and ack ring are
// sized for, however many partitions share FETCH_BUFFER_BYTES: below it a
// partition could not fill a writer batch (docs: sizing).
const MinPartitionShare = 1 << 20

// MaxPartitionShare is the most one partition's readers and ack ring are
// sized for: what a partition fetching and producing at full speed was
// measured to use (docs: sizing). Fewer partitions than the budget has
// room for leave the rest of it unused.
const MaxPartitionShare = 8 << 20

// RecordCost is what one buffered record is counted as: a record of a few
// hundred bytes with kafka-go's message and queue slot, or an output with
// its ack slot, headers and writer message.
const RecordCost = 512

// PartitionOverhead is what an assigned partition holds besides its pair
// and its share of the fetch buffer: its goroutines, reader and connection,
// metric series and checkpoint state (docs: sizing).
const PartitionOverhead = 256 << 10

// PartitionShare is one partition's part of a FETCH_BUFFER_BYTES budget
// shared by partitions assigned partitions, between MinPartitionShare and
// MaxPartitionShare.
func PartitionShare(budget int64, partitions int) int64 {
	if budget <= 0 {
		budget = DefaultFetchBufferBytes
	}
	return min(max(budget/int64(max(partitions, 1)), MinPartitionShare), MaxPartitionShare)
}

// FetchBuffer is what partitions assigned partitions hold of a
// FETCH_BUFFER_BYTES budget: the budget, MinPartitionShare each when there
// are more partitions than the budget has room for, MaxPartitionShare
// each when there are fewer.
func FetchBuffer(budget int64, partitions int) int64 {
	if partitions <= 0 {
		return 0
	}
	return PartitionShare(budget, partitions) * int64(partitions)
}

// Buffers is what one partition's reader and ack ring are sized for, from
// its share of FETCH_BUFFER_BYTES (PartitionShare): a quarter of the share
// for kafka-go's message queue, a quarter for one fetch, half for the
// outputs in flight, each record counted at RecordCost.
type Buffers struct {
	FetchBytes int // reader MaxBytes: one fetch
	Queue      int // reader QueueCapacity: decoded records waiting for the worker
	InFlight   int // ack ring: outputs the writer has not acknowledged, a power of two
}

// Buffer bounds: below 64 records kafka-go's fetch goroutine stalls on the
// queue many times per fetch, and 4096 lets it run a whole 1 MB fetch of
// small records ahead (the size before the budget); a ring of 1024 outputs
// holds a writer batch and then some.
const (
	minQueue    = 64
	maxQueue    = 4096
	minFetch    = 64 << 10
	minInFlight = 1024
)

// PartitionBuffers sizes one of partitions partitions sharing budget: the
// fetch never above fetchMax nor below fetchMin, the ring never above
// maxInFlight (rounded down to a power of two: the ring rounds up).
func PartitionBuffers(budget int64, partitions, fetchMin, fetchMax, maxInFlight int) Buffers {
	share := PartitionShare(budget, partitions)
	q := share / 4
	return Buffers{
		FetchBytes: int(min(int64(fetchMax), max(q, minFetch, int64(fetchMin)))),
		Queue:      int(min(maxQueue, max(minQueue, q/RecordCost))),
		InFlight:   floorPow2(min(int64(maxInFlight), max(minInFlight, share/2/RecordCost))),
	}
}

func floorPow2(n int64) int { return 1 << (bits.Len64(uint64(max(n, 1))) - 1) }

// The roles of REPARTITION_HOPS an instance is sized for: which hops it
// runs. The zero value is HopsBoth (and the only role without
// REPARTITION_TOPIC).
const (
	HopsBoth  = "both"
	HopsRekey = "rekey" // hop 1 alone: no filters, checkpoints or output writer
	HopsDedup = "dedup" // hop 2 alone: filters and output, no hop 1 reader
)

// Instance is one running dedup process.
type Instance struct {
	PairBytes         int64 // one partition's filter pair, both generations (rotation.Pair.SizeBytes)
	Partitions        int   // input partitions assigned to the instance
	OutputPartitions  int   // partitions of the output topic (the writer keeps a batch open per partition)
	FetchBufferBytes  int64 // FETCH_BUFFER_BYTES: records between fetch and produce, all partitions (0 = default)
	ProduceBatchBytes int64 // PRODUCE_BATCH_BYTES: one open batch per output partition
	// Hop1PartitionBytes is hop 1's reader per input partition with
	// REPARTITION_TOPIC (Repartition.Hop1PartitionBytes; 0 without). The
	// instance is taken to hold as many input partitions as it holds
	// partitions of hop 2.
	Hop1PartitionBytes int64
	// Hops is the role (HopsBoth, HopsRekey, HopsDedup; "" both). With
	// HopsRekey, Partitions are input partitions and the instance holds
	// hop 1's reader and overhead for each and RuntimeBase, nothing else;
	// with HopsDedup, Partitions are the repartition topic's and
	// Hop1PartitionBytes is not counted.
	Hops string
}

// LiveBytes is the instance's live memory: a pair per assigned partition,
// plus the spare pair that checkpoints copy into (the binary always has a
// checkpoint store), the fetch buffer and a fixed overhead per partition,
// one open batch per output partition, hop 1's readers with
// REPARTITION_TOPIC, and RuntimeBase. Hops narrows it to the role's own.
func (i Instance) LiveBytes() int64 {
	switch i.Hops {
	case HopsRekey:
		// Hop 1's fetches are bounded apart from FETCH_BUFFER_BYTES and
		// its batch in hand is in Hop1PartitionBytes.
		return int64(i.Partitions)*(PartitionOverhead+i.Hop1PartitionBytes) + RuntimeBase
	case HopsDedup:
		i.Hop1PartitionBytes = 0
	}
	return int64(i.Partitions+1)*i.PairBytes +
		FetchBuffer(i.FetchBufferBytes, i.Partitions) +
		int64(i.Partitions)*(PartitionOverhead+i.Hop1PartitionBytes) +
		int64(i.OutputPartitions)*i.ProduceBatchBytes +
		RuntimeBase
}

// Deployment is Replicas instances sharing Partitions input partitions.
type Deployment struct {
	PairBytes         int64
	Partitions        int // input partitions; the output is taken to have as many
	Replicas          int
	FetchBufferBytes  int64
	ProduceBatchBytes int64
	// Hop1PartitionBytes: see Instance (0 without REPARTITION_TOPIC).
	Hop1PartitionBytes int64
	// Hops: see Instance. Partitions are those of the role's topic: the
	// input's for HopsRekey, the repartition topic's for HopsDedup.
	Hops string
}

// Resources is what each instance's container asks for.
type Resources struct {
	PartitionsPerInstance        int   // in normal running
	PartitionsPerInstanceOneDown int   // while one instance is down (or rolling)
	Request                      int64 // bytes: live memory in normal running
	Limit                        int64 // bytes: live memory with one instance down, plus GC headroom
	GoMemLimit                   int64 // bytes: where the Go GC works harder, below Limit
}

const (
	// The limit's margin over the live memory (×5/4): the Go collector lets
	// the heap grow past the live set between cycles.
	headroomNum, headroomDen = 5, 4
	// GOMEMLIMIT at 90% of the limit leaves room for memory the Go runtime
	// does not count (stacks, fragmentation) before the kernel's OOM kill.
	goMemLimitNum, goMemLimitDen = 9, 10
)

// Resources computes the container memory of each instance.
func (d Deployment) Resources() Resources {
	replicas := max(d.Replicas, 1)
	per := ceilDiv(d.Partitions, replicas)
	oneDown := per
	if replicas > 1 {
		oneDown = ceilDiv(d.Partitions, replicas-1)
	}
	inst := func(parts int) Instance {
		return Instance{PairBytes: d.PairBytes, Partitions: parts, OutputPartitions: d.Partitions,
			FetchBufferBytes: d.FetchBufferBytes, ProduceBatchBytes: d.ProduceBatchBytes,
			Hop1PartitionBytes: d.Hop1PartitionBytes, Hops: d.Hops}
	}
	r := Resources{PartitionsPerInstance: per, PartitionsPerInstanceOneDown: oneDown}
	r.Request = inst(per).LiveBytes()
	r.Limit = inst(oneDown).LiveBytes() * headroomNum / headroomDen
	r.GoMemLimit = r.Limit * goMemLimitNum / goMemLimitDen
	return r
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// Quantity writes bytes as a Kubernetes memory quantity in whole MiB,
// rounded up: "1536Mi".
func Quantity(bytes int64) string { return strconv.FormatInt(ceilMiB(bytes), 10) + "Mi" }

// GoMemLimit writes bytes the way the GOMEMLIMIT variable reads them, in
// whole MiB rounded down (a limit must not exceed what was computed): "1382MiB".
func GoMemLimit(bytes int64) string { return strconv.FormatInt(bytes>>20, 10) + "MiB" }

func ceilMiB(b int64) int64 { return (b + 1<<20 - 1) >> 20 }
