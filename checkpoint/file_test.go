package checkpoint

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

func newFileStore(t *testing.T, dir string) *FileStore {
	t.Helper()
	s, err := NewFileStore(FileOptions{Dir: dir, Keep: 3})
	if err != nil {
		t.Fatalf("new file store: %v", err)
	}
	return s
}

func TestFileRoundTrip(t *testing.T) {
	checkRoundTrip(t, newFileStore(t, t.TempDir()), 1<<20)
}

func TestFileKeepsLastN(t *testing.T) {
	dir := t.TempDir()
	checkKeep(t, newFileStore(t, dir), 3)
	files, err := filepath.Glob(filepath.Join(dir, "keep", "0", "*"))
	if err != nil || len(files) != 3 {
		t.Errorf("files on disk: %v (%v), want 3", files, err)
	}
}

func TestFileGroupLayout(t *testing.T) {
	dir := t.TempDir()
	s, err := NewFileStore(FileOptions{Dir: dir, Group: "grp"})
	if err != nil {
		t.Fatal(err)
	}
	m := testMeta("in", 7, 1)
	m.Group = ""
	saved := mustSave(t, s, m, newState(1, 100))
	if saved.Group != "grp" {
		t.Errorf("group = %q, want the store's", saved.Group)
	}
	if _, err := os.Stat(filepath.Join(dir, "grp", "in", "7", fileName(saved.Seq))); err != nil {
		t.Errorf("snapshot not at <dir>/<group>/<topic>/<partition>: %v", err)
	}
	m.Group = "other"
	if _, err := s.Save(context.Background(), m, newState(1, 100)); err == nil {
		t.Error("save of another group's meta succeeded")
	}
}

// damage saves two snapshots, damages the newest with f, and expects Load to
// fall back to the older one and List to flag the newest.
func damage(t *testing.T, f func(path string) error, want error) {
	t.Helper()
	s := newFileStore(t, t.TempDir())
	st1 := newState(1, 200_000)
	m1 := mustSave(t, s, testMeta("in", 0, 10), st1)
	m2 := mustSave(t, s, testMeta("in", 0, 20), newState(2, 200_000))
	path := filepath.Join(s.partitionDir("in", 0), fileName(m2.Seq))
	if err := f(path); err != nil {
		t.Fatal(err)
	}
	var got []byte
	var meta Meta
	var reports []Damage
	ctx := WithDamageReport(context.Background(), func(d Damage) { reports = append(reports, d) })
	loaded, src, err := s.Load(ctx, "in", 0, collect(&got, &meta))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if src != SourceFallback || loaded.Seq != m1.Seq || loaded.Offset != 10 || string(got) != string(st1) {
		t.Errorf("loaded seq %d offset %d source %q, want the older snapshot %d as fallback", loaded.Seq, loaded.Offset, src, m1.Seq)
	}
	// Reported once, by name, and moved aside rather than left to pruning.
	var ce *CorruptError
	if len(reports) != 1 || reports[0].Where != path || reports[0].Seq != m2.Seq ||
		!errors.As(reports[0].Err, &ce) || ce.Path != path || !errors.Is(ce, want) {
		t.Fatalf("damage reports %+v, want one for %s wrapping %v", reports, path, want)
	}
	kept := reports[0].KeptAt
	if filepath.Dir(kept) != filepath.Join(s.partitionDir("in", 0), damagedDir) {
		t.Errorf("kept at %q, want under the partition's %s/", kept, damagedDir)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("damaged file still at %s: %v", path, err)
	}
	entries, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Meta.Seq != m1.Seq || entries[0].Err != nil || entries[0].Damaged ||
		entries[1].Meta.Seq != m2.Seq || !entries[1].Damaged || entries[1].Where != kept {
		t.Fatalf("entries %+v", entries)
	}
	if !errors.As(entries[1].Err, &ce) || ce.Path != kept || !errors.Is(ce, want) {
		t.Errorf("damaged entry error %v, want *CorruptError for %s wrapping %v", entries[1].Err, kept, want)
	}
	// A second Load finds nothing new to report.
	reports = nil
	if _, _, err := s.Load(ctx, "in", 0, collect(&got, &meta)); err != nil || len(reports) != 0 {
		t.Errorf("second load: %v, %d damage reports, want nil and none", err, len(reports))
	}
}

func flipByte(at func(size int64) int64) func(string) error {
	return func(path string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		b[at(int64(len(b)))] ^= 0x40
		return os.WriteFile(path, b, 0o644)
	}
}

func TestFileCorruptPayloadFallsBack(t *testing.T) {
	damage(t, flipByte(func(size int64) int64 { return size / 3 }), ErrChecksum)
}

func TestFileCorruptMetaFallsBack(t *testing.T) {
	damage(t, flipByte(func(size int64) int64 { return size - int64(footerFixed) - 5 }), ErrChecksum)
}

func TestFileTruncatedFallsBack(t *testing.T) {
	damage(t, func(path string) error {
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		return os.Truncate(path, info.Size()/2)
	}, ErrTruncated)
}

func TestFileAllRejected(t *testing.T) {
	s := newFileStore(t, t.TempDir())
	m1 := mustSave(t, s, testMeta("in", 0, 10), newState(1, 1000))
	m2 := mustSave(t, s, testMeta("in", 0, 20), newState(2, 1000))
	if err := os.Truncate(filepath.Join(s.partitionDir("in", 0), fileName(m2.Seq)), 10); err != nil {
		t.Fatal(err)
	}
	refuse := errors.New("refused by decode")
	_, _, err := s.Load(context.Background(), "in", 0, func(Meta, io.Reader) error { return refuse })
	var le *LoadError
	if !errors.As(err, &le) || len(le.Rejected) != 2 || le.Rejected[0].Seq != m2.Seq || le.Rejected[1].Seq != m1.Seq {
		t.Fatalf("load error %v, want *LoadError rejecting seq %d then %d", err, m2.Seq, m1.Seq)
	}
	var ce *CorruptError
	if !errors.As(le.Rejected[0].Err, &ce) || !errors.Is(err, refuse) {
		t.Errorf("rejections %v: want a *CorruptError and the decode error", err)
	}
}

func TestFileSweepsStaleTemporaries(t *testing.T) {
	dir := t.TempDir()
	part := filepath.Join(dir, "in", "0")
	if err := os.MkdirAll(part, 0o755); err != nil {
		t.Fatal(err)
	}
	stale, fresh := filepath.Join(part, tempPrefix+"1.ckpt"), filepath.Join(part, tempPrefix+"2.ckpt")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("half a snapshot"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	s, err := NewFileStore(FileOptions{Dir: dir, StaleAfter: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale temporary still there: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh temporary (maybe another writer's) removed: %v", err)
	}
	if _, _, err := s.Load(context.Background(), "in", 0, collect(new([]byte), new(Meta))); !errors.Is(err, ErrNotFound) {
		t.Errorf("load with only temporaries: %v, want ErrNotFound", err)
	}
}

// A writer whose listing went stale (descheduled between listing and
// linking) picks a number that was published and pruned meanwhile: its link
// succeeds below the newest snapshot. claim must take it back, so that no
// number is given twice and the newest checkpoint is never ranked older.
func TestFilePublishRefusesStaleNumber(t *testing.T) {
	s := newFileStore(t, t.TempDir())
	for n := range 7 {
		if _, err := s.Save(context.Background(), testMeta("in", 0, int64(n)), newState(uint64(n), 1000)); err != nil {
			t.Fatal(err)
		}
	}
	dir := s.partitionDir("in", 0)
	if seqs, err := snapshots(dir); err != nil || !slices.Equal(seqs, []uint64{7, 6, 5}) {
		t.Fatalf("snapshots %v, %v; want [7 6 5]", seqs, err)
	}
	tmp := filepath.Join(dir, tempPrefix+"stale"+fileExt)
	if err := os.WriteFile(tmp, []byte("complete snapshot"), 0o644); err != nil {
		t.Fatal(err)
	}

	if err := claim(tmp, dir, 2); !errors.Is(err, errSuperseded) {
		t.Fatalf("claim of pruned number 2 below 7: %v, want errSuperseded", err)
	}
	if _, err := os.Stat(filepath.Join(dir, fileName(2))); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("superseded link not taken back: %v", err)
	}
	if err := claim(tmp, dir, 7); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("claim of taken number 7: %v, want fs.ErrExist", err)
	}
	if seqs, err := snapshots(dir); err != nil || !slices.Equal(seqs, []uint64{7, 6, 5}) {
		t.Fatalf("after refused claims: snapshots %v, %v; want [7 6 5] untouched", seqs, err)
	}

	seq, err := publish(tmp, dir)
	if err != nil || seq != 8 {
		t.Fatalf("publish = %d, %v; want 8", seq, err)
	}
	mine, err1 := os.Stat(tmp)
	got, err2 := os.Stat(filepath.Join(dir, fileName(8)))
	if err1 != nil || err2 != nil || !os.SameFile(mine, got) {
		t.Fatalf("snapshot 8 is not the published file: %v, %v", err1, err2)
	}
}

// Many small Saves from many goroutines on one partition: numbers are never
// given twice, and a Save that finished before another began has the lower
// number (Load ranks snapshots by number). Stale listings are common here:
// a goroutine is often descheduled between listing and linking.
func TestFileSeqsOrderedUnderContention(t *testing.T) {
	dir := t.TempDir()
	const writers, saves = 8, 60
	var (
		spans saveSpans
		wg    sync.WaitGroup
	)
	for w := range writers {
		s := newFileStore(t, dir)
		wg.Go(func() {
			for n := range saves {
				if err := spans.save(context.Background(), s, testMeta("in", 0, int64(n)), newState(uint64(w*1000+n), 64)); err != nil {
					t.Errorf("save: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for _, a := range spans.spans {
		if seen[a.seq] {
			t.Errorf("seq %d given twice", a.seq)
		}
		seen[a.seq] = true
	}
	spans.checkOrdered(t)
}

// Several stores on one directory, several goroutines each: every Save gets
// its own seq, nothing half-written is ever visible, Load returns the newest.
func TestFileConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	const stores, writers, saves = 2, 3, 4
	var (
		mu     sync.Mutex
		states = map[uint64]state{}
		wg     sync.WaitGroup
	)
	for i := range stores {
		s := newFileStore(t, dir)
		for w := range writers {
			wg.Go(func() {
				for n := range saves {
					st := newState(uint64(i*100+w*10+n), 50_000)
					m, err := s.Save(context.Background(), testMeta("in", 0, int64(n)), st)
					if err != nil {
						t.Errorf("save: %v", err)
						return
					}
					mu.Lock()
					if _, dup := states[m.Seq]; dup {
						t.Errorf("seq %d given twice", m.Seq)
					}
					states[m.Seq] = st
					mu.Unlock()
					// Readers run alongside the writers and must never fail.
					if _, _, err := s.Load(context.Background(), "in", 0, collect(new([]byte), new(Meta))); err != nil {
						t.Errorf("load during writes: %v", err)
					}
				}
			})
		}
	}
	wg.Wait()
	if len(states) != stores*writers*saves {
		t.Fatalf("%d distinct seqs, want %d", len(states), stores*writers*saves)
	}
	s := newFileStore(t, dir)
	entries, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Err != nil {
			t.Errorf("entry %s: %v", e.Where, e.Err)
		}
	}
	seqs := make([]uint64, 0, len(states))
	for seq := range states {
		seqs = append(seqs, seq)
	}
	newest := slices.Max(seqs)
	var got []byte
	m, _, err := s.Load(context.Background(), "in", 0, collect(&got, new(Meta)))
	if err != nil || m.Seq != newest || string(got) != string(states[newest]) {
		t.Errorf("load: seq %d err %v, want the newest seq %d with its state", m.Seq, err, newest)
	}
	tmps, _ := filepath.Glob(filepath.Join(dir, "in", "0", tempPrefix+"*"))
	if len(tmps) != 0 {
		t.Errorf("temporaries left: %v", tmps)
	}
}

func TestFileOpenListed(t *testing.T) {
	s := newFileStore(t, t.TempDir())
	st := newState(5, 10_000)
	mustSave(t, s, testMeta("in", 1, 5), st)
	checkOpenListed(t, s, st)
}

// checkOpenListed: s holds one snapshot, of input partition 1 at offset 5,
// whose state is st; List finds it intact and Open returns st.
func checkOpenListed(t *testing.T, s interface {
	List(context.Context) ([]Entry, error)
	Open(context.Context, Entry) (io.ReadCloser, error)
}, st state) {
	t.Helper()
	entries, err := s.List(context.Background())
	if err != nil || len(entries) != 1 || entries[0].Err != nil || entries[0].Meta.Offset != 5 {
		t.Fatalf("list: %+v %v", entries, err)
	}
	rc, err := s.Open(context.Background(), entries[0])
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil || string(got) != string(st) {
		t.Errorf("open: %d bytes, err %v", len(got), err)
	}
}

// A snapshot damaged while the stage runs is found by a Save's pruning:
// kept aside, reported, and not counted against Keep.
func TestFileDamagedNotPruned(t *testing.T) {
	s := newFileStore(t, t.TempDir())
	dir := s.partitionDir("in", 0)
	m1 := mustSave(t, s, testMeta("in", 0, 10), newState(1, 1000))
	path := filepath.Join(dir, fileName(m1.Seq))
	if err := os.Truncate(path, 10); err != nil {
		t.Fatal(err)
	}
	var reports []Damage
	ctx := WithDamageReport(context.Background(), func(d Damage) { reports = append(reports, d) })
	for i := range defaultKeep + 2 {
		if _, err := s.Save(ctx, testMeta("in", 0, int64(20+i)), newState(uint64(2+i), 1000)); err != nil {
			t.Fatal(err)
		}
	}
	if len(reports) != 1 || reports[0].Where != path || !errors.Is(reports[0].Err, ErrTruncated) {
		t.Fatalf("reports %+v, want one for %s", reports, path)
	}
	seqs, err := snapshots(dir)
	if err != nil || len(seqs) != defaultKeep {
		t.Errorf("%d snapshots in place (%v), want %d intact ones", len(seqs), err, defaultKeep)
	}
	paths, aside := damagedFiles(dir)
	if len(paths) != 1 || aside[0] != m1.Seq || paths[0] != reports[0].KeptAt {
		t.Errorf("kept aside %v, want seq %d at %s", paths, m1.Seq, reports[0].KeptAt)
	}
}

// At most keepDamaged files are kept aside per partition, the newest.
func TestFileDamagedBounded(t *testing.T) {
	s := newFileStore(t, t.TempDir())
	dir := s.partitionDir("in", 0)
	var found []string
	ctx := WithDamageReport(context.Background(), func(d Damage) { found = append(found, d.KeptAt) })
	for i := range keepDamaged + 2 {
		m := mustSave(t, s, testMeta("in", 0, int64(i)), newState(uint64(i), 1000))
		if err := os.Truncate(filepath.Join(dir, fileName(m.Seq)), 10); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Load(ctx, "in", 0, collect(new([]byte), new(Meta))); err == nil {
			t.Fatal("load of a damaged snapshot succeeded")
		}
	}
	paths, _ := damagedFiles(dir)
	want := slices.Clone(found[len(found)-keepDamaged:])
	slices.Reverse(want)
	if len(found) != keepDamaged+2 || !slices.Equal(paths, want) {
		t.Errorf("kept %v, want the newest %d of %v", paths, keepDamaged, found)
	}
}

// Every snapshot damaged: Load names each and keeps them aside, and the
// next Load still says the partition lost its state (not ErrNotFound).
func TestFileAllDamagedStaysRejected(t *testing.T) {
	s := newFileStore(t, t.TempDir())
	dir := s.partitionDir("in", 0)
	m1 := mustSave(t, s, testMeta("in", 0, 10), newState(1, 1000))
	m2 := mustSave(t, s, testMeta("in", 0, 20), newState(2, 1000))
	if err := os.Truncate(filepath.Join(dir, fileName(m2.Seq)), 10); err != nil {
		t.Fatal(err)
	}
	refuse := errors.New("refused by decode")
	var reports []Damage
	ctx := WithDamageReport(context.Background(), func(d Damage) { reports = append(reports, d) })
	_, _, err := s.Load(ctx, "in", 0, func(Meta, io.Reader) error { return refuse })
	var le *LoadError
	if !errors.As(err, &le) || len(le.Rejected) != 2 || len(reports) != 2 {
		t.Fatalf("load: %v, %d reports, want a *LoadError and a report for each of 2", err, len(reports))
	}
	var re *RefusedError
	if !errors.As(reports[1].Err, &re) || !errors.Is(reports[1].Err, refuse) || reports[1].Seq != m1.Seq {
		t.Errorf("report %+v, want the decode refusal of seq %d", reports[1], m1.Seq)
	}
	reports = nil
	_, _, err = s.Load(ctx, "in", 0, collect(new([]byte), new(Meta)))
	if !errors.As(err, &le) || len(le.Rejected) != 2 || errors.Is(err, ErrNotFound) || len(reports) != 0 {
		t.Fatalf("second load: %v, %d reports, want a *LoadError naming the 2 kept aside, no new report", err, len(reports))
	}
	for _, r := range le.Rejected {
		if filepath.Dir(r.Where) != filepath.Join(dir, damagedDir) {
			t.Errorf("rejection at %s, want under %s/", r.Where, damagedDir)
		}
	}
	if !errors.Is(err, ErrKeptAside) || !errors.Is(err, ErrTruncated) {
		t.Errorf("verdicts %v, want the truncation and the earlier refusal", err)
	}
}
