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
	"time"
)

// Damaged piece files are moved to <partition dir>/damaged/ under the
// name <unix nanoseconds of the move, 20 digits>-<its name>, that is
// <ns>-<seq>.ckpt for a base and <ns>-<seq>-<base>.inc for an increment, so
// that the names sort by when they were found and never collide (a seq can
// be given again once every file of the partition was moved aside).
const (
	damagedDir  = "damaged"
	keepDamaged = 3 // damaged files kept per partition, newest by when found
)

// ErrKeptAside is the verdict of a file kept aside whose checksums hold: it
// was refused by decode when it was found.
var ErrKeptAside = errors.New("refused by decode when found, kept aside")

func damagedName(name string, at time.Time) string {
	return fmt.Sprintf("%020d-%s", at.UnixNano(), name)
}

// parseDamagedName returns the seq and base (0: a base) of a file kept
// aside.
func parseDamagedName(name string) (seq, base uint64, ok bool) {
	if len(name) < 21 || name[20] != '-' {
		return 0, 0, false
	}
	if _, err := strconv.ParseUint(name[:20], 10, 64); err != nil {
		return 0, 0, false
	}
	return parsePieceName(name[21:])
}

// keepAside moves the damaged snapshot d.Where of partition directory dir
// to its damaged/ directory, logs it at warn level and reports it, and
// returns where it went ("" when it stayed: another process moved it
// first, which reports it itself, or the move failed, which is logged and
// leaves the file in place, never pruned).
func (s *FileStore) keepAside(ctx context.Context, dir string, d Damage) string {
	aside := filepath.Join(dir, damagedDir)
	kept := filepath.Join(aside, damagedName(filepath.Base(d.Where), time.Now()))
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
	paths, seqs, _ := damagedPieces(dir)
	return paths, seqs
}

// damagedPieces is damagedFiles with the base of each (0: a base).
func damagedPieces(dir string) ([]string, []uint64, []uint64) {
	aside := filepath.Join(dir, damagedDir)
	des, err := os.ReadDir(aside)
	if err != nil {
		return nil, nil, nil
	}
	var names []string
	for _, d := range des {
		if _, _, ok := parseDamagedName(d.Name()); ok && d.Type().IsRegular() {
			names = append(names, d.Name())
		}
	}
	slices.Sort(names)
	slices.Reverse(names)
	paths := make([]string, len(names))
	seqs := make([]uint64, len(names))
	bases := make([]uint64, len(names))
	for i, n := range names {
		paths[i] = filepath.Join(aside, n)
		seqs[i], bases[i], _ = parseDamagedName(n)
	}
	return paths, seqs, bases
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

// asideVerdict is what is wrong with a file kept aside, piece seq of base
// (0: a base).
func asideVerdict(path string, seq, base uint64) (Meta, error) {
	f, err := os.Open(path)
	if err != nil {
		return Meta{Seq: seq, Base: base}, err
	}
	defer f.Close()
	m, err := verifyFile(f, path)
	if err == nil {
		m.Seq = seq
		err = pieceError(path, checkPiece(m, base))
	}
	if err != nil {
		return Meta{Seq: seq, Base: base}, err
	}
	return m, &RefusedError{Err: ErrKeptAside}
}

// damagedRejections lists the bases kept aside in dir as rejections, for
// a Load that finds nothing else.
func (s *FileStore) damagedRejections(dir string) []Rejection {
	paths, seqs, bases := damagedPieces(dir)
	var out []Rejection
	for i, p := range paths {
		if bases[i] != 0 {
			continue
		}
		_, err := asideVerdict(p, seqs[i], 0)
		out = append(out, Rejection{Seq: seqs[i], Where: p, Err: err})
	}
	return out
}

// listDamaged returns the entries of the files kept aside in dir.
func listDamaged(dir, topic string, partition int) []Entry {
	paths, seqs, bases := damagedPieces(dir)
	out := make([]Entry, len(paths))
	for i, p := range paths {
		m, err := asideVerdict(p, seqs[i], bases[i])
		m.Topic, m.Partition = topic, partition
		out[i] = Entry{Meta: m, Where: p, Err: err, Damaged: true}
	}
	return out
}
