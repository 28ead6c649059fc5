package partition

import (
	"strconv"

	"github.com/segmentio/kafka-go"
)

// headerArena holds the header slices and source-offset texts of the
// outputs of one partition, so that an output costs no allocation of its
// own. The writer reads them until it has called Completion for the
// output; an arena is therefore reused only once the ack tracker has
// retired every slot that used it (retirement is in slot order, and a
// failed output is never retired, so its arena is never reused). One
// worker goroutine.
type headerArena struct {
	cur  *arenaBlock
	full []*arenaBlock // FIFO, oldest first
	// repart: the worker adds the repartition headers, after the source
	// headers of the record's origin (unwrap, origin.go).
	repart bool
}

// names are the topic, partition and offset headers the worker adds.
func (a *headerArena) names() *[3]string {
	if a.repart {
		return &repartitionNames
	}
	return &sourceNames
}

// sourceNames are the headers one hop adds to its outputs.
var sourceNames = [3]string{HeaderSourceTopic, HeaderSourcePartition, HeaderSourceOffset}

// repartitionNames are the headers the second hop adds to its outputs.
var repartitionNames = [3]string{HeaderRepartitionTopic, HeaderRepartitionPartition, HeaderRepartitionOffset}

type arenaBlock struct {
	hdrs   []kafka.Header
	digits []byte
	end    uint64 // ack slots below this index may reference the block
}

const (
	arenaHeaders = 4096     // a block holds ~1000 outputs with one header of their own
	arenaDigits  = 20 << 10 // ~20 digits each
)

// headers returns m's headers, the source headers with the values of
// source when it is not nil (a repartitioned record's origin), and the
// three headers of a.names, for the output in ack slot slot (the slot's
// index + 1 is recorded as the block's end). retired is the tracker's
// retired prefix as the worker last saw it.
func (a *headerArena) headers(m *kafka.Message, source *[3][]byte, topic, partition []byte, slot, retired uint64) []kafka.Header {
	n := len(m.Headers) + 3
	if source != nil {
		n += 3
	}
	b := a.cur
	if b == nil || cap(b.hdrs)-len(b.hdrs) < n || cap(b.digits)-len(b.digits) < 20 {
		b = a.next(n, retired)
	}
	start := len(b.hdrs)
	h := append(b.hdrs[start:start:start+n], m.Headers...)
	if source != nil {
		h = appendSource(h, source)
	}
	b.hdrs = b.hdrs[:start+n]
	d := len(b.digits)
	b.digits = strconv.AppendInt(b.digits, m.Offset, 10)
	b.end = slot + 1
	names := a.names()
	return append(h,
		kafka.Header{Key: names[0], Value: topic},
		kafka.Header{Key: names[1], Value: partition},
		kafka.Header{Key: names[2], Value: b.digits[d:len(b.digits):len(b.digits)]},
	)
}

// appendSource appends the source headers with the values of source.
func appendSource(h []kafka.Header, source *[3][]byte) []kafka.Header {
	for i, name := range sourceNames {
		h = append(h, kafka.Header{Key: name, Value: source[i]})
	}
	return h
}

// next retires the current block and returns a block with room for n
// headers: the oldest full one when the writer is done with it, else a new
// one.
func (a *headerArena) next(n int, retired uint64) *arenaBlock {
	if a.cur != nil {
		a.full = append(a.full, a.cur)
	}
	var b *arenaBlock
	if len(a.full) > 0 && a.full[0].end <= retired && cap(a.full[0].hdrs) >= n {
		b = a.full[0]
		a.full[0] = nil
		a.full = a.full[1:]
		b.hdrs, b.digits = b.hdrs[:0], b.digits[:0]
	} else {
		b = &arenaBlock{hdrs: make([]kafka.Header, 0, max(arenaHeaders, n)), digits: make([]byte, 0, arenaDigits)}
	}
	a.cur = b
	return b
}
