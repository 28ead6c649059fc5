package checkpoint

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func fileHooks(dir string, keep int) chainHooks {
	path := func(t *testing.T, m Meta) string {
		t.Helper()
		return filepath.Join(dir, m.Topic, strconv.Itoa(m.Partition), pieceName(m.Seq, m.Base))
	}
	return chainHooks{
		corrupt: func(t *testing.T, m Meta) {
			t.Helper()
			if err := flipByte(func(size int64) int64 { return size / 4 })(path(t, m)); err != nil {
				t.Fatal(err)
			}
		},
		remove: func(t *testing.T, m Meta) {
			t.Helper()
			if err := os.Remove(path(t, m)); err != nil {
				t.Fatal(err)
			}
		},
		fresh: func(t *testing.T) Store {
			s, err := NewFileStore(FileOptions{Dir: dir, Keep: keep})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
}

func TestFileChainRoundTrip(t *testing.T) {
	dir := t.TempDir()
	checkChainRoundTrip(t, newFileStore(t, dir), fileHooks(dir, 3))
	// Increments are files of their own beside their base.
	names, err := filepath.Glob(filepath.Join(dir, "in", "0", "*"+incExt))
	if err != nil || len(names) != 7 {
		t.Errorf("increment files %v (%v), want 7", names, err)
	}
}

func TestFileChainPruning(t *testing.T) {
	dir := t.TempDir()
	s, err := NewFileStore(FileOptions{Dir: dir, Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	checkChainPruning(t, s, 2, fileHooks(dir, 2))
}

func TestFileChainDamagedIncrement(t *testing.T) {
	dir := t.TempDir()
	s := newFileStore(t, dir)
	checkChainCut(t, s, fileHooks(dir, 3), false)
	// The damaged increment is kept aside, by name.
	paths, seqs, bases := damagedPieces(s.partitionDir("in", 2))
	if len(paths) != 1 || seqs[0] != 4 || bases[0] != 1 {
		t.Errorf("kept aside %v seqs %v bases %v, want increment 4 of base 1", paths, seqs, bases)
	}
}

func TestFileChainMissingIncrement(t *testing.T) {
	dir := t.TempDir()
	checkChainCut(t, newFileStore(t, dir), fileHooks(dir, 3), true)
}

func TestFileChainRefusals(t *testing.T) {
	checkChainRefusals(t, newFileStore(t, t.TempDir()))
}

func TestFileChainConcurrent(t *testing.T) {
	dir := t.TempDir()
	checkChainConcurrent(t, []Store{newFileStore(t, dir), newFileStore(t, dir), newFileStore(t, dir)})
}

func TestFileChainCrash(t *testing.T) {
	dir := t.TempDir()
	s := newFileStore(t, dir)
	// A temporary left behind by a writer that died mid-increment.
	part := s.partitionDir("in", 5)
	if err := os.MkdirAll(part, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(part, tempPrefix+"dead"+fileExt), []byte("half an increment"), 0o644); err != nil {
		t.Fatal(err)
	}
	checkChainCrash(t, s, fileHooks(dir, 3))
}
