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

// TestHopsRoles: an instance of one REPARTITION_HOPS role holds its own
// hops' memory only: rekey hop 1's reader and overhead per partition and
// the runtime, no pairs, fetch buffer or output batches; dedup everything
// but hop 1's reader; both (or no role) the sum.
func TestHopsRoles(t *testing.T) {
	const mib = 1 << 20
	hop1 := Repartition{RecordBytes: 500}.Hop1PartitionBytes()
	i := Instance{PairBytes: 20 * mib, Partitions: 4, OutputPartitions: 6, FetchBufferBytes: 64 * mib,
		ProduceBatchBytes: mib, Hop1PartitionBytes: hop1}
	both := i.LiveBytes()
	i.Hops = HopsBoth
	if got := i.LiveBytes(); got != both {
		t.Errorf("both: %d, want the default's %d", got, both)
	}
	i.Hops = HopsDedup
	if got, want := i.LiveBytes(), both-4*hop1; got != want {
		t.Errorf("dedup: %d, want %d (both without hop 1's reader)", got, want)
	}
	i.Hops = HopsRekey
	if got, want := i.LiveBytes(), 4*(hop1+PartitionOverhead)+RuntimeBase; got != want {
		t.Errorf("rekey: %d, want %d", got, want)
	}
	d := Deployment{PairBytes: 20 * mib, Partitions: 6, Replicas: 3, Hop1PartitionBytes: hop1, Hops: HopsRekey}.Resources()
	if want := (3*(hop1+PartitionOverhead) + RuntimeBase) * 5 / 4; d.Limit != want {
		t.Errorf("rekey deployment limit %d, want 3 partitions' %d", d.Limit, want)
	}
	if err := (Workload{KeysPerWindow: 1, Partitions: 1, Instances: 1, FPRate: 0.01, Window: time.Hour, Hops: HopsDedup}).Validate(); err == nil {
		t.Error("role dedup without a repartition topic validated")
	}
}
