package checkpoint

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os/exec"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// literalsInputs covers every block kind and every boundary: empty, shorter
// than a Huffman block, RLE, incompressible, counter-like (skewed), and
// lengths either side of the 128 KiB block size.
func literalsInputs() map[string][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	// Two 4-bit counters per byte, each mostly 0 or 1, as a filter's.
	counters := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			lo, hi := min(rng.IntN(4), 2)*rng.IntN(2), min(rng.IntN(4), 2)*rng.IntN(2)
			b[i] = byte(lo | hi<<4)
		}
		return b
	}
	return map[string][]byte{
		"empty":              {},
		"short":              []byte("a filter pair"),
		"below-huffman":      counters(minHuffBlock - 1),
		"rle":                bytes.Repeat([]byte{0x11}, 3*blockSize+5),
		"zeros":              make([]byte, blockSize),
		"random":             random(blockSize + 17),
		"counters-block":     counters(blockSize),
		"counters-block+1":   counters(blockSize + 1),
		"counters-block-1":   counters(blockSize - 1),
		"counters-many":      counters(5*blockSize + 1000),
		"counters-then-rand": append(counters(2*blockSize), random(blockSize)...),
	}
}

func encodeLiterals(t testing.TB, data []byte, writes int) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := newLiteralsEncoder(&buf)
	// Feed in uneven pieces so block boundaries fall inside writes.
	for rest := data; len(rest) > 0; {
		n := min(len(rest), max(1, len(data)/writes+7))
		if _, err := enc.Write(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestLiteralsFrameDecodes: whatever goes in, zstd.Decoder gives back
// exactly, in one frame, and a skewed input is stored smaller.
func TestLiteralsFrameDecodes(t *testing.T) {
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	for name, data := range literalsInputs() {
		t.Run(name, func(t *testing.T) {
			for _, writes := range []int{1, 3, 1000} {
				frame := encodeLiterals(t, data, writes)
				got, err := dec.DecodeAll(frame, nil)
				if err != nil {
					t.Fatalf("%d writes: decode: %v", writes, err)
				}
				if !bytes.Equal(got, data) {
					t.Fatalf("%d writes: decoded %d bytes differ from the %d written", writes, len(got), len(data))
				}
			}
		})
	}
	data := literalsInputs()["counters-many"]
	if frame := encodeLiterals(t, data, 1); len(frame) > len(data)*6/10 {
		t.Fatalf("counter-like input stored at %d of %d bytes; want under 0.6", len(frame), len(data))
	}
}

// TestLiteralsFrameZstdTool: the reference zstd implementation reads the
// frames too, so a snapshot can be opened with the zstd command.
func TestLiteralsFrameZstdTool(t *testing.T) {
	if _, err := exec.LookPath("zstd"); err != nil {
		t.Skip("zstd command not installed")
	}
	for name, data := range literalsInputs() {
		cmd := exec.Command("zstd", "-d", "-c", "-q")
		cmd.Stdin = bytes.NewReader(encodeLiterals(t, data, 2))
		got, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: zstd -d: %v", name, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: zstd -d gave %d bytes, want the %d written", name, len(got), len(data))
		}
	}
}

type failingWriter struct{ after int }

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errors.New("disk full")
	}
	f.after--
	return len(p), nil
}

// TestLiteralsWriteError: a failed write of the underlying writer is
// returned, and every later Write and Close returns it too.
func TestLiteralsWriteError(t *testing.T) {
	enc := newLiteralsEncoder(&failingWriter{after: 1})
	data := literalsInputs()["counters-many"]
	_, err := enc.Write(data)
	if err == nil {
		t.Fatal("Write succeeded through a failing writer")
	}
	if _, err2 := enc.Write([]byte{1}); err2 == nil {
		t.Fatal("Write after a failure succeeded")
	}
	if err2 := enc.Close(); err2 == nil {
		t.Fatal("Close after a failure succeeded")
	}
	if _, err := enc.Write([]byte{1}); err == nil {
		t.Fatal("Write after Close succeeded")
	}
}

// FuzzLiteralsFrame: any input round-trips through the encoder and
// zstd.Decoder.
func FuzzLiteralsFrame(f *testing.F) {
	for _, data := range literalsInputs() {
		if len(data) < 4096 {
			f.Add(data)
		}
	}
	f.Add(bytes.Repeat([]byte{0, 1, 0, 0, 0x10, 0x11}, 400))
	dec, err := zstd.NewReader(nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		frame := encodeLiterals(t, data, 3)
		got, err := dec.DecodeAll(frame, nil)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("decoded %d bytes differ from the %d written", len(got), len(data))
		}
	})
}
