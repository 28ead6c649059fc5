package checkpoint

import (
	"bytes"
	"encoding/binary"
	"io"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"dedup/rotation"
)

// TestEncoderReuse saves several different states through one pooled
// encoder and decodes each: a Reset encoder must start a fresh frame.
func TestEncoderReuse(t *testing.T) {
	pool := newEncoderPool(1)
	for i := range 3 {
		state := bytes.Repeat([]byte{byte(i), 1, 2, 3, byte(i * 7)}, 100_000+i)
		var buf bytes.Buffer
		raw, stored, sum, err := pool.compress(&buf, bytes.NewReader(state))
		if err != nil {
			t.Fatal(err)
		}
		if raw != int64(len(state)) || stored != int64(buf.Len()) || sum != checksum(buf.Bytes()) {
			t.Fatalf("save %d: raw %d stored %d sum %08x; want %d %d %08x", i, raw, stored, sum, len(state), buf.Len(), checksum(buf.Bytes()))
		}
		d, err := newDecompressed(bytes.NewReader(buf.Bytes()), nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(d)
		d.Close()
		if err != nil || !bytes.Equal(got, state) {
			t.Fatalf("save %d: decoded %d bytes (err %v), want the %d saved", i, len(got), err, len(state))
		}
	}
	if len(pool.free) != 1 {
		t.Fatalf("pool holds %d encoders, want 1", len(pool.free))
	}
}

var (
	codecPairOnce sync.Once
	codecPair     *rotation.Pair
)

// designPair is the partition (10,000,000 keys, fp 0.001, counting)
// with both generations holding 10 M keys, as BenchmarkFileSave's.
func designPair(b *testing.B) *rotation.Pair {
	codecPairOnce.Do(func() {
		p, err := rotation.New(rotation.Options{ExpectedKeys: 10_000_000, FPRate: 0.001, Window: time.Hour, Mode: rotation.Counting})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Unix(0, 0).Add(1000 * time.Hour)
		key := make([]byte, 8)
		for gen := range 2 {
			for i := range uint64(10_000_000) {
				binary.LittleEndian.PutUint64(key, uint64(gen)<<40|i)
				p.TestAndAdd(key, t0.Add(time.Duration(gen)*time.Hour))
			}
		}
		codecPair = p
	})
	return codecPair
}

func cpuNow(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkEncode is the CPU of encoding alone (to io.Discard: no file, no
// fsync) per snapshot of a design-load pair: zstd.Encoder at the settings
// the previous build saved with (SpeedFastest, no CRC, concurrency 1,
// pooled) beside compress as Save runs it now (literals-only frames,
// literals.go), in one run. Both include the CRC-32C of the stored bytes.
// It reports CPU seconds per snapshot (all goroutines of the process) and
// the stored/raw ratio.
//
//	go test ./checkpoint -run '^$' -bench Encode -benchtime 4x
func BenchmarkEncode(b *testing.B) {
	zenc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false), zstd.WithEncoderConcurrency(1))
	if err != nil {
		b.Fatal(err)
	}
	variants := []struct {
		name   string
		encode func(w io.Writer, state io.WriterTo) (raw, stored int64, err error)
	}{
		{"zstd-fastest", func(w io.Writer, state io.WriterTo) (int64, int64, error) {
			out := newCountingWriter(w)
			zenc.Reset(out)
			raw, err := state.WriteTo(zenc)
			if err == nil {
				err = zenc.Close()
			}
			return raw, out.n, err
		}},
		{"literals", func(w io.Writer, state io.WriterTo) (int64, int64, error) {
			raw, stored, _, err := encoders.compress(w, state)
			return raw, stored, err
		}},
	}
	p := designPair(b)
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(int64(p.SizeBytes()))
			var raw, stored int64
			cpu := cpuNow(b)
			for b.Loop() {
				var err error
				if raw, stored, err = v.encode(io.Discard, p); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((cpuNow(b)-cpu).Seconds()/float64(b.N), "cpu-s/op")
			b.ReportMetric(float64(stored)/float64(raw), "stored/raw")
			b.ReportMetric(float64(stored)/1e6, "stored-MB")
		})
	}
}
