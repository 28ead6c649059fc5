package processor

import (
	"math/bits"

	"dedup/cmd/dedup/sizing"
)

// bufferSizes is what one partition's reader and ack ring may hold when
// assigned partitions share the instance's FetchBufferBytes
// (sizing.PartitionShare): a quarter of the share for kafka-go's message
// queue, a quarter for one fetch (never more than FetchMaxBytes, never
// less than FetchMinBytes), half for the outputs in flight. Records are
// counted at sizing.RecordCost bytes each, so the budget holds for records
// of up to a few hundred bytes; larger records take proportionally more.
type bufferSizes struct {
	maxBytes int // reader MaxBytes: one fetch
	queue    int // reader QueueCapacity: decoded records waiting for the worker
	inflight int // ack ring: outputs the writer has not acknowledged
}

// Queue bounds: below 64 kafka-go's fetch goroutine stalls on the queue
// many times per fetch; 4096 lets it run a whole 1 MB fetch of small
// records ahead (the size before the budget).
const (
	minQueue    = 64
	maxQueue    = 4096
	minFetch    = 64 << 10
	minInflight = 1024 // one writer batch and then some
)

// bufferSizes derives the sizes for assigned partitions and outputs output
// partitions.
func (p *Processor) bufferSizes(assigned, outputs int) bufferSizes {
	share := sizing.PartitionShare(p.o.FetchBufferBytes, assigned)
	q := share / 4
	return bufferSizes{
		maxBytes: int(min(int64(p.o.FetchMaxBytes), max(q, minFetch, int64(p.o.FetchMinBytes)))),
		queue:    int(min(maxQueue, max(minQueue, q/sizing.RecordCost))),
		// A power of two: the ring rounds its size up to one.
		inflight: floorPow2(min(int64(p.inflightCap(outputs)), max(minInflight, share/2/sizing.RecordCost))),
	}
}

func floorPow2(n int64) int { return 1 << (bits.Len64(uint64(n)) - 1) }

// partitionBuffers is bufferSizes for the partitions of the current
// generation (superviseGeneration sets p.assigned before any starts).
func (p *Processor) partitionBuffers(outputs int) bufferSizes {
	p.mu.Lock()
	n := p.assigned
	p.mu.Unlock()
	return p.bufferSizes(n, outputs)
}
