package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/offsets"
)

// ScanOptions configures ScanOutput.
type ScanOptions struct {
	Brokers     []string
	Dialer      *kafka.Dialer      // TLS/SASL used when Transport is nil
	Transport   kafka.RoundTripper // nil = a transport built from Dialer
	OutputTopic string
	// From is Meta.OutputEnds: where to start in each output partition.
	// A partition missing from From did not exist when the snapshot was
	// taken (it was added since): it is read from its first offset.
	From map[int]int64
	// Partitions are the output partitions to read: those the source
	// partition's outputs can have reached since the snapshot. Empty: every
	// partition of the output topic.
	Partitions      []int
	SourceTopic     string
	SourcePartition int
	MinOffset       int64 // Meta.Offset
	// Names of the headers that carry a record's source; partition and
	// offset values are decimal strings.
	HeaderTopic, HeaderPartition, HeaderOffset string
	// Header, when set, is one header that carries a record's source
	// instead of the three: "<topic>/<partition>/<offset>".
	Header string
	// Patience bounds how long a partition's read may bring nothing before
	// the scan fails with a *ReadError (default 30s).
	Patience time.Duration
}

// Scan is what ScanOutput found.
type Scan struct {
	// Forwarded holds the source offsets >= MinOffset of the records
	// whose source headers name (SourceTopic, SourcePartition).
	Forwarded map[int64]struct{}
	Records   int64 // output records read
	// Truncated lists the output partitions whose end is below the end
	// From recorded: records written before the snapshot are gone
	// (unclean leader election, or the topic deleted and created again).
	Truncated []Truncation
}

// Truncation is an output partition found shorter than a snapshot
// recorded it.
type Truncation struct {
	Partition     int
	Recorded, End int64
}

// ScanOutput reads each output partition of Partitions from From[p] to
// its end as of the call and returns the source offsets >= MinOffset of
// records whose source headers name (SourceTopic, SourcePartition).
// Records without or with malformed source headers are not counted.
//
// Offsets already deleted by retention cannot be read and are skipped.
// Each partition is read up to its end offset as listed at the call: a
// read that cannot get there fails the scan with a *ReadError, never
// returns part of the set.
func ScanOutput(ctx context.Context, o ScanOptions) (Scan, error) {
	if len(o.Brokers) == 0 || o.OutputTopic == "" || (o.Header == "" && (o.HeaderTopic == "" || o.HeaderPartition == "" || o.HeaderOffset == "")) {
		return Scan{}, errors.New("scan output: brokers, output topic and header names are required")
	}
	rt, own := transportFor(o.Transport, o.Dialer)
	if own != nil {
		defer own.CloseIdleConnections()
	}
	c := &kafka.Client{Addr: kafka.TCP(o.Brokers...), Transport: rt}
	parts := o.Partitions
	if len(parts) == 0 {
		var err error
		if parts, err = partitionIDs(ctx, c, o.OutputTopic); err != nil {
			return Scan{}, fmt.Errorf("scan output: %w", err)
		}
	}
	ends, err := offsets.List(ctx, c, o.OutputTopic, parts)
	if err != nil {
		return Scan{}, fmt.Errorf("scan output: %w", err)
	}
	sourcePartition := strconv.Itoa(o.SourcePartition)
	s := Scan{Forwarded: map[int64]struct{}{}}
	for _, p := range parts {
		r := ends[p]
		from, ok := o.From[p]
		if ok && from > r.End {
			s.Truncated = append(s.Truncated, Truncation{Partition: p, Recorded: from, End: r.End})
		}
		if !ok || from < r.First {
			from = r.First
		}
		err := readRange(ctx, c, o.OutputTopic, p, from, r.End, o.Patience, func(rec *kafka.Record) error {
			s.Records++
			topic, partition, offset, ok := o.source(rec.Headers)
			if !ok || topic != o.SourceTopic || partition != sourcePartition {
				return nil
			}
			off, err := strconv.ParseInt(offset, 10, 64)
			if err != nil || off < o.MinOffset {
				return nil
			}
			s.Forwarded[off] = struct{}{}
			return nil
		})
		if err != nil {
			return Scan{}, fmt.Errorf("scan output: %w", err)
		}
	}
	return s, nil
}

// source is the topic, partition and offset texts a record's headers name
// as its source; ok is false when a header is missing.
func (o *ScanOptions) source(headers []kafka.Header) (topic, partition, offset string, ok bool) {
	if o.Header != "" {
		for _, h := range headers {
			if h.Key == o.Header {
				topic, partition, offset, ok = splitSource(string(h.Value))
			}
		}
		return topic, partition, offset, ok
	}
	var hasTopic, hasPartition bool
	for _, h := range headers {
		switch h.Key {
		case o.HeaderTopic:
			topic, hasTopic = string(h.Value), true
		case o.HeaderPartition:
			partition, hasPartition = string(h.Value), true
		case o.HeaderOffset:
			offset = string(h.Value)
		}
	}
	return topic, partition, offset, hasTopic && hasPartition
}

// splitSource splits "<topic>/<partition>/<offset>" (a topic name holds no
// slash).
func splitSource(v string) (topic, partition, offset string, ok bool) {
	topic, rest, ok1 := strings.Cut(v, "/")
	partition, offset, ok2 := strings.Cut(rest, "/")
	return topic, partition, offset, ok1 && ok2
}
