package checkpoint

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// FuzzFileLoad damages a valid snapshot file at random: Load must either
// return exactly the saved state or reject the file, never panic and never
// hand decode bytes that differ from what was saved.
func FuzzFileLoad(f *testing.F) {
	dir := f.TempDir()
	s, err := NewFileStore(FileOptions{Dir: dir})
	if err != nil {
		f.Fatal(err)
	}
	st := newState(3, 4000)
	m, err := s.Save(context.Background(), testMeta("in", 0, 1), st)
	if err != nil {
		f.Fatal(err)
	}
	valid, err := os.ReadFile(filepath.Join(s.partitionDir("in", 0), fileName(m.Seq)))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint32(0), byte(0), uint32(len(valid)))
	f.Add(uint32(10), byte(1), uint32(len(valid)))
	f.Add(uint32(len(valid)-3), byte(0x80), uint32(len(valid)))
	f.Add(uint32(0), byte(0), uint32(len(valid)-1))
	f.Fuzz(func(t *testing.T, at uint32, xor byte, size uint32) {
		b := bytes.Clone(valid)
		b[int(at)%len(b)] ^= xor
		b = b[:int(size)%(len(b)+1)]
		fs, err := NewFileStore(FileOptions{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		dir := fs.partitionDir("in", 0)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fileName(1)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		var got []byte
		_, _, err = fs.Load(context.Background(), "in", 0, collect(&got, new(Meta)))
		if err == nil && !bytes.Equal(got, st) {
			t.Fatalf("damaged file loaded as %d different bytes", len(got))
		}
		intact := xor == 0 && int(size)%(len(valid)+1) == len(valid)
		if intact && err != nil {
			t.Fatalf("intact file rejected: %v", err)
		}
	})
}

// FuzzFileChainLoad damages a valid increment file at random: Load must
// apply the base and then either exactly the saved increment or nothing
// more (a fallback to the base), never panic and never hand decode bytes
// that differ from what was saved.
func FuzzFileChainLoad(f *testing.F) {
	dir := f.TempDir()
	s, err := NewFileStore(FileOptions{Dir: dir})
	if err != nil {
		f.Fatal(err)
	}
	baseState, incState := newState(3, 4000), newState(4, 600)
	base, err := s.Save(context.Background(), testMeta("in", 0, 1), baseState)
	if err != nil {
		f.Fatal(err)
	}
	im := testMeta("in", 0, 2)
	im.Base, im.Prev = base.Seq, base.Seq
	inc, err := s.Save(context.Background(), im, incState)
	if err != nil {
		f.Fatal(err)
	}
	pdir := s.partitionDir("in", 0)
	baseFile, err := os.ReadFile(filepath.Join(pdir, fileName(base.Seq)))
	if err != nil {
		f.Fatal(err)
	}
	valid, err := os.ReadFile(filepath.Join(pdir, incName(inc.Seq, base.Seq)))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint32(0), byte(0), uint32(len(valid)))
	f.Add(uint32(10), byte(1), uint32(len(valid)))
	f.Add(uint32(len(valid)-30), byte(0x20), uint32(len(valid)))
	f.Add(uint32(len(valid)-3), byte(0x80), uint32(len(valid)))
	f.Add(uint32(0), byte(0), uint32(len(valid)-1))
	f.Fuzz(func(t *testing.T, at uint32, xor byte, size uint32) {
		b := bytes.Clone(valid)
		b[int(at)%len(b)] ^= xor
		b = b[:int(size)%(len(b)+1)]
		fs, err := NewFileStore(FileOptions{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		dir := fs.partitionDir("in", 0)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fileName(base.Seq)), baseFile, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, incName(inc.Seq, base.Seq)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		var a applied
		head, src, err := fs.Load(context.Background(), "in", 0, a.decode)
		if err != nil {
			t.Fatalf("load with an intact base: %v", err)
		}
		if len(a.states) == 0 || a.states[0] != string(baseState) {
			t.Fatal("base not restored")
		}
		if len(a.states) > 1 && (len(a.states) != 2 || a.states[1] != string(incState) || head.Seq != inc.Seq) {
			t.Fatalf("damaged increment applied as %d different bytes", len(a.states[1]))
		}
		intact := xor == 0 && int(size)%(len(valid)+1) == len(valid)
		if intact && (src != SourceLatest || len(a.states) != 2) {
			t.Fatalf("intact increment not applied: %q, %d pieces", src, len(a.states))
		}
		if len(a.states) == 1 && (src != SourceFallback || head.Seq != base.Seq) {
			t.Fatalf("increment dropped: source %q head %d, want a fallback to the base", src, head.Seq)
		}
	})
}
