package checkpoint

import (
	"context"
)

// writeGroup is how many chunks go to one WriteMessages call.
const writeGroup = 8

// chunkWriter cuts a stream into chunks of size bytes and hands them to
// flush writeGroup at a time.
type chunkWriter struct {
	ctx     context.Context
	size    int
	flush   func(context.Context, [][]byte) error
	cur     []byte
	pending [][]byte
	sums    []chunkSum
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if w.cur == nil {
			w.cur = make([]byte, 0, w.size)
		}
		k := min(len(p), w.size-len(w.cur))
		w.cur = append(w.cur, p[:k]...)
		p = p[k:]
		if len(w.cur) == w.size {
			if err := w.cut(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (w *chunkWriter) cut() error {
	w.sums = append(w.sums, chunkSum{Size: len(w.cur), CRC: checksum(w.cur)})
	w.pending = append(w.pending, w.cur)
	w.cur = nil
	if len(w.pending) < writeGroup {
		return nil
	}
	return w.send()
}

func (w *chunkWriter) send() error {
	if len(w.pending) == 0 {
		return nil
	}
	err := w.flush(w.ctx, w.pending)
	w.pending = nil
	return err
}

// Close writes what is left.
func (w *chunkWriter) Close() error {
	if len(w.cur) > 0 {
		w.sums = append(w.sums, chunkSum{Size: len(w.cur), CRC: checksum(w.cur)})
		w.pending = append(w.pending, w.cur)
		w.cur = nil
	}
	return w.send()
}
