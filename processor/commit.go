package processor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

// commit commits offset (the next to read) of one input partition, with
// the output end offsets of the checkpoint at offset in the commit's
// metadata (see commitMetadata): a restore whose snapshots are all
// rejected starts its replay scan there. A commit whose metadata would
// exceed maxCommitMetadata goes without, and that is logged loudly once.
func (p *Processor) commit(ctx context.Context, g *generation, topic string, partition int, offset int64, ends map[int]int64) error {
	meta := commitMetadata(ends)
	if len(meta) > maxCommitMetadata {
		if p.metadataWarned.CompareAndSwap(false, true) {
			p.log.Error("output end offsets too large for the offset commit's metadata: committing without them; "+
				"a partition whose snapshots are all rejected then restarts without a replay scan",
				"topic", topic, "partition", partition, "output_partitions", len(ends), "bytes", len(meta), "limit", maxCommitMetadata)
		}
		meta = ""
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p.commitMu.Lock()
	defer p.commitMu.Unlock()
	res, err := p.client.OffsetCommit(ctx, &kafka.OffsetCommitRequest{
		GroupID:      g.gen.GroupID,
		GenerationID: int(g.gen.ID),
		MemberID:     g.gen.MemberID,
		Topics:       map[string][]kafka.OffsetCommit{topic: {{Partition: partition, Offset: offset, Metadata: meta}}},
	})
	if err != nil {
		return fmt.Errorf("commit %s/%d at %d: %w", topic, partition, offset, err)
	}
	for _, r := range res.Topics[topic] {
		if r.Partition == partition && r.Error != nil {
			return fmt.Errorf("commit %s/%d at %d: %w", topic, partition, offset, r.Error)
		}
	}
	return nil
}

// committed reads the committed offset of an input partition and the
// output end offsets its metadata records: offset < 0 when nothing is
// committed, ends nil when the commit records none.
func (p *Processor) committed(ctx context.Context, topic string, partition int) (offset int64, ends map[int]int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := p.client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: p.o.GroupID, Topics: map[string][]int{topic: {partition}}})
	if err == nil && res.Error != nil {
		err = res.Error
	}
	if err != nil {
		return 0, nil, fmt.Errorf("fetch committed offset of %s/%d: %w", topic, partition, err)
	}
	for _, r := range res.Topics[topic] {
		if r.Partition != partition {
			continue
		}
		if r.Error != nil {
			return 0, nil, fmt.Errorf("fetch committed offset of %s/%d: %w", topic, partition, r.Error)
		}
		if r.CommittedOffset < 0 || r.Metadata == "" {
			return r.CommittedOffset, nil, nil
		}
		ends, err := parseCommitMetadata(r.Metadata)
		if err != nil {
			return 0, nil, fmt.Errorf("committed offset of %s/%d: %w", topic, partition, err)
		}
		return r.CommittedOffset, ends, nil
	}
	return -1, nil, nil
}

// The offset commit's metadata: "e1:" and then, for each output partition
// in increasing order, "<partition>.<end offset>" in base 36, separated by
// commas, e.g. "e1:0.2s,1.2r". About 12 bytes per output partition at
// offsets below 36^8.
const (
	metadataPrefix = "e1:"
	// maxCommitMetadata is Kafka's default offset.metadata.max.bytes: a
	// commit with more metadata is refused by the broker.
	maxCommitMetadata = 4096
)

// errCommitMetadata is wrapped by parseCommitMetadata's errors.
var errCommitMetadata = errors.New("malformed offset commit metadata")

func commitMetadata(ends map[int]int64) string {
	if len(ends) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(metadataPrefix)
	for i, part := range slices.Sorted(maps.Keys(ends)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(int64(part), 36))
		b.WriteByte('.')
		b.WriteString(strconv.FormatInt(ends[part], 36))
	}
	return b.String()
}

func parseCommitMetadata(s string) (map[int]int64, error) {
	rest, ok := strings.CutPrefix(s, metadataPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: %.40q", errCommitMetadata, s)
	}
	ends := map[int]int64{}
	for _, entry := range strings.Split(rest, ",") {
		ps, os, ok := strings.Cut(entry, ".")
		if !ok {
			return nil, fmt.Errorf("%w: entry %q", errCommitMetadata, entry)
		}
		part, err1 := strconv.ParseInt(ps, 36, 32)
		off, err2 := strconv.ParseInt(os, 36, 64)
		if err1 != nil || err2 != nil || part < 0 || off < 0 {
			return nil, fmt.Errorf("%w: entry %q", errCommitMetadata, entry)
		}
		if _, dup := ends[int(part)]; dup {
			return nil, fmt.Errorf("%w: partition %d twice", errCommitMetadata, part)
		}
		ends[int(part)] = off
	}
	return ends, nil
}
