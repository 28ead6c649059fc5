package partition

import (
	"testing"

	"github.com/segmentio/kafka-go"
)

// TestHeaderArenaReuse: a full block is reused only once every ack slot
// that references it is retired; until then outputs get a new block, so the
// writer never sees a header change under it.
func TestHeaderArenaReuse(t *testing.T) {
	var a headerArena
	topic, part := []byte("in"), []byte("0")
	m := &kafka.Message{Offset: 12345, Headers: []kafka.Header{{Key: "trace", Value: []byte("x")}}}
	per := len(m.Headers) + 3
	var slot uint64
	first := a.headers(m, nil, topic, part, slot, 0)
	firstBlock := a.cur
	if len(first) != per || string(first[0].Key) != "trace" || string(first[3].Value) != "12345" {
		t.Fatalf("headers %v", first)
	}
	for a.cur == firstBlock {
		slot++
		a.headers(m, nil, topic, part, slot, 0) // nothing retired: the next block is new
	}
	if len(a.full) != 1 || a.full[0] != firstBlock || firstBlock.end != slot {
		t.Fatalf("first block not queued with end %d: full %d, end %d", slot, len(a.full), firstBlock.end)
	}
	if got := len(firstBlock.hdrs) / per; got*per+per <= arenaHeaders {
		t.Fatalf("block rotated after %d outputs with room left", got)
	}
	// Fill the second block while the first is still partly unacknowledged.
	second := a.cur
	for a.cur == second {
		slot++
		a.headers(m, nil, topic, part, slot, firstBlock.end-1)
	}
	if a.cur == firstBlock {
		t.Fatal("block reused while the writer may still read it")
	}
	// Everything in the first block is acknowledged: it comes back.
	third := a.cur
	for a.cur == third {
		slot++
		a.headers(m, nil, topic, part, slot, firstBlock.end)
	}
	if a.cur != firstBlock {
		t.Fatal("acknowledged block not reused")
	}
}
