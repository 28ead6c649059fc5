package checkpoint

import (
	"fmt"
	"hash"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/zstd"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func newCRC() hash.Hash32 { return crc32.New(castagnoli) }

func checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// countingWriter counts and checksums what passes through to w.
type countingWriter struct {
	w   io.Writer
	n   int64
	crc hash.Hash32
}

func newCountingWriter(w io.Writer) *countingWriter {
	return &countingWriter{w: w, crc: newCRC()}
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.crc.Write(p[:n])
	return n, err
}

// compress streams state through zstd into w and reports the raw size, the
// stored size and the CRC-32C of the stored bytes.
func compress(w io.Writer, state io.WriterTo) (raw, stored int64, sum uint32, err error) {
	out := newCountingWriter(w)
	enc, err := zstd.NewWriter(out, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false))
	if err != nil {
		return 0, 0, 0, fmt.Errorf("create zstd encoder: %w", err)
	}
	raw, err = state.WriteTo(enc)
	if err != nil {
		enc.Close()
		return 0, 0, 0, fmt.Errorf("write state: %w", err)
	}
	if err := enc.Close(); err != nil {
		return 0, 0, 0, fmt.Errorf("finish zstd stream: %w", err)
	}
	return raw, out.n, out.crc.Sum32(), nil
}

// decompressed wraps a zstd decoder so that Close releases it together with
// whatever the stored bytes are read from.
type decompressed struct {
	dec   *zstd.Decoder
	under io.Closer
}

func newDecompressed(r io.Reader, under io.Closer) (*decompressed, error) {
	dec, err := zstd.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("create zstd decoder: %w", err)
	}
	return &decompressed{dec: dec, under: under}, nil
}

func (d *decompressed) Read(p []byte) (int, error) { return d.dec.Read(p) }

func (d *decompressed) Close() error {
	d.dec.Close()
	if d.under != nil {
		return d.under.Close()
	}
	return nil
}
