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
