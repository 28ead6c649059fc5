package checkpoint

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"dedup/internal/testkit"
	"dedup/offsets"
)

const (
	hTopic, hPartition, hOffset = "src-topic", "src-partition", "src-offset"
	routeHeader                 = "test-route"
)

// outRecord is a record for the output topic and the partition it goes to.
type outRecord struct {
	partition int
	headers   map[string]string
}

func writeOutput(t *testing.T, brokers []string, recs []outRecord) {
	t.Helper()
	tr := &kafka.Transport{} // closed after the writer, which leaves it open
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{
		Addr: kafka.TCP(brokers...), Topic: "out", RequiredAcks: kafka.RequireAll, BatchTimeout: 1, Transport: tr,
		Balancer: kafka.BalancerFunc(func(m kafka.Message, _ ...int) int {
			for _, h := range m.Headers {
				if h.Key == routeHeader {
					p, _ := strconv.Atoi(string(h.Value))
					return p
				}
			}
			panic("unrouted")
		}),
	}
	defer w.Close()
	msgs := make([]kafka.Message, len(recs))
	for i, r := range recs {
		msgs[i] = kafka.Message{Value: []byte(fmt.Sprint(i)), Headers: []kafka.Header{{Key: routeHeader, Value: []byte(strconv.Itoa(r.partition))}}}
		for _, k := range slices.Sorted(maps.Keys(r.headers)) {
			msgs[i].Headers = append(msgs[i].Headers, kafka.Header{Key: k, Value: []byte(r.headers[k])})
		}
	}
	if err := w.WriteMessages(testContext(t), msgs...); err != nil {
		t.Fatalf("write output: %v", err)
	}
}

// forwarded is a record as the processor writes it for input (topic, partition, offset).
func forwarded(outPartition int, topic string, partition int, offset int64) outRecord {
	return outRecord{partition: outPartition, headers: map[string]string{
		hTopic: topic, hPartition: strconv.Itoa(partition), hOffset: strconv.FormatInt(offset, 10),
	}}
}

func TestScanOutput(t *testing.T) {
	brokers := newCluster(t, kfake.SeedTopics(2, "out"))
	// Before the snapshot: outputs of inputs 0..9 of in/0 and in/1.
	var before []outRecord
	for off := range int64(10) {
		before = append(before, forwarded(int(off%2), "in", 0, off), forwarded(int(off+1)%2, "in", 1, off))
	}
	writeOutput(t, brokers, before)
	c := testkit.KafkaClient(t, brokers...)
	ends, err := offsets.List(testContext(t), c, "out", []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	from := map[int]int64{0: ends[0].End, 1: ends[1].End}

	// After the snapshot (which covers inputs < 12 of in/0): a processor
	// replayed inputs 10..11 and then went on; noise in between.
	var after []outRecord
	want := map[int64]struct{}{}
	for off := int64(10); off < 20; off++ {
		after = append(after, forwarded(int(off%2), "in", 0, off), forwarded(int(off/3)%2, "in", 1, off))
		if off >= 12 {
			want[off] = struct{}{}
		}
	}
	after = append(after,
		outRecord{partition: 0}, // no source headers
		outRecord{partition: 1, headers: map[string]string{hTopic: "in"}},                                // partial headers
		forwarded(0, "other", 0, 15),                                                                     // another input topic
		outRecord{partition: 1, headers: map[string]string{hTopic: "in", hPartition: "0", hOffset: "x"}}, // malformed offset
		forwarded(1, "in", 0, 50),                                                                        // sits after a gap: still found
	)
	want[50] = struct{}{}
	writeOutput(t, brokers, after)

	got, err := ScanOutput(testContext(t), ScanOptions{
		Brokers: brokers, OutputTopic: "out", From: from,
		SourceTopic: "in", SourcePartition: 0, MinOffset: 12,
		HeaderTopic: hTopic, HeaderPartition: hPartition, HeaderOffset: hOffset,
	})
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	if !maps.Equal(got.Forwarded, want) {
		t.Errorf("scan found %v, want %v", slices.Sorted(maps.Keys(got.Forwarded)), slices.Sorted(maps.Keys(want)))
	}
	if got.Records != int64(len(after)) {
		t.Errorf("scan read %d records, want %d (only those after From)", got.Records, len(after))
	}

	// Only the partitions named are read.
	got, err = ScanOutput(testContext(t), ScanOptions{
		Brokers: brokers, OutputTopic: "out", From: from, Partitions: []int{1},
		SourceTopic: "in", SourcePartition: 0, MinOffset: 12,
		HeaderTopic: hTopic, HeaderPartition: hPartition, HeaderOffset: hOffset,
	})
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	wantRecords := 0
	for _, r := range after {
		if r.partition == 1 {
			wantRecords++
		}
	}
	for off := range want {
		if off%2 == 0 && off != 50 { // forwarded to partition 0
			delete(want, off)
		}
	}
	if !maps.Equal(got.Forwarded, want) || got.Records != int64(wantRecords) {
		t.Errorf("scan of partition 1 found %v in %d records, want %v in %d", slices.Sorted(maps.Keys(got.Forwarded)), got.Records,
			slices.Sorted(maps.Keys(want)), wantRecords)
	}

	// A partition missing from From is read from its start.
	got, err = ScanOutput(testContext(t), ScanOptions{
		Brokers: brokers, OutputTopic: "out", From: map[int]int64{0: ends[0].End},
		SourceTopic: "in", SourcePartition: 1, MinOffset: 0,
		HeaderTopic: hTopic, HeaderPartition: hPartition, HeaderOffset: hOffset,
	})
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	want = map[int64]struct{}{}
	for i, r := range append(before, after...) {
		fromStart := r.partition == 1 || i >= len(before)
		if r.headers[hTopic] == "in" && r.headers[hPartition] == "1" && fromStart {
			off, _ := strconv.ParseInt(r.headers[hOffset], 10, 64)
			want[off] = struct{}{}
		}
	}
	if !maps.Equal(got.Forwarded, want) {
		t.Errorf("scan found %v, want %v", slices.Sorted(maps.Keys(got.Forwarded)), slices.Sorted(maps.Keys(want)))
	}
	if n := int64(len(before)/2 + len(after)); got.Records != n {
		t.Errorf("scan read %d records, want %d", got.Records, n)
	}
	if len(got.Truncated) != 0 {
		t.Errorf("truncated %v, want none: every end is at or above the recorded one", got.Truncated)
	}

	// A partition whose end is below the recorded one lost records: named,
	// with both offsets; the scan of the others goes on.
	now, err := offsets.List(testContext(t), c, "out", []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	got, err = ScanOutput(testContext(t), ScanOptions{
		Brokers: brokers, OutputTopic: "out", From: map[int]int64{0: now[0].End + 7, 1: now[1].End},
		SourceTopic: "in", SourcePartition: 1, MinOffset: 0,
		HeaderTopic: hTopic, HeaderPartition: hPartition, HeaderOffset: hOffset,
	})
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	wantTrunc := []Truncation{{Partition: 0, Recorded: now[0].End + 7, End: now[0].End}}
	if !slices.Equal(got.Truncated, wantTrunc) || got.Records != 0 {
		t.Errorf("truncated %v after %d records, want %v after 0", got.Truncated, got.Records, wantTrunc)
	}
}

// TestScanSourceHeader: a record's source is read from the three headers,
// or from the one header "<topic>/<partition>/<offset>" when Header is set;
// a record without them has none.
func TestScanSourceHeader(t *testing.T) {
	three := ScanOptions{HeaderTopic: hTopic, HeaderPartition: hPartition, HeaderOffset: hOffset}
	one := ScanOptions{Header: "src"}
	h := func(kv ...string) []kafka.Header {
		var hs []kafka.Header
		for i := 0; i < len(kv); i += 2 {
			hs = append(hs, kafka.Header{Key: kv[i], Value: []byte(kv[i+1])})
		}
		return hs
	}
	for _, c := range []struct {
		o                ScanOptions
		headers          []kafka.Header
		topic, part, off string
		ok               bool
	}{
		{three, h(hTopic, "in", hPartition, "3", hOffset, "17"), "in", "3", "17", true},
		{three, h(hTopic, "in", hOffset, "17"), "", "", "", false},
		{one, h("other", "x", "src", "in/3/17"), "in", "3", "17", true},
		{one, h("src", "in/3"), "", "", "", false},
		{one, h(hTopic, "in", hPartition, "3", hOffset, "17"), "", "", "", false},
	} {
		topic, part, off, ok := c.o.source(c.headers)
		if ok != c.ok || (ok && (topic != c.topic || part != c.part || off != c.off)) {
			t.Errorf("%v with %+v: %q %q %q %v", c.headers, c.o, topic, part, off, ok)
		}
	}
}
