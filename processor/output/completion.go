package output

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"dedup/processor/partition"
)

// completion is the writer's Completion callback: the partitions' ack
// tracking settles each record; a failure breaks the writer, which the
// group runner replaces after the generation.
func (out *Writer) completion(msgs []kafka.Message, err error) {
	if err == nil && len(msgs) > 0 {
		// One partition's batch, its offsets set from the produce
		// response: the last is what the end offsets are checked against.
		last := &msgs[len(msgs)-1]
		out.c.truncated.Written(int32(last.Partition), last.Offset)
	}
	failed := out.c.settle.Settle(msgs, err)
	if failed > 0 {
		out.c.Failures.broke(out)
		out.c.ProduceErrors.Add(float64(failed))
		out.c.Log.Error("produce failed", "topic", out.c.Topic, "records", failed, "err", err)
	}
}

// droppedCompletion is the drop writer's Completion callback: as the
// output's, without the truncation check of the output topic's offsets.
func (out *Writer) droppedCompletion(msgs []kafka.Message, err error) {
	failed := out.c.settle.Settle(msgs, err)
	if failed > 0 {
		out.c.Failures.broke(out)
		out.c.DroppedErrors.Add(float64(failed))
		out.c.Log.Error("produce failed", "topic", out.c.DroppedTopic, "records", failed, "err", err)
	}
}

// newCompletion returns how the writer's acknowledgements settle: outputs
// aborted with a broken writer are not counted again, and each delivered
// output's end-to-end latency is observed.
func newCompletion(latency prometheus.Observer) partition.Completion {
	return partition.Completion{
		NotSent: errAborted,
		Latency: func(d time.Duration) { latency.Observe(d.Seconds()) },
	}
}

// routeChosen is the writer's Balancer (partition.RouteChosen).
func routeChosen(m kafka.Message, partitions ...int) int {
	return partition.RouteChosen(m, partitions...)
}
