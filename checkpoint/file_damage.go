package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Damaged snapshot files are moved to <partition dir>/damaged/ under the
// name <unix nanoseconds of the move, 20 digits>-<seq, 20 digits>.ckpt, so
// that the names sort by when they were found and never collide (a seq can
// be given again once every file of the partition was moved aside).
const (
	damagedDir  = "damaged"
	keepDamaged = 3 // damaged files kept per partition, newest by when found
)

// ErrKeptAside is the verdict of a file kept aside whose checksums hold: it
// was refused by decode when it was found.
var ErrKeptAside = errors.New("refused by decode when found, kept aside")

func damagedName(seq uint64, at time.Time) string {
	return fmt.Sprintf("%020d-%020d%s", at.UnixNano(), seq, fileExt)
}

func parseDamagedName(name string) (uint64, bool) {
	rest, ok := strings.CutSuffix(name, fileExt)
	if !ok || len(rest) != 41 || rest[20] != '-' {
		return 0, false
	}
	if _, err := strconv.ParseUint(rest[:20], 10, 64); err != nil {
		return 0, false
	}
	seq, err := strconv.ParseUint(rest[21:], 10, 64)
	return seq, err == nil
}

// keepAside moves the damaged snapshot d.Where of partition directory dir
// to its damaged/ directory, logs it at warn level and reports it, and
// returns where it went ("" when it stayed: another process moved it
// first, which reports it itself, or the move failed, which is logged and
// leaves the file in place, never pruned).
func (s *FileStore) keepAside(ctx context.Context, dir string, d Damage) string {
	aside := filepath.Join(dir, damagedDir)
	kept := filepath.Join(aside, damagedName(d.Seq, time.Now()))
	err := os.MkdirAll(aside, 0o755)
	if err == nil {
		err = os.Rename(d.Where, kept)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	if err != nil {
		s.log.Warn("checkpoint damaged: could not move it aside, left in place (never pruned)",
			append(damageAttrs(d), "path", d.Where, "move_err", err)...)
		reportDamage(ctx, d)
		return ""
	}
	d.KeptAt = kept
	s.log.Warn("checkpoint damaged: kept aside for inspection, not counted against CHECKPOINT_KEEP",
		append(damageAttrs(d), "path", d.Where, "kept_at", kept)...)
	reportDamage(ctx, d)
	for _, p := range []string{aside, dir} {
		if err := syncDir(p); err != nil {
			s.log.Warn("sync directory after keeping a damaged checkpoint aside", "dir", p, "err", err)
		}
	}
	s.trimDamaged(aside)
	return kept
}

// damagedFiles returns the files kept aside in partition directory dir,
// newest first, with their seqs.
func damagedFiles(dir string) ([]string, []uint64) {
	aside := filepath.Join(dir, damagedDir)
	des, err := os.ReadDir(aside)
	if err != nil {
		return nil, nil
	}
	var names []string
	for _, d := range des {
		if _, ok := parseDamagedName(d.Name()); ok && d.Type().IsRegular() {
			names = append(names, d.Name())
		}
	}
	slices.Sort(names)
	slices.Reverse(names)
	paths := make([]string, len(names))
	seqs := make([]uint64, len(names))
	for i, n := range names {
		paths[i] = filepath.Join(aside, n)
		seqs[i], _ = parseDamagedName(n)
	}
	return paths, seqs
}

// trimDamaged removes all but the newest keepDamaged files kept aside, and
// says so for each: the bound keeps a disk that damages every write from
// filling up with copies.
func (s *FileStore) trimDamaged(aside string) {
	paths, _ := damagedFiles(filepath.Dir(aside))
	for _, p := range paths[min(keepDamaged, len(paths)):] {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("remove damaged checkpoint beyond the bound", "path", p, "err", err)
			continue
		}
		s.log.Warn("damaged checkpoint dropped: at most 3 are kept aside per partition, newest first",
			"path", p, "kept", keepDamaged)
	}
}

// asideVerdict is what is wrong with a file kept aside.
func asideVerdict(path string, seq uint64) (Meta, error) {
	f, err := os.Open(path)
	if err != nil {
		return Meta{Seq: seq}, err
	}
	defer f.Close()
	m, err := verifyFile(f, path)
	m.Seq = seq
	if err != nil {
		return m, err
	}
	return m, &RefusedError{Err: ErrKeptAside}
}

// damagedRejections lists the files kept aside in dir as rejections, for
// a Load that finds nothing else.
func (s *FileStore) damagedRejections(dir string) []Rejection {
	paths, seqs := damagedFiles(dir)
	out := make([]Rejection, len(paths))
	for i, p := range paths {
		_, err := asideVerdict(p, seqs[i])
		out[i] = Rejection{Seq: seqs[i], Where: p, Err: err}
	}
	return out
}

// listDamaged returns the entries of the files kept aside in dir.
func listDamaged(dir, topic string, partition int) []Entry {
	paths, seqs := damagedFiles(dir)
	out := make([]Entry, len(paths))
	for i, p := range paths {
		m, err := asideVerdict(p, seqs[i])
		m.Topic, m.Partition = topic, partition
		out[i] = Entry{Meta: m, Where: p, Err: err, Damaged: true}
	}
	return out
}
