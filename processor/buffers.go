package processor

import "dedup/sizing"

// bufferSizes sizes a partition's reader and ack ring when assigned
// partitions share FetchBufferBytes and the output has outputs partitions
// (sizing.PartitionBuffers): the ring never beyond inflightCap.
func (p *Processor) bufferSizes(assigned, outputs int) sizing.Buffers {
	return sizing.PartitionBuffers(p.o.FetchBufferBytes, assigned, p.o.FetchMinBytes, p.o.FetchMaxBytes, p.inflightCap(outputs))
}

// partitionBuffers is bufferSizes for the partitions of the current
// generation (superviseGeneration sets p.assigned before any starts).
func (p *Processor) partitionBuffers(outputs int) sizing.Buffers {
	p.mu.Lock()
	n := p.assigned
	p.mu.Unlock()
	return p.bufferSizes(n, outputs)
}
