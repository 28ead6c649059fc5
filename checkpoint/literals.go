package checkpoint

import (
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/huff0"
)

// literalsEncoder writes a standard zstd frame (RFC 8878) whose blocks
// hold literals only: each 128 KiB block is Huffman-coded on its own with
// huff0, the entropy coder zstd itself uses for literals, and carries no
// sequences.
//
// Why not zstd.Encoder: a filter pair's bytes are 4-bit counters of
// hashed keys. They have no repeats for a match finder to exploit, only a
// skewed byte distribution (most counters are 0 or 1). zstd.Encoder, even
// at SpeedFastest, spends most of its time searching for matches that are
// not there; entropy coding alone is several times cheaper and compresses
// such state better (BenchmarkEncode compares the two).
// The output is an ordinary zstd frame, so zstd.Decoder and the zstd
// command-line tool read it, and snapshots written by zstd.Encoder (older
// builds) still load through the same decoder.
//
// A literalsEncoder is not safe for concurrent use.
type literalsEncoder struct {
	w       io.Writer
	buf     []byte // the block being filled, up to blockSize
	out     []byte // the encoded block (headers and payload)
	scratch huff0.Scratch
	started bool // frame header written
	err     error
}

const (
	// blockSize is zstd's Block_Maximum_Size (128 KiB): the window the
	// frame header announces, and the most a block may regenerate.
	blockSize = 128 << 10
	// minHuffBlock: below this a block is stored raw. Four-stream
	// literals need ≥ 1 KiB in practice (zstd's own encoder draws the line
	// there too); only the last block of a stream can be this small.
	minHuffBlock = 1024

	blockRaw        = 0
	blockRLE        = 1
	blockCompressed = 2

	literalsCompressed = 2 // Compressed_Literals_Block: a Huffman tree description follows
)

// frameHeader is the zstd magic number, a Frame_Header_Descriptor with no
// content size, no checksum, no dictionary and no single-segment flag,
// and a Window_Descriptor of 2^17 bytes (exponent 7, mantissa 0): blocks
// never reference earlier data, so the window only bounds the block size.
var frameHeader = []byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, 7 << 3}

var errEncoderClosed = errors.New("literals encoder closed")

func newLiteralsEncoder(w io.Writer) *literalsEncoder {
	e := &literalsEncoder{buf: make([]byte, 0, blockSize), out: make([]byte, 0, blockSize+16)}
	e.scratch.Reuse = huff0.ReusePolicyNone // each block self-contained
	e.Reset(w)
	return e
}

// Reset discards any state and starts a new frame written to w.
func (e *literalsEncoder) Reset(w io.Writer) {
	e.w, e.buf, e.started, e.err = w, e.buf[:0], false, nil
}

func (e *literalsEncoder) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n := 0
	for len(p) > 0 {
		if len(e.buf) == blockSize {
			// Only flush a full block once more input follows, so that
			// Close can mark the final block as last.
			if e.err = e.writeBlock(false); e.err != nil {
				return n, e.err
			}
		}
		c := copy(e.buf[len(e.buf):blockSize], p)
		e.buf = e.buf[:len(e.buf)+c]
		p, n = p[c:], n+c
	}
	return n, nil
}

// Close writes the last block and ends the frame. It does not close the
// underlying writer.
func (e *literalsEncoder) Close() error {
	if e.err != nil {
		return e.err
	}
	e.err = e.writeBlock(true)
	if e.err == nil {
		e.err = errEncoderClosed
		return nil
	}
	return e.err
}

// writeBlock encodes e.buf as one block, writes it, and empties e.buf.
func (e *literalsEncoder) writeBlock(last bool) error {
	out := e.out[:0]
	if !e.started {
		out = append(out, frameHeader...)
		e.started = true
	}
	lits := e.buf
	var huff []byte
	err := huff0.ErrIncompressible
	if len(lits) >= minHuffBlock {
		huff, _, err = huff0.Compress4X(lits, &e.scratch)
	}
	switch {
	case err == nil && len(huff)+5+1 < len(lits):
		// Literals_Section_Header, Size_Format 3 (four streams, 18-bit
		// sizes, 5 bytes): type, format, Regenerated_Size,
		// Compressed_Size (tree description included), little-endian.
		lh := uint64(literalsCompressed) | 3<<2 | uint64(len(lits))<<4 | uint64(len(huff))<<22
		out = appendBlockHeader(out, last, blockCompressed, 5+len(huff)+1)
		out = append(out, byte(lh), byte(lh>>8), byte(lh>>16), byte(lh>>24), byte(lh>>32))
		out = append(out, huff...)
		out = append(out, 0) // Sequences_Section_Header: no sequences
	case errors.Is(err, huff0.ErrUseRLE):
		out = appendBlockHeader(out, last, blockRLE, len(lits))
		out = append(out, lits[0])
	case err == nil, errors.Is(err, huff0.ErrIncompressible), errors.Is(err, huff0.ErrTooBig):
		out = appendBlockHeader(out, last, blockRaw, len(lits))
		out = append(out, lits...)
	default:
		return fmt.Errorf("huffman-code block: %w", err)
	}
	e.out = out
	e.buf = e.buf[:0]
	if _, err := e.w.Write(out); err != nil {
		return fmt.Errorf("write block: %w", err)
	}
	return nil
}

// appendBlockHeader appends a zstd Block_Header: Last_Block, Block_Type and
// Block_Size in 3 little-endian bytes.
func appendBlockHeader(b []byte, last bool, typ, size int) []byte {
	h := uint32(typ)<<1 | uint32(size)<<3
	if last {
		h |= 1
	}
	return append(b, byte(h), byte(h>>8), byte(h>>16))
}
