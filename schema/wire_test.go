package schema

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

func TestFrame(t *testing.T) {
	var h sr.ConfluentHeader
	for _, c := range []struct {
		id    int
		index []int
		body  string
	}{
		{0, nil, ""},
		{1, nil, "avro-body"},
		{0x01020304, []int{0}, "proto"},
		{0x7fffffff, []int{1, 2}, "x"},
	} {
		value, err := h.AppendEncode(nil, c.id, c.index)
		if err != nil {
			t.Fatal(err)
		}
		value = append(value, c.body...)
		id, payload, ok := Frame(value)
		if !ok || id != uint32(c.id) {
			t.Fatalf("Frame(%x) = %d, %v", value, id, ok)
		}
		// The payload is what the real decoder leaves after the id.
		wantID, rest, err := h.DecodeID(value)
		if err != nil || wantID != c.id || !bytes.Equal(payload, rest) {
			t.Errorf("Frame(%x) payload %x, sr says %d %x %v", value, payload, wantID, rest, err)
		}
	}
	// The largest id the 4 bytes hold.
	if id, payload, ok := Frame([]byte{0, 0xff, 0xff, 0xff, 0xff, 9}); !ok || id != 0xffffffff || !bytes.Equal(payload, []byte{9}) {
		t.Errorf("id 0xffffffff: %d %x %v", id, payload, ok)
	}
	// Exactly the header: an empty payload.
	if id, payload, ok := Frame([]byte{0, 0, 0, 0, 3}); !ok || id != 3 || len(payload) != 0 {
		t.Errorf("header only: %d %x %v", id, payload, ok)
	}
	for _, v := range [][]byte{nil, {}, {0}, {0, 0, 0, 1}, {1, 0, 0, 0, 1, 'x'}, {0xff, 0, 0, 0, 1}, []byte(`{"id":1}`)} {
		if id, payload, ok := Frame(v); ok || id != 0 || payload != nil {
			t.Errorf("Frame(%x) = %d, %x, %v; want not ok", v, id, payload, ok)
		}
	}
	value := []byte{0, 0, 0, 1, 0, 2, 3}
	if allocs := testing.AllocsPerRun(100, func() { _, _, _ = Frame(value) }); allocs != 0 {
		t.Errorf("Frame allocates %v", allocs)
	}
}
