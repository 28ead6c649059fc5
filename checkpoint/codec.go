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

// encoderPool keeps encoders between snapshots: an encoder's block buffers
// are allocated once and Reset for each Save instead of per snapshot. It
// holds at most cap(free) idle encoders; concurrent Saves beyond that
// create (and drop) their own. The encoder runs synchronously in the saving
// goroutine, so a background save occupies at most one core and never both
// cores of a small machine that the workers need.
type encoderPool struct {
	free chan *literalsEncoder
}

func newEncoderPool(size int) *encoderPool {
	return &encoderPool{free: make(chan *literalsEncoder, size)}
}

var encoders = newEncoderPool(2)

func (p *encoderPool) get(w io.Writer) *literalsEncoder {
	select {
	case enc := <-p.free:
		enc.Reset(w)
		return enc
	default:
		return newLiteralsEncoder(w)
	}
}

// put returns an encoder that has been closed. An encoder whose stream
// failed is dropped rather than reused.
func (p *encoderPool) put(enc *literalsEncoder) {
	enc.Reset(nil) // do not keep the last writer alive
	select {
	case p.free <- enc:
	default:
	}
}

// compress streams state as a zstd frame into w and reports the raw size,
// the stored size and the CRC-32C of the stored bytes.
//
// The frame carries no zstd content checksum (XXH64 of the raw stream):
// the store already CRC-32Cs the stored bytes (Meta.Checksum, and each
// Kafka chunk) and verifies them before decoding, and the state's own
// format (rotation) CRC-32Cs its raw stream and verifies it in ReadFrom.
func compress(w io.Writer, state io.WriterTo) (raw, stored int64, sum uint32, err error) {
	return encoders.compress(w, state)
}

func (p *encoderPool) compress(w io.Writer, state io.WriterTo) (raw, stored int64, sum uint32, err error) {
	out := newCountingWriter(w)
	enc := p.get(out)
	raw, err = state.WriteTo(enc)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("write state: %w", err)
	}
	if err := enc.Close(); err != nil {
		return 0, 0, 0, fmt.Errorf("finish zstd frame: %w", err)
	}
	p.put(enc)
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
