package output

import (
	"context"
	"fmt"
	"time"

	"dedup/processor/cluster"
	"dedup/processor/partition"
)

// batchOverhead is a v2 record batch's header: what a broker counts
// against max.message.bytes besides the records.
const batchOverhead = cluster.BatchOverhead

// topicLimits are the max.message.bytes the stage last read of the output,
// dead-letter and drop topics (0: not read yet, or not set), and whether the
// output (drop topic) is compacted (a broker refuses a record without a key there).
// Read at the start of each generation; only the generation's supervisor
// writes them, between generations' writers (no lock: Run's loop and the
// supervisor take turns).
type topicLimits struct {
	output, deadLetter, dropped int64
	outputCompacted             bool
	droppedCompacted            bool
}

// Limit is the largest output record the writer can deliver: the
// writer's batch limit (PRODUCE_BATCH_BYTES), or the output topic's
// max.message.bytes less the batch header when that is smaller. The
// broker holds compressed batches against max.message.bytes, which the
// check cannot know: with compression the batch limit alone applies, and
// the broker's refusal of a record settles the rest (probe.go).
func (o *Output) Limit() partition.Limit {
	return o.topicLimit(o.c.Topic, o.limits.output, o.limits.outputCompacted)
}

// DroppedLimit is the largest drop record the drop writer can deliver, as
// Limit is the output's: PRODUCE_BATCH_BYTES, or the drop topic's
// max.message.bytes less the batch header when that is smaller; a
// compacted drop topic requires a key.
func (o *Output) DroppedLimit() partition.Limit {
	return o.topicLimit(o.c.DroppedTopic, o.limits.dropped, o.limits.droppedCompacted)
}

// topicLimit is the limit of records written to topic, whose
// max.message.bytes is maxBytes (0: unknown).
func (o *Output) topicLimit(topic string, maxBytes int64, compacted bool) partition.Limit {
	lim := partition.Limit{Bytes: o.c.BatchBytes, Setting: fmt.Sprintf("PRODUCE_BATCH_BYTES=%d", o.c.BatchBytes)}
	if m := maxBytes; m > 0 && m-batchOverhead < lim.Bytes && o.c.Compression == 0 {
		lim = partition.Limit{Bytes: m - batchOverhead,
			Setting: fmt.Sprintf("max.message.bytes=%d of topic %s less %d bytes of batch header", m, topic, batchOverhead)}
	}
	if compacted {
		lim.KeyRequired = fmt.Sprintf("cleanup.policy=compact of topic %s", topic)
	}
	return lim
}

// readLimits reads max.message.bytes of the output and dead-letter topics.
// A failed read keeps the values read before: the broker then refuses
// what the check lets through, and the refusal path reads them again.
func (o *Output) readLimits(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	topics := []string{o.c.Topic}
	if o.c.DeadLetterTopic != "" {
		topics = append(topics, o.c.DeadLetterTopic)
	}
	if o.c.DroppedTopic != "" {
		topics = append(topics, o.c.DroppedTopic)
	}
	got, err := o.c.Admin.TopicSettings(ctx, topics)
	if err != nil {
		o.c.Log.Warn("read max.message.bytes and cleanup.policy: keeping the limits read before", "topics", topics, "err", err)
		return
	}
	was := o.limits
	if v, ok := got[o.c.Topic]; ok {
		o.limits.output, o.limits.outputCompacted = v.MaxBytes, v.Compacted
	}
	if v, ok := got[o.c.DeadLetterTopic]; ok && o.c.DeadLetterTopic != "" {
		o.limits.deadLetter = v.MaxBytes
	}
	if v, ok := got[o.c.DroppedTopic]; ok && o.c.DroppedTopic != "" {
		o.limits.dropped, o.limits.droppedCompacted = v.MaxBytes, v.Compacted
	}
	if o.limits != was {
		args := []any{"bytes", o.Limit().Bytes, "setting", o.Limit().Setting, "output_compacted", o.limits.outputCompacted}
		if o.c.DeadLetterTopic != "" {
			args = append(args, "dead_letter_topic", o.c.DeadLetterTopic, "dead_letter_bytes", o.deadLetterLimit())
		}
		if o.c.DroppedTopic != "" {
			args = append(args, "dropped_topic", o.c.DroppedTopic, "dropped_bytes", o.DroppedLimit().Bytes, "dropped_compacted", o.limits.droppedCompacted)
		}
		o.c.Log.Info("output record limit", args...)
	}
}

// ApplyLimits reads the topics' limits at the start of a generation and,
// when the output (or drop) limit changed, replaces the idle writer so that its
// batches keep within it; the dead-letter writer follows its own topic's
// limit. Called by the generation's supervisor before any partition starts.
func (o *Output) ApplyLimits(ctx context.Context) {
	o.readLimits(ctx)
	if o.w.w.BatchBytes != o.Limit().Bytes || (o.w.dropped != nil && o.w.dropped.BatchBytes != o.DroppedLimit().Bytes) {
		// Idle: the previous generation's partitions waited for their
		// acknowledgements, or failed and had the writer replaced.
		if err := o.w.close(); err != nil {
			o.c.Log.Debug("close writer", "err", err)
		}
		o.setWriter()
	}
	if o.c.DeadLetterTopic != "" && (o.dlq == nil || o.dlq.limit != o.deadLetterLimit()) {
		if o.dlq != nil {
			o.dlq.close()
		}
		o.dlq = o.newDeadLetter()
	}
}
