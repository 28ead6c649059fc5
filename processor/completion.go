package processor

import (
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/processor/partition"
)

// completion is the writer's Completion callback: the partitions' ack
// tracking settles each record; a failure breaks the writer, which Run
// replaces after the generation.
func (p *Processor) completion(out *output, msgs []kafka.Message, err error) {
	failed := p.settle.Settle(msgs, err)
	if failed > 0 {
		out.broken.Store(true)
		p.metrics.produceErrors.WithLabelValues(p.o.OutputTopic).Add(float64(failed))
		p.log.Error("produce failed", "topic", p.o.OutputTopic, "records", failed, "err", err)
	}
}

// newCompletion returns how the writer's acknowledgements settle: outputs
// aborted with a broken writer are not counted again, and each delivered
// output's end-to-end latency is observed.
func (p *Processor) newCompletion() partition.Completion {
	return partition.Completion{
		NotSent: errAborted,
		Latency: func(d time.Duration) { p.metrics.latency.Observe(d.Seconds()) },
	}
}

// routeChosen is the writer's Balancer (partition.RouteChosen).
func routeChosen(m kafka.Message, partitions ...int) int {
	return partition.RouteChosen(m, partitions...)
}
