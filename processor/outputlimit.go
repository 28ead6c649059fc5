package processor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/processor/partition"
)

// batchOverhead is a v2 record batch's header: what a broker counts
// against max.message.bytes besides the records.
const batchOverhead = 61

// topicLimits are the max.message.bytes the stage last read of the output
// and dead-letter topics (0: not read yet, or not set), and whether the
// output is compacted (a broker refuses a record without a key there).
// Read at the start of each generation; only the generation's supervisor
// writes them, between generations' writers (no lock: Run's loop and the
// supervisor take turns).
type topicLimits struct {
	output, deadLetter int64
	outputCompacted    bool
}

// outputLimit is the largest output record the writer can deliver: the
// writer's batch limit (PRODUCE_BATCH_BYTES), or the output topic's
// max.message.bytes less the batch header when that is smaller. The
// broker holds compressed batches against max.message.bytes, which the
// check cannot know: with compression the batch limit alone applies, and
// the broker's refusal of a record settles the rest (probe.go).
func (p *Processor) outputLimit() partition.Limit {
	lim := partition.Limit{Bytes: p.o.BatchBytes, Setting: fmt.Sprintf("PRODUCE_BATCH_BYTES=%d", p.o.BatchBytes)}
	if m := p.limits.output; m > 0 && m-batchOverhead < lim.Bytes && p.o.Compression == 0 {
		lim = partition.Limit{Bytes: m - batchOverhead,
			Setting: fmt.Sprintf("max.message.bytes=%d of topic %s less %d bytes of batch header", m, p.o.OutputTopic, batchOverhead)}
	}
	if p.limits.outputCompacted {
		lim.KeyRequired = fmt.Sprintf("cleanup.policy=compact of topic %s", p.o.OutputTopic)
	}
	return lim
}

// writerOptions are the options of the output writer: its batches never
// exceed the output limit, so that a batch of records that each fit the
// output topic fits it too.
func (p *Processor) writerOptions() Options {
	o := p.o
	o.BatchBytes = p.outputLimit().Bytes
	return o
}

// readLimits reads max.message.bytes of the output and dead-letter topics.
// A failed read keeps the values read before: the broker then refuses
// what the check lets through, and the refusal path reads them again.
func (p *Processor) readLimits(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	topics := []string{p.o.OutputTopic}
	if p.o.DeadLetterTopic != "" {
		topics = append(topics, p.o.DeadLetterTopic)
	}
	got, err := p.topicSettings(ctx, topics)
	if err != nil {
		p.log.Warn("read max.message.bytes and cleanup.policy: keeping the limits read before", "topics", topics, "err", err)
		return
	}
	was := p.limits
	if v, ok := got[p.o.OutputTopic]; ok {
		p.limits.output, p.limits.outputCompacted = v.maxBytes, v.compacted
	}
	if v, ok := got[p.o.DeadLetterTopic]; ok && p.o.DeadLetterTopic != "" {
		p.limits.deadLetter = v.maxBytes
	}
	if p.limits != was {
		args := []any{"bytes", p.outputLimit().Bytes, "setting", p.outputLimit().Setting, "output_compacted", p.limits.outputCompacted}
		if p.o.DeadLetterTopic != "" {
			args = append(args, "dead_letter_topic", p.o.DeadLetterTopic, "dead_letter_bytes", p.deadLetterLimit())
		}
		p.log.Info("output record limit", args...)
	}
}

// topicSetting is what the output check needs of a topic's configuration.
type topicSetting struct {
	maxBytes  int64 // max.message.bytes (0: not set)
	compacted bool  // cleanup.policy includes compact
}

// topicSettings describes the max.message.bytes and cleanup.policy of
// topics.
func (p *Processor) topicSettings(ctx context.Context, topics []string) (map[string]topicSetting, error) {
	req := &kafka.DescribeConfigsRequest{}
	for _, t := range topics {
		req.Resources = append(req.Resources, kafka.DescribeConfigRequestResource{
			ResourceType: kafka.ResourceTypeTopic, ResourceName: t, ConfigNames: []string{"max.message.bytes", "cleanup.policy"},
		})
	}
	res, err := p.client.DescribeConfigs(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("describe configs: %w", err)
	}
	got := map[string]topicSetting{}
	var errs []error
	for _, r := range res.Resources {
		if r.Error != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", r.ResourceName, r.Error))
			continue
		}
		var set topicSetting
		for _, e := range r.ConfigEntries {
			switch e.ConfigName {
			case "max.message.bytes":
				v, err := strconv.ParseInt(e.ConfigValue, 10, 64)
				if err != nil || v <= batchOverhead {
					errs = append(errs, fmt.Errorf("topic %s: max.message.bytes %q", r.ResourceName, e.ConfigValue))
					continue
				}
				set.maxBytes = v
			case "cleanup.policy":
				set.compacted = strings.Contains(e.ConfigValue, "compact")
			}
		}
		got[r.ResourceName] = set
	}
	return got, errors.Join(errs...)
}

// applyLimits reads the topics' limits at the start of a generation and,
// when the output limit changed, replaces the idle writer so that its
// batches keep within it; the dead-letter writer follows its own topic's
// limit. Called by the generation's supervisor before any partition starts.
func (p *Processor) applyLimits(ctx context.Context) {
	p.readLimits(ctx)
	if p.out.w.BatchBytes != p.outputLimit().Bytes {
		// Idle: the previous generation's partitions waited for their
		// acknowledgements, or failed and had the writer replaced.
		if err := p.out.close(); err != nil {
			p.log.Debug("close writer", "err", err)
		}
		p.out = p.newOutput()
	}
	if p.o.DeadLetterTopic != "" && (p.dlq == nil || p.dlq.limit != p.deadLetterLimit()) {
		if p.dlq != nil {
			p.dlq.close()
		}
		p.dlq = p.newDeadLetter()
	}
}
