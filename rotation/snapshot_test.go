package rotation

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// filled returns a pair with keys in both generations, some removed and some
// rotations behind it.
func filled(t testing.TB, o Options, keys uint64) *Pair {
	t.Helper()
	p := mustNew(t, o)
	for i := range keys {
		ts := epoch.Add(time.Duration(i) * 3 * o.Window / time.Duration(2*keys)) // 1.5 windows
		p.TestAndAdd(testKey(1, i), ts)
		if i%10 == 0 && o.Mode != Plain {
			if _, err := p.Remove(testKey(1, i/2), ts); err != nil {
				t.Fatal(err)
			}
		}
	}
	return p
}

func encode(t testing.TB, p *Pair) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := p.WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("WriteTo = %d, %v (wrote %d)", n, err, buf.Len())
	}
	return buf.Bytes()
}

func TestSnapshotRoundTrip(t *testing.T) {
	for _, mode := range modes {
		o := Options{ExpectedKeys: 200000, FPRate: 0.01, Window: time.Minute, Mode: mode}
		p := filled(t, o, 200000)
		data := encode(t, p)
		var q Pair // a zero Pair
		n, err := q.ReadFrom(bytes.NewReader(data))
		if err != nil || n != int64(len(data)) {
			t.Fatalf("%v: ReadFrom = %d, %v (snapshot %d bytes)", mode, n, err, len(data))
		}
		if q.Options() != p.Options() || q.Stats() != p.Stats() {
			t.Fatalf("%v: decoded %+v %+v, want %+v %+v", mode, q.Options(), q.Stats(), p.Options(), p.Stats())
		}
		differ, seen := 0, 0
		for i := range uint64(1_000_000) {
			k := testKey(byte(i%3), i)
			a := p.Test(k)
			if a != q.Test(k) {
				differ++
			}
			if a {
				seen++
			}
		}
		if differ != 0 || seen == 0 {
			t.Fatalf("%v: %d of a million probes answered differently (%d seen)", mode, differ, seen)
		}
		if again := encode(t, &q); !bytes.Equal(again, data) {
			t.Fatalf("%v: re-encoding differs", mode)
		}
		// The decoded pair carries on exactly like the original.
		ts := epoch.Add(2 * time.Minute)
		for i := range uint64(1000) {
			k := testKey(4, i)
			if p.TestAndAdd(k, ts) != q.TestAndAdd(k, ts) {
				t.Fatalf("%v: decoded pair diverges", mode)
			}
		}
		// ReadFrom replaces the state of a pair that already has one.
		r := mustNew(t, Options{ExpectedKeys: 10, FPRate: 0.1, Window: time.Hour, Mode: Counting})
		if _, err := r.ReadFrom(bytes.NewReader(data)); err != nil || r.Options() != p.Options() {
			t.Fatalf("%v: ReadFrom into a used pair: %v, %+v", mode, err, r.Options())
		}
	}
}

// small returns a small valid snapshot.
func small(t testing.TB, mode Mode) []byte {
	return encode(t, filled(t, Options{ExpectedKeys: 50, FPRate: 0.01, Window: time.Second, Mode: mode}, 60))
}

func TestSnapshotSingleByteCorruption(t *testing.T) {
	for _, mode := range modes {
		data := small(t, mode)
		for i := range data {
			for _, flip := range []byte{0x01, 0x80, 0xFF} {
				bad := bytes.Clone(data)
				bad[i] ^= flip
				p := filled(t, Options{ExpectedKeys: 10, FPRate: 0.01, Window: time.Hour, Mode: Counting}, 5)
				before := encode(t, p)
				_, err := p.ReadFrom(bytes.NewReader(bad))
				var ce *CorruptError
				if !errors.As(err, &ce) {
					t.Fatalf("%v: byte %d ^ %#x: err = %v, want *CorruptError", mode, i, flip, err)
				}
				if !bytes.Equal(encode(t, p), before) {
					t.Fatalf("%v: refused snapshot changed the receiver", mode)
				}
			}
		}
	}
}

func TestSnapshotTruncated(t *testing.T) {
	for _, mode := range modes {
		data := small(t, mode)
		for n := range len(data) {
			var p Pair
			_, err := p.ReadFrom(bytes.NewReader(data[:n]))
			var ce *CorruptError
			if !errors.Is(err, ErrTruncated) || !errors.As(err, &ce) {
				t.Fatalf("%v: truncated to %d of %d bytes: err = %v", mode, n, len(data), err)
			}
			if ce.Offset != int64(n) {
				t.Fatalf("truncated to %d: offset %d", n, ce.Offset)
			}
		}
	}
}

// reseal recomputes both checksums after a deliberate edit, so that the
// decoder's field checks are what refuses it.
func reseal(b []byte) []byte {
	binary.LittleEndian.PutUint32(b[96:], crc32.Checksum(b[:96], castagnoli))
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	return b
}

func TestSnapshotErrors(t *testing.T) {
	data := small(t, Counting)
	for _, tc := range []struct {
		name string
		edit func([]byte) []byte
		want error
		what string
	}{
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }, ErrInvalid, "magic"},
		{"version", func(b []byte) []byte { b[4] = 2; return b }, ErrVersion, "version"},
		{"header checksum", func(b []byte) []byte { b[40]++; return b }, ErrChecksum, "header"},
		{"data checksum", func(b []byte) []byte { b[headerSize+3] ^= 4; return b }, ErrChecksum, "checksum"},
		{"mode", func(b []byte) []byte { b[6] = 9; return reseal(b) }, ErrInvalid, "mode"},
		{"options", func(b []byte) []byte { binary.LittleEndian.PutUint64(b[24:], 0); return reseal(b) }, ErrInvalid, "options"},
		{"window start", func(b []byte) []byte { b[32]++; return reseal(b) }, ErrInvalid, "window start"},
		{"geometry", func(b []byte) []byte { binary.LittleEndian.PutUint64(b[48:], 1<<40); return reseal(b) }, ErrInvalid, "geometry"},
		{"k", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[56:], 99); return reseal(b) }, ErrInvalid, "geometry"},
		{"counts", func(b []byte) []byte { b[64]++; return reseal(b) }, ErrInvalid, "current counts"},
		{"counts vs data", func(b []byte) []byte { b[headerSize] ^= 0x10; return reseal(b) }, ErrInvalid, "current counts"},
	} {
		bad := tc.edit(bytes.Clone(data))
		var p Pair
		_, err := p.ReadFrom(bytes.NewReader(bad))
		var ce *CorruptError
		if !errors.Is(err, tc.want) || !errors.As(err, &ce) || ce.What != tc.what {
			t.Errorf("%s: err = %v, want %v in %q", tc.name, err, tc.want, tc.what)
		}
	}
	// Plain: bits beyond m.
	plain := small(t, Plain)
	var p Pair
	if _, err := p.ReadFrom(bytes.NewReader(plain)); err != nil {
		t.Fatal(err)
	}
	if tail := p.m % 64; tail != 0 {
		bad := bytes.Clone(plain)
		last := headerSize + 8*int(p.genWords()) - 1
		bad[last] |= 0x80
		if _, err := new(Pair).ReadFrom(bytes.NewReader(reseal(bad))); !errors.Is(err, ErrInvalid) {
			t.Errorf("bits beyond m: err = %v", err)
		}
	}
	// An uninitialised pair cannot be written; a failing writer's error is returned.
	if _, err := new(Pair).WriteTo(&bytes.Buffer{}); err == nil {
		t.Error("zero Pair wrote a snapshot")
	}
	boom := errors.New("disk full")
	if _, err := p.WriteTo(failingWriter{boom}); !errors.Is(err, boom) {
		t.Errorf("failing writer: err = %v", err)
	}
	if _, err := new(Pair).ReadFrom(failingReader{boom}); !errors.Is(err, boom) {
		t.Errorf("failing reader: err = %v", err)
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

// FuzzReadFrom: any input either decodes to a pair that re-encodes to exactly
// the bytes read, or is refused with a *CorruptError and leaves the receiver
// zero. Never a panic.
func FuzzReadFrom(f *testing.F) {
	for _, mode := range modes {
		data := small(f, mode)
		f.Add(data)
		f.Add(data[:headerSize])
		f.Add(data[:len(data)/2])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Pair
		n, err := p.ReadFrom(bytes.NewReader(data))
		if err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *CorruptError", err)
			}
			if p.initialised() {
				t.Fatal("refused snapshot changed the receiver")
			}
			return
		}
		if n > int64(len(data)) {
			t.Fatalf("read %d of %d bytes", n, len(data))
		}
		if again := encode(t, &p); !bytes.Equal(again, data[:n]) {
			t.Fatal("accepted snapshot does not re-encode to itself")
		}
	})
}

// TestWriteFuzzCorpus regenerates the checked-in seed corpus when
// ROTATION_WRITE_CORPUS=1; otherwise it checks the corpus is there.
func TestWriteFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzReadFrom")
	if os.Getenv("ROTATION_WRITE_CORPUS") != "1" {
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) == 0 {
			t.Fatalf("seed corpus missing in %s: %v", dir, err)
		}
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, mode := range modes {
		data := small(t, mode)
		seeds := map[string][]byte{
			"valid":          data,
			"header-only":    data[:headerSize],
			"truncated-data": data[:len(data)-5],
			"no-trailer":     data[:len(data)-4],
			"empty-pair":     encode(t, mustNew(t, Options{ExpectedKeys: 1, FPRate: 0.5, Window: time.Second, Mode: mode})),
		}
		for name, b := range seeds {
			content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
			if err := os.WriteFile(filepath.Join(dir, mode.String()+"-"+name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
