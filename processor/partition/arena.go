package partition

import (
	"strconv"

	"github.com/segmentio/kafka-go"
)

// headerArena holds the header slices and offset texts of the
// outputs of one partition, so that an output costs no allocation of its
// own. The writer reads them until it has called Completion for the
// output; an arena is therefore reused only once the ack tracker has
// retired every slot that used it (retirement is in slot order, and a
// failed output is never retired, so its arena is never reused). One
// worker goroutine.
type headerArena struct {
	cur  *arenaBlock
	full []*arenaBlock // FIFO, oldest first
	// prefix is hop 2's: its outputs carry the source headers of their
	// origin (unwrap, origin.go) and one HeaderRepartition header whose
	// value is prefix ("<topic>/<partition>/") and the offset. Nil in one
	// hop, whose outputs carry the three source headers.
	prefix []byte
}

// sourceNames are the source headers, in the order outputs carry them.
var sourceNames = [3]string{HeaderSourceTopic, HeaderSourcePartition, HeaderSourceOffset}

// added is how many headers the worker adds to an output whose origin's
// source header values are source (nil: none).
func (a *headerArena) added(source *[3][]byte) int {
	switch {
	case a.prefix == nil:
		return 3
	case source != nil:
		return 4
	}
	return 1
}

// appendAdded appends the headers the worker adds: in one hop the source
// headers naming topic, partition and text (the offset); in hop 2 the
// source headers with the values of source (when the record has an
// origin) and the repartition header with text (see text).
func (a *headerArena) appendAdded(h []kafka.Header, source *[3][]byte, topic, partition, text []byte) []kafka.Header {
	if a.prefix == nil {
		return append(h,
			kafka.Header{Key: HeaderSourceTopic, Value: topic},
			kafka.Header{Key: HeaderSourcePartition, Value: partition},
			kafka.Header{Key: HeaderSourceOffset, Value: text},
		)
	}
	if source != nil {
		for i, name := range sourceNames {
			h = append(h, kafka.Header{Key: name, Value: source[i]})
		}
	}
	return append(h, kafka.Header{Key: HeaderRepartition, Value: text})
}

// text appends to b the value of the last header appendAdded appends for
// the record at offset.
func (a *headerArena) text(b []byte, offset int64) []byte {
	return strconv.AppendInt(append(b, a.prefix...), offset, 10)
}

// addedSize is the encoded size of the headers appendAdded appends for the
// record at offset.
func (a *headerArena) addedSize(source *[3][]byte, topic, partition []byte, offset int64) int64 {
	if a.prefix == nil {
		return headerSize(HeaderSourceTopic, len(topic)) + headerSize(HeaderSourcePartition, len(partition)) +
			headerSize(HeaderSourceOffset, offsetDigits(offset))
	}
	n := headerSize(HeaderRepartition, len(a.prefix)+offsetDigits(offset))
	if source != nil {
		for i, name := range sourceNames {
			n += headerSize(name, len(source[i]))
		}
	}
	return n
}

type arenaBlock struct {
	hdrs   []kafka.Header
	digits []byte
	end    uint64 // ack slots below this index may reference the block
}

const (
	arenaHeaders = 4096     // a block holds ~1000 outputs with one header of their own
	arenaDigits  = 20 << 10 // ~20 digits each
	arenaTexts   = 1000     // hop 2's texts start with the prefix
)

// headers returns m's headers and those appendAdded adds, for the output
// in ack slot slot (the slot's index + 1 is recorded as the block's end).
// retired is the tracker's retired prefix as the worker last saw it.
func (a *headerArena) headers(m *kafka.Message, source *[3][]byte, topic, partition []byte, slot, retired uint64) []kafka.Header {
	n := len(m.Headers) + a.added(source)
	b := a.cur
	if b == nil || cap(b.hdrs)-len(b.hdrs) < n || cap(b.digits)-len(b.digits) < len(a.prefix)+20 {
		b = a.next(n, retired)
	}
	start := len(b.hdrs)
	h := append(b.hdrs[start:start:start+n], m.Headers...)
	b.hdrs = b.hdrs[:start+n]
	d := len(b.digits)
	b.digits = a.text(b.digits, m.Offset)
	b.end = slot + 1
	return a.appendAdded(h, source, topic, partition, b.digits[d:len(b.digits):len(b.digits)])
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
		b = &arenaBlock{hdrs: make([]kafka.Header, 0, max(arenaHeaders, n)), digits: make([]byte, 0, arenaDigits+arenaTexts*len(a.prefix))}
	}
	a.cur = b
	return b
}
