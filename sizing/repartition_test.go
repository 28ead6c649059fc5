package sizing

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestRepartitionSizing: the repartition topic carries every input record
// plus its origin headers and dedup key, produced and fetched once each,
// kept for its retention on every replica; the report prints it.
func TestRepartitionSizing(t *testing.T) {
	r := Repartition{RecordsPerSecond: 1000, RecordBytes: 400, KeyBytes: 16, Retention: time.Hour, Replication: 3,
		InputTopic: "events", Topic: "events-repartition"}
	// The trailer "events/ppp/oooooooooo/cc/" (6+3+10+2 and four
	// slashes), flags, length and magic (1+4+4), and the 16-byte key.
	want := int64(6+3+10+2+4) + 9 + 16
	if got := r.OriginBytes(); got != want {
		t.Errorf("origin bytes %d, want %d", got, want)
	}
	if got, want := r.Throughput(), 1000*float64(400+want); got != want {
		t.Errorf("throughput %v, want %v", got, want)
	}
	if got, want := r.Storage(), r.Throughput()*3600*3; got != want {
		t.Errorf("storage %v, want %v", got, want)
	}
	var b bytes.Buffer
	r.Write(&b)
	for _, s := range []string{"1000 records/s of 400 bytes", "produced by hop 1", "replication 3", BytesIEC(r.Storage())} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, b.String())
		}
	}
}

// TestHop1PartitionBytes: three fetches and the batch in hand with its
// trailers (28 bytes each here: no topic name, no key), 1 MiB each by
// default; an instance counts it per partition it holds.
func TestHop1PartitionBytes(t *testing.T) {
	r := Repartition{RecordBytes: 500}
	if got, want := r.Hop1PartitionBytes(), int64(3<<20+1<<20+(1<<20)/500*28); got != want {
		t.Errorf("defaults: %d, want %d", got, want)
	}
	r.FetchBytes, r.BatchBytes = 64<<10, 100<<10
	if got, want := r.Hop1PartitionBytes(), int64(3*64<<10+100<<10+(100<<10)/500*28); got != want {
		t.Errorf("64 KiB, 100 KiB: %d, want %d", got, want)
	}
	base := Instance{PairBytes: 1 << 20, Partitions: 4, OutputPartitions: 4}
	with := base
	with.Hop1PartitionBytes = r.Hop1PartitionBytes()
	if d := with.LiveBytes() - base.LiveBytes(); d != 4*r.Hop1PartitionBytes() {
		t.Errorf("4 partitions: live bytes grew by %d, want %d", d, 4*r.Hop1PartitionBytes())
	}
}
