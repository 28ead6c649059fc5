package processor

import (
	"slices"
	"strings"
	"testing"
	"time"

	"dedup/sizing"
)

// TestBufferSizes: the partitions' readers and rings together stay within
// the budget, whatever the partition count, down to the minimum share;
// each fetch stays within FETCH_MIN_BYTES..FETCH_MAX_BYTES; the ring is a
// power of two (the tracker would round it up).
func TestBufferSizes(t *testing.T) {
	for _, budget := range []int64{0, 4 << 20, sizing.DefaultFetchBufferBytes, 1 << 30} {
		p := &Processor{o: Options{FetchBufferBytes: budget}}
		p.o = withDefaults(p.o)
		for _, parts := range []int{1, 2, 4, 12, 16, 32, 48, 100, 500} {
			s := p.bufferSizes(parts, parts)
			share := sizing.PartitionShare(p.o.FetchBufferBytes, parts)
			if s.FetchBytes < p.o.FetchMinBytes || s.FetchBytes > p.o.FetchMaxBytes {
				t.Errorf("budget %d, %d partitions: fetch %d not in %d..%d", budget, parts, s.FetchBytes, p.o.FetchMinBytes, p.o.FetchMaxBytes)
			}
			if s.InFlight&(s.InFlight-1) != 0 {
				t.Errorf("budget %d, %d partitions: ring %d is not a power of two", budget, parts, s.InFlight)
			}
			if held := int64(s.Queue+s.InFlight) * sizing.RecordCost; held > share*3/4 && s.Queue > 64 && s.InFlight > 1024 {
				t.Errorf("budget %d, %d partitions: queue %d + ring %d records hold %d bytes, over 3/4 of the share %d", budget, parts, s.Queue, s.InFlight, held, share)
			}
			if s.InFlight > p.inflightCap(parts) || s.Queue > 4096 || s.Queue < 64 || s.InFlight < 1024 {
				t.Errorf("budget %d, %d partitions: queue %d, ring %d out of bounds", budget, parts, s.Queue, s.InFlight)
			}
		}
	}
	// Few partitions keep the sizes they had before the budget.
	p := &Processor{o: Options{}}
	p.o = withDefaults(p.o)
	if s := p.bufferSizes(4, 4); s.Queue != 4096 || s.InFlight != p.inflightCap(4) {
		t.Errorf("4 partitions at the default budget: queue %d, ring %d; want %d and %d", s.Queue, s.InFlight, 4096, p.inflightCap(4))
	}
	// Many share the budget: 48 partitions hold no more than 48 minimum shares.
	if s := p.bufferSizes(48, 48); int64(s.Queue+s.InFlight)*sizing.RecordCost > sizing.MinPartitionShare {
		t.Errorf("48 partitions: queue %d + ring %d records exceed the minimum share", s.Queue, s.InFlight)
	}
}

// TestRecordLargerThanFetch: a partition whose share of the fetch buffer
// makes its fetch smaller than a record still reads that record (the broker
// returns a first batch larger than the fetch's MaxBytes) and the records
// after it.
func TestRecordLargerThanFetch(t *testing.T) {
	e := newTestEnv(t, 1, 1)
	o := e.options("large-record")
	o.FetchBufferBytes = 1 // the minimum share: a 256 KiB fetch
	p := &Processor{o: withDefaults(o)}
	big := strings.Repeat("x", 700<<10)
	if fetch := p.bufferSizes(1, 1).FetchBytes; fetch >= len(big) {
		t.Fatalf("fetch of %d bytes: the test needs one smaller than its %d-byte record", fetch, len(big))
	}
	out := e.collect()
	ts := time.Now()
	e.runMember(t, out, o, rec(0, "big", big, ts), rec(0, "after", "after", ts))
	var got []int
	for _, r := range out.recs {
		got = append(got, len(r.Value))
	}
	if !slices.Equal(got, []int{len(big), len("after")}) {
		t.Errorf("output value lengths %v, want [%d %d]", got, len(big), len("after"))
	}
}
