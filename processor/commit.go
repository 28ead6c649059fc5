package processor

// commit commits offset (the next to read) of one input partition.
func (p *Processor) commit(g *generation, topic string, partition int, offset int64) error {
	p.commitMu.Lock()
	defer p.commitMu.Unlock()
	return g.gen.CommitOffsets(map[string]map[int]int64{topic: {partition: offset}})
}
