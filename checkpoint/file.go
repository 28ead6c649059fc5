package checkpoint

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"dedup/internal/buildinfo"
)

// File layout: <Dir>[/<Group>]/<topic>/<partition>/ holds
//
//	<seq, 20 digits>.ckpt                   a base (a full snapshot)
//	<seq, 20 digits>-<base, 20 digits>.inc  an increment of base <base>
//
// Names sort by seq within each kind and parse unambiguously; a binary that
// predates chains reads only .ckpt files and so never mistakes an increment
// for a snapshot. Bases and increments share the partition's seq numbers.
// The base in an increment's name is what pruning and the chain check go
// by without opening the file; its footer says the same (Meta.Base, checked
// on read) and names the piece it follows (Meta.Prev).
//
// A piece file is the zstd stream of the state followed by a footer:
//
//	payload  StoredBytes bytes, zstd
//	meta     JSON of Meta (Seq omitted: it is the file name)
//	uint32   big-endian length of meta
//	uint32   big-endian CRC-32C of meta
//	[8]byte  fileMagic
//
// The footer comes last because sizes and checksums are known only after the
// state has been streamed; a file cut short loses its magic and is rejected.
const (
	fileMagic      = "DDCKPT01"
	footerFixed    = 4 + 4 + len(fileMagic)
	fileExt        = ".ckpt"
	incExt         = ".inc"
	tempPrefix     = ".tmp-"
	defaultKeep    = 3
	defaultStale   = 15 * time.Minute
	maxMetaBytes   = 16 << 20
	fileBufferSize = 1 << 20
)

// FileOptions configures a FileStore.
type FileOptions struct {
	Dir  string // root directory; created when missing
	Keep int    // snapshots kept per partition (default 3)
	// Group, when set, adds a directory level so that several consumer
	// groups can share Dir; Save refuses a Meta of another group.
	Group string
	// StaleAfter is the age beyond which a temporary file is considered
	// abandoned and swept by NewFileStore (default 15m). Temporaries younger
	// than this may belong to another process writing to a shared volume.
	StaleAfter time.Duration
	Logger     *slog.Logger
}

// FileStore keeps snapshots as files, one directory per topic-partition.
// Several FileStores (in one or many processes) may share a directory: files
// are published with a hard link that fails rather than overwrites, and a
// link below the newest snapshot is taken back, so concurrent writers of one
// partition get distinct sequence numbers that increase in the order their
// Saves finish, and a reader only ever sees complete files.
type FileStore struct {
	root  string
	keep  int
	group string
	log   *slog.Logger

	mu sync.Mutex
	// unreachable holds the increments reported unreachable (their chain
	// broken before them), by path: each is reported once per store, as
	// the Kafka store does. They stay in place and go with their base.
	unreachable map[string]bool
	notes       formatNotes
}

var _ Store = (*FileStore)(nil)

// NewFileStore creates the root directory if needed and sweeps temporary
// files older than StaleAfter left behind by crashed writers.
func NewFileStore(opts FileOptions) (*FileStore, error) {
	if opts.Dir == "" {
		return nil, errors.New("create file store: empty directory")
	}
	if opts.Keep < 0 {
		return nil, fmt.Errorf("create file store: keep %d < 0", opts.Keep)
	}
	s := &FileStore{root: opts.Dir, keep: opts.Keep, group: opts.Group, log: opts.Logger, unreachable: map[string]bool{}}
	if s.keep == 0 {
		s.keep = defaultKeep
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if opts.Group != "" {
		if err := checkName("group", opts.Group); err != nil {
			return nil, fmt.Errorf("create file store: %w", err)
		}
		s.root = filepath.Join(opts.Dir, opts.Group)
	}
	if err := os.MkdirAll(s.root, 0o755); err != nil {
		return nil, fmt.Errorf("create file store: %w", err)
	}
	stale := opts.StaleAfter
	if stale <= 0 {
		stale = defaultStale
	}
	if err := s.sweep(time.Now().Add(-stale)); err != nil {
		return nil, fmt.Errorf("create file store: %w", err)
	}
	return s, nil
}

// checkName refuses names that would escape or confuse the directory layout.
func checkName(what, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, tempPrefix) {
		return fmt.Errorf("invalid %s name %q", what, name)
	}
	return nil
}

func (s *FileStore) sweep(olderThan time.Time) error {
	return filepath.WalkDir(s.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || !strings.HasPrefix(d.Name(), tempPrefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil // removed meanwhile
		}
		if info.ModTime().After(olderThan) {
			return nil
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("sweep temporary: %w", err)
		}
		s.log.Info("swept stale checkpoint temporary", "path", path, "modified", info.ModTime())
		return nil
	})
}

func (s *FileStore) partitionDir(topic string, partition int) string {
	return filepath.Join(s.root, topic, strconv.Itoa(partition))
}

func fileName(seq uint64) string { return fmt.Sprintf("%020d%s", seq, fileExt) }

func incName(seq, base uint64) string { return fmt.Sprintf("%020d-%020d%s", seq, base, incExt) }

// pieceName is the file name of piece seq of base (0: seq is a base).
func pieceName(seq, base uint64) string {
	if base == 0 {
		return fileName(seq)
	}
	return incName(seq, base)
}

func parseFileName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, fileExt)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	seq, err := strconv.ParseUint(digits, 10, 64)
	return seq, err == nil && seq > 0
}

// parsePieceName parses a base's or an increment's file name (base 0: a
// base).
func parsePieceName(name string) (seq, base uint64, ok bool) {
	if seq, ok := parseFileName(name); ok {
		return seq, 0, true
	}
	rest, ok := strings.CutSuffix(name, incExt)
	if !ok || len(rest) != 41 || rest[20] != '-' {
		return 0, 0, false
	}
	seq, err1 := strconv.ParseUint(rest[:20], 10, 64)
	base, err2 := strconv.ParseUint(rest[21:], 10, 64)
	if err1 != nil || err2 != nil || base == 0 || base >= seq {
		return 0, 0, false
	}
	return seq, base, true
}

// dirPiece is a published piece file: seq, and its base (0: a base).
type dirPiece struct{ seq, base uint64 }

func (p dirPiece) name() string { return pieceName(p.seq, p.base) }

// pieces returns the published pieces of dir, newest (highest seq) first.
func pieces(dir string) ([]dirPiece, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []dirPiece
	for _, d := range des {
		if seq, base, ok := parsePieceName(d.Name()); ok && d.Type().IsRegular() {
			out = append(out, dirPiece{seq, base})
		}
	}
	slices.SortFunc(out, func(a, b dirPiece) int { return -cmp.Compare(a.seq, b.seq) })
	return out, nil
}

// snapshots returns the sequence numbers of the published pieces (bases
// and increments) in dir, newest first.
func snapshots(dir string) ([]uint64, error) {
	ps, err := pieces(dir)
	seqs := make([]uint64, len(ps))
	for i, p := range ps {
		seqs[i] = p.seq
	}
	return seqs, err
}

// Save writes the piece to a temporary file, fsyncs it, publishes it under
// the next free sequence number, fsyncs the directory and prunes all but the
// best Keep bases of the partition, with their increments.
func (s *FileStore) Save(ctx context.Context, m Meta, state io.WriterTo) (Meta, error) {
	if err := s.checkMeta(&m); err != nil {
		return Meta{}, fmt.Errorf("save checkpoint: %w", err)
	}
	dir := s.partitionDir(m.Topic, m.Partition)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Meta{}, fmt.Errorf("save checkpoint: %w", err)
	}
	if err := checkFence(dir, m); err != nil {
		return Meta{}, err
	}
	var prevChain int64
	if m.Increment() {
		var err error
		if prevChain, err = checkChain(dir, m); err != nil {
			return Meta{}, err
		}
	}
	tmp, err := os.CreateTemp(dir, tempPrefix+"*"+fileExt)
	if err != nil {
		return Meta{}, fmt.Errorf("save checkpoint: %w", err)
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName) // after a successful link this only drops the temporary name

	m, err = writeFile(tmp, m, prevChain, state)
	if cerr := tmp.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return Meta{}, fmt.Errorf("save checkpoint %s/%d: %w", m.Topic, m.Partition, err)
	}
	if err := ctx.Err(); err != nil {
		return Meta{}, fmt.Errorf("save checkpoint %s/%d: %w", m.Topic, m.Partition, err)
	}
	// Again after the write, which may have taken long: a newer
	// generation's snapshot published meanwhile wins.
	if err := checkFence(dir, m); err != nil {
		return Meta{}, err
	}
	var inc *Meta
	if m.Increment() {
		inc = &m
	}
	seq, err := publishPiece(tmpName, dir, inc)
	var cerr *ChainError
	if errors.As(err, &cerr) {
		return Meta{}, cerr
	}
	if err != nil {
		return Meta{}, fmt.Errorf("save checkpoint %s/%d: %w", m.Topic, m.Partition, err)
	}
	m.Seq = seq
	if err := os.Remove(tmpName); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("remove checkpoint temporary", "path", tmpName, "err", err)
	}
	if err := s.prune(ctx, dir, m.Topic, m.Partition); err != nil {
		s.log.Warn("prune checkpoints", "dir", dir, "err", err)
	}
	if err := syncDir(dir); err != nil {
		return Meta{}, fmt.Errorf("save checkpoint %s/%d: %w", m.Topic, m.Partition, err)
	}
	return m, nil
}

func (s *FileStore) checkMeta(m *Meta) error {
	if err := checkName("topic", m.Topic); err != nil {
		return err
	}
	if m.Partition < 0 {
		return fmt.Errorf("invalid partition %d", m.Partition)
	}
	if m.Base == 0 && m.Prev != 0 {
		return fmt.Errorf("a base with prev %d", m.Prev)
	}
	if s.group != "" {
		if m.Group == "" {
			m.Group = s.group
		} else if m.Group != s.group {
			return fmt.Errorf("group %q does not match store group %q", m.Group, s.group)
		}
	}
	if m.Created.IsZero() {
		m.Created = time.Now()
	}
	m.Writer = buildinfo.Version
	return nil
}

// writeFile streams the compressed state and the footer to f and fsyncs it.
// prevChain is the ChainBytes of the piece an increment follows.
func writeFile(f *os.File, m Meta, prevChain int64, state io.WriterTo) (Meta, error) {
	bw := bufio.NewWriterSize(f, fileBufferSize)
	raw, stored, sum, err := compress(bw, state)
	if err != nil {
		return m, err
	}
	m.Seq, m.RawBytes, m.StoredBytes, m.Checksum, m.ChainBytes = 0, raw, stored, sum, 0
	if m.Increment() {
		m.ChainBytes = prevChain + stored
	}
	meta, err := json.Marshal(m)
	if err != nil {
		return m, fmt.Errorf("encode meta: %w", err)
	}
	footer := make([]byte, 0, len(meta)+footerFixed)
	footer = append(footer, meta...)
	footer = binary.BigEndian.AppendUint32(footer, uint32(len(meta)))
	footer = binary.BigEndian.AppendUint32(footer, checksum(meta))
	footer = append(footer, fileMagic...)
	if _, err := bw.Write(footer); err != nil {
		return m, fmt.Errorf("write footer: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return m, fmt.Errorf("write snapshot: %w", err)
	}
	if err := f.Sync(); err != nil {
		return m, fmt.Errorf("sync snapshot: %w", err)
	}
	return m, nil
}

// publish links the complete temporary file under the next free sequence
// number and returns it once that number is the partition's newest.
//
// os.Link fails with EEXIST instead of replacing, so two writers that pick
// the same number cannot clobber each other: the loser lists again. That
// alone is not enough: a writer descheduled between listing and linking
// holds a stale listing, and the number it picks may have been published
// and already pruned meanwhile, so its link succeeds below the newest
// snapshot. Its checkpoint would be ranked older than it is and its number
// given twice. claim therefore checks, after linking, that nothing newer
// exists, and otherwise takes the link back and publish tries again: the
// numbers Saves return are distinct and increase in the order the Saves
// finish.
//
// An increment (inc != nil) is published under its own name and, after
// linking, claimPiece checks its chain again: of two increments racing for
// the same place at most one stays.
func publish(tmp, dir string) (uint64, error) { return publishPiece(tmp, dir, nil) }

func publishPiece(tmp, dir string, inc *Meta) (uint64, error) {
	for attempt := 0; ; attempt++ {
		seqs, err := snapshots(dir)
		if err != nil {
			return 0, fmt.Errorf("list snapshots: %w", err)
		}
		seq := uint64(1)
		if len(seqs) > 0 {
			seq = seqs[0] + 1
		}
		err = claimPiece(tmp, dir, seq, inc)
		if err == nil {
			return seq, nil
		}
		var cerr *ChainError
		if errors.As(err, &cerr) {
			return 0, err
		}
		if (!errors.Is(err, fs.ErrExist) && !errors.Is(err, errSuperseded)) || attempt >= 1000 {
			return 0, fmt.Errorf("publish snapshot: %w", err)
		}
	}
}

// errSuperseded is claim's answer when a newer snapshot exists than the
// number it was asked to publish under.
var errSuperseded = errors.New("a newer snapshot exists")

// claim links tmp as snapshot seq of dir and checks that it is then the
// newest snapshot. When it is not (a newer one exists, or the link is gone),
// it removes its link (if the name still holds tmp's file) and returns
// errSuperseded; when seq is taken, an error wrapping fs.ErrExist.
//
// For an increment (inc != nil) it first checks that the chain still
// holds with the link in place: the base is there and the newest piece of
// the chain below seq is inc.Prev; otherwise it takes the link back and
// returns a *ChainError.
func claim(tmp, dir string, seq uint64) error { return claimPiece(tmp, dir, seq, nil) }

func claimPiece(tmp, dir string, seq uint64, inc *Meta) error {
	var base uint64
	if inc != nil {
		base = inc.Base
	}
	name := filepath.Join(dir, pieceName(seq, base))
	if err := os.Link(tmp, name); err != nil {
		return err
	}
	ps, err := pieces(dir)
	if err != nil {
		return fmt.Errorf("list snapshots: %w", err)
	}
	verdict := errSuperseded
	if inc != nil {
		if cerr := chainAt(ps, *inc, seq); cerr != nil {
			verdict = cerr
		}
	}
	if verdict == errSuperseded && len(ps) > 0 && ps[0].seq == seq {
		return nil // the newest, and still there
	}
	// Another writer may have pruned the name meanwhile (it is below the
	// newest); remove it only while it is still this writer's file.
	mine, errMine := os.Stat(tmp)
	got, errGot := os.Stat(name)
	if errMine == nil && errGot == nil && os.SameFile(mine, got) {
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("take back superseded snapshot: %w", err)
		}
	}
	return verdict
}

// chainAt checks, by the names listed in ps, that increment m would
// continue its chain as piece seq: its base is held and the newest piece
// of the chain below seq is m.Prev.
func chainAt(ps []dirPiece, m Meta, seq uint64) *ChainError {
	newest, held := uint64(0), false
	for _, p := range ps {
		if p.base == 0 && p.seq == m.Base {
			held = true
		}
		if p.seq < seq && (p.seq == m.Base && p.base == 0 || p.base == m.Base) {
			newest = max(newest, p.seq)
		}
	}
	if !held {
		return chainError(m, 0, "base not held (pruned, kept aside as damaged, or never written)")
	}
	if newest != m.Prev {
		return chainError(m, newest, "prev is not the newest piece of the chain")
	}
	if m.Owner != 0 {
		for _, p := range ps {
			if p.base == 0 && p.seq > m.Base && p.seq < seq {
				return newerBaseError(m, newest, p.seq)
			}
		}
	}
	return nil
}

// checkChain checks increment m against dir before it is written: its
// base is held, its footer readable, of m's (Epoch, Generation), and m.Prev
// is the chain's newest piece. It returns the ChainBytes of m.Prev. The
// base's payload is not read here (Load verifies it).
func checkChain(dir string, m Meta) (int64, error) {
	ps, err := pieces(dir)
	if err != nil {
		return 0, fmt.Errorf("save checkpoint %s/%d: list snapshots: %w", m.Topic, m.Partition, err)
	}
	if cerr := chainAt(ps, m, math.MaxUint64); cerr != nil {
		return 0, cerr
	}
	bm, err := footerOf(filepath.Join(dir, fileName(m.Base)))
	if err == nil {
		bm.Seq = m.Base
		err = checkPiece(bm, 0)
	}
	if err != nil {
		return 0, chainError(m, 0, fmt.Sprintf("base unreadable: %v", err))
	}
	if compareFence(bm, m) != 0 {
		return 0, chainError(m, m.Prev, fmt.Sprintf("base is of generation %d (epoch %d), the increment of %d (epoch %d): an increment keeps its base's, its writer's goes in owner",
			bm.Generation, bm.Epoch, m.Generation, m.Epoch))
	}
	if m.Prev == m.Base {
		return 0, nil
	}
	pm, err := footerOf(filepath.Join(dir, incName(m.Prev, m.Base)))
	if err != nil {
		return 0, chainError(m, m.Prev, fmt.Sprintf("previous increment unreadable: %v", err))
	}
	if cerr := continuesOwner(m, pm); cerr != nil {
		return 0, cerr
	}
	return pm.ChainBytes, nil
}

// prune removes all but the best Keep bases by rank (a stale generation's
// base with a higher Seq never pushes out a newer generation's), and the
// increments of every base it removes or that is no longer there (pruned,
// or kept aside as damaged): they can never be loaded. Increments go before
// their base, so a crash between leaves a base with a shorter chain, never
// an increment without its base that Load would have to skip.
//
// A damaged base (its footer unreadable) is not pruned and does not count
// against Keep: it is kept aside (keepAside). So is an increment whose
// footer is unreadable when pruning would remove it.
func (s *FileStore) prune(ctx context.Context, dir string, topic string, partition int) error {
	snaps, err := ranked(dir)
	if err != nil {
		return err
	}
	intact := snaps[:0:0]
	for _, sn := range snaps {
		if sn.err != nil && IsDamage(sn.err) {
			s.keepAside(ctx, dir, Damage{Topic: topic, Partition: partition, Seq: sn.meta.Seq,
				Where: filepath.Join(dir, fileName(sn.meta.Seq)), Err: sn.err})
			continue
		}
		intact = append(intact, sn)
	}
	drop := map[uint64]bool{}
	for _, sn := range intact[min(s.keep, len(intact)):] {
		drop[sn.meta.Seq] = true
	}
	// Listed after ranked: a base published meanwhile is in this listing,
	// so its increments are never taken for orphans.
	ps, err := pieces(dir)
	if err != nil {
		return err
	}
	held := map[uint64]bool{}
	for _, p := range ps {
		if p.base == 0 {
			held[p.seq] = true
		}
	}
	var errs []error
	for _, p := range ps {
		if p.base == 0 || (held[p.base] && !drop[p.base]) {
			continue
		}
		path := filepath.Join(dir, p.name())
		m, err := footerOf(path)
		if err == nil {
			m.Seq = p.seq
			err = pieceError(path, checkPiece(m, p.base))
		}
		if err != nil && IsDamage(err) {
			s.keepAside(ctx, dir, Damage{Topic: topic, Partition: partition, Seq: p.seq, Where: path, Err: err})
			continue
		}
		err = os.Remove(path)
		switch {
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			errs = append(errs, err)
		case err == nil && !held[p.base]:
			// Its base went before it: removed by hand, or by a release
			// that predates chains and prunes bases only. No damage.
			s.log.Info("checkpoint increment without its base removed: no damage", "topic", topic, "partition", partition,
				"seq", p.seq, "base", p.base, "path", path)
		}
	}
	for _, sn := range intact[min(s.keep, len(intact)):] {
		if err := os.Remove(filepath.Join(dir, fileName(sn.meta.Seq))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// pieceError wraps checkPiece's verdict on the file at path.
func pieceError(path string, err error) error {
	if err == nil {
		return nil
	}
	return &CorruptError{Path: path, What: "meta", Err: err}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	return nil
}

// Load implements Store.
func (s *FileStore) Load(ctx context.Context, topic string, partition int, decode func(Meta, io.Reader) error) (Meta, Source, error) {
	if err := checkName("topic", topic); err != nil {
		return Meta{}, "", fmt.Errorf("load checkpoint: %w", err)
	}
	dir := s.partitionDir(topic, partition)
	s.noteForeign(dir)
	lerr := &LoadError{Topic: topic, Partition: partition}
	tried := 0
	// A concurrent Save may prune files between listing and opening them;
	// pruning only happens after something newer was published, so a vanished
	// file sends Load back to the listing.
	for relist := 0; ; relist++ {
		snaps, err := ranked(dir)
		if err != nil {
			return Meta{}, "", fmt.Errorf("load checkpoint %s/%d: %w", topic, partition, err)
		}
		vanished := false
		for _, sn := range snaps {
			seq := sn.meta.Seq
			if slices.ContainsFunc(lerr.Rejected, func(r Rejection) bool { return r.Seq == seq }) {
				continue
			}
			if err := ctx.Err(); err != nil {
				return Meta{}, "", fmt.Errorf("load checkpoint %s/%d: %w", topic, partition, err)
			}
			path := filepath.Join(dir, fileName(seq))
			m, err := loadFile(path, seq, 0, decode)
			if errors.Is(err, fs.ErrNotExist) && relist < 100 {
				vanished = true
				break
			}
			s.noteNewer(path, m)
			if err == nil {
				head, whole, err := s.loadChain(ctx, dir, m, decode)
				if errors.Is(err, fs.ErrNotExist) && relist < 100 {
					// Pruned under the walk: the next base decoded
					// replaces what was applied.
					vanished = true
					break
				}
				return loaded(topic, partition, head, tried, whole, err)
			}
			if cerr := ctx.Err(); cerr != nil {
				// A decode cut short by the end of the context says nothing
				// about the file.
				return Meta{}, "", fmt.Errorf("load checkpoint %s/%d: %w", topic, partition, cerr)
			}
			tried++
			where := path
			if IsDamage(err) {
				if kept := s.keepAside(ctx, dir, Damage{Topic: topic, Partition: partition, Seq: seq, Where: path, Err: err, Writer: m.Writer}); kept != "" {
					where = kept
				}
			} else {
				s.log.Warn("checkpoint rejected", "path", path, "seq", seq, "err", err)
			}
			lerr.Rejected = append(lerr.Rejected, Rejection{Seq: seq, Where: where, Err: err})
		}
		if !vanished {
			break
		}
	}
	if len(lerr.Rejected) == 0 {
		// Snapshots kept aside as damaged are the partition's state too:
		// with nothing intact beside them, the partition has lost its state,
		// which is not the same as never having had one.
		if aside := s.damagedRejections(dir); len(aside) > 0 {
			lerr.Rejected = aside
			return Meta{}, "", lerr
		}
		return Meta{}, "", fmt.Errorf("load checkpoint %s/%d: %w", topic, partition, ErrNotFound)
	}
	return Meta{}, "", lerr
}

// loadChain applies the increments of base, decoded already, in chain
// order (planChain) and returns the head; whole is false when the chain
// was cut short (a damaged, refused or unreachable increment, each
// reported). Errors are those of the context or a vanished file
// (fs.ErrNotExist: pruned meanwhile).
func (s *FileStore) loadChain(ctx context.Context, dir string, base Meta, decode func(Meta, io.Reader) error) (Meta, bool, error) {
	ps, err := pieces(dir)
	if err != nil {
		return Meta{}, false, err
	}
	var incs []dirPiece
	for _, p := range ps {
		if p.base == base.Seq {
			incs = append(incs, p)
		}
	}
	slices.Reverse(incs) // ascending seq
	links := make([]link, len(incs))
	for i, p := range incs {
		path := filepath.Join(dir, p.name())
		m, err := footerOf(path)
		if errors.Is(err, fs.ErrNotExist) {
			return Meta{}, false, err
		}
		if err == nil {
			m.Seq = p.seq
			err = pieceError(path, checkPiece(m, base.Seq))
		}
		if err == nil && compareFence(m, base) != 0 {
			err = pieceError(path, fmt.Errorf("%w: generation %d (epoch %d), its base's %d (epoch %d)",
				ErrFormat, m.Generation, m.Epoch, base.Generation, base.Epoch))
		}
		links[i] = link{seq: p.seq, prev: m.Prev, err: err}
	}
	plan := planChain(base.Seq, links)
	d := func(i int, err error) Damage {
		return Damage{Topic: base.Topic, Partition: base.Partition, Seq: incs[i].seq, Where: filepath.Join(dir, incs[i].name()), Err: err}
	}
	for _, i := range plan.forks {
		s.log.Info("checkpoint increment ignored: another took its place in the chain", "path", d(i, nil).Where, "prev", links[i].prev)
	}
	head := base
	cut := plan.rest
	failed := false // an increment on the path was damaged or refused
	for k, i := range plan.path {
		if err := ctx.Err(); err != nil {
			return Meta{}, false, err
		}
		m, err := loadFile(d(i, nil).Where, incs[i].seq, base.Seq, decode)
		if errors.Is(err, fs.ErrNotExist) {
			return Meta{}, false, err
		}
		s.noteNewer(d(i, nil).Where, m)
		if err == nil {
			head = m
			continue
		}
		if cerr := ctx.Err(); cerr != nil {
			return Meta{}, false, cerr
		}
		if IsDamage(err) {
			dm := d(i, err)
			dm.Writer = m.Writer
			s.keepAside(ctx, dir, dm)
		} else {
			s.log.Warn("checkpoint increment rejected", "path", d(i, nil).Where, "seq", incs[i].seq, "err", err)
		}
		cut = append(slices.Clone(plan.path[k+1:]), plan.rest...)
		failed = true
		break
	}
	for _, i := range cut {
		if links[i].err != nil && IsDamage(links[i].err) {
			s.keepAside(ctx, dir, d(i, links[i].err))
			continue
		}
		s.unreachableFound(ctx, d(i, gapError(d(i, nil).Where, "", links[i], head.Seq)))
	}
	whole := len(cut) == 0 && !failed
	if !whole {
		s.log.Warn("checkpoint chain cut short: restored up to the last intact increment",
			"topic", base.Topic, "partition", base.Partition, "base", base.Seq, "head", head.Seq, "ignored", len(cut))
	}
	return head, whole, nil
}

// noteNewer says once when the metadata of the piece at path holds a field
// this release does not know.
func (s *FileStore) noteNewer(path string, m Meta) {
	if m.newer != "" {
		s.notes.note(s.log, "meta field "+m.newer, m.Writer, path)
	}
}

// noteForeign says once what partition directory dir holds that this
// release does not read (a kind of piece a newer release writes, as
// increments were to releases before them): neither pieces, temporaries
// nor the damaged/ directory.
func (s *FileStore) noteForeign(dir string) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, d := range des {
		name := d.Name()
		if _, _, ok := parsePieceName(name); ok || name == damagedDir || strings.HasPrefix(name, tempPrefix) {
			continue
		}
		s.notes.note(s.log, "file kind "+strconv.Quote(filepath.Ext(name)), "", filepath.Join(dir, name))
	}
}

// unreachableFound reports, once per store, an increment Load could not
// reach from its base: a warn line naming it, and the context's report.
func (s *FileStore) unreachableFound(ctx context.Context, d Damage) {
	s.mu.Lock()
	seen := s.unreachable[d.Where]
	s.unreachable[d.Where] = true
	s.mu.Unlock()
	if seen {
		return
	}
	s.log.Warn("checkpoint increment unreachable: its chain is broken before it; left in place, removed with its base",
		append(damageAttrs(d), "path", d.Where)...)
	reportDamage(ctx, d)
}

func loadFile(path string, seq, base uint64, decode func(Meta, io.Reader) error) (Meta, error) {
	rc, m, err := openFile(path, seq, base)
	if err != nil {
		return Meta{}, err
	}
	err = decode(m, rc)
	if cerr := rc.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return m, &RefusedError{Err: err} // m: for the report, which names its writer
	}
	return m, nil
}

// openFile verifies the file's footer and payload checksum, and that it is
// piece seq of base (0: a base), and returns the decompressed state.
func openFile(path string, seq, base uint64) (io.ReadCloser, Meta, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, Meta{}, err
	}
	m, err := verifyFile(f, path)
	if err == nil {
		m.Seq = seq
		err = pieceError(path, checkPiece(m, base))
	}
	if err != nil {
		f.Close()
		return nil, Meta{}, err
	}
	payload := bufio.NewReaderSize(io.NewSectionReader(f, 0, m.StoredBytes), fileBufferSize)
	rc, err := newDecompressed(payload, f)
	if err != nil {
		f.Close()
		return nil, Meta{}, err
	}
	return rc, m, nil
}

// verifyFile reads the footer and checksums the whole payload.
func verifyFile(f *os.File, path string) (Meta, error) {
	m, err := readFooter(f, path)
	if err != nil {
		return Meta{}, err
	}
	crc := newCRC()
	if _, err := io.Copy(crc, bufio.NewReaderSize(io.NewSectionReader(f, 0, m.StoredBytes), fileBufferSize)); err != nil {
		return Meta{}, &CorruptError{Path: path, What: "payload", Err: err}
	}
	if got := crc.Sum32(); got != m.Checksum {
		return Meta{}, &CorruptError{Path: path, What: "payload", Err: fmt.Errorf("%w: crc %08x, want %08x", ErrChecksum, got, m.Checksum)}
	}
	return m, nil
}

// readFooter reads and checks the footer's meta (not the payload).
func readFooter(f *os.File, path string) (Meta, error) {
	corrupt := func(what string, err error) error {
		return &CorruptError{Path: path, What: what, Err: err}
	}
	info, err := f.Stat()
	if err != nil {
		return Meta{}, err
	}
	size := info.Size()
	if size < int64(footerFixed) {
		return Meta{}, corrupt("footer", fmt.Errorf("%w: %d bytes", ErrTruncated, size))
	}
	fixed := make([]byte, footerFixed)
	if _, err := f.ReadAt(fixed, size-int64(footerFixed)); err != nil {
		return Meta{}, corrupt("footer", err)
	}
	if string(fixed[8:]) != fileMagic {
		return Meta{}, corrupt("footer", fmt.Errorf("%w: no end marker", ErrTruncated))
	}
	metaLen := int64(binary.BigEndian.Uint32(fixed[0:4]))
	if metaLen > maxMetaBytes || metaLen > size-int64(footerFixed) {
		return Meta{}, corrupt("footer", fmt.Errorf("%w: meta length %d", ErrFormat, metaLen))
	}
	metaAt := size - int64(footerFixed) - metaLen
	meta := make([]byte, metaLen)
	if _, err := f.ReadAt(meta, metaAt); err != nil {
		return Meta{}, corrupt("meta", err)
	}
	if got, want := checksum(meta), binary.BigEndian.Uint32(fixed[4:8]); got != want {
		return Meta{}, corrupt("meta", fmt.Errorf("%w: crc %08x, want %08x", ErrChecksum, got, want))
	}
	var m Meta
	if err := json.Unmarshal(meta, &m); err != nil {
		return Meta{}, corrupt("meta", fmt.Errorf("%w: %v", ErrFormat, err))
	}
	m.newer = unknownField[Meta](meta)
	if m.StoredBytes != metaAt {
		return Meta{}, corrupt("payload", fmt.Errorf("%w: %d bytes, meta says %d", ErrTruncated, metaAt, m.StoredBytes))
	}
	return m, nil
}

// fileSnap is a published snapshot file with its footer's meta (zero but
// Seq when the footer is unreadable: err says why).
type fileSnap struct {
	meta Meta
	err  error
}

// ranked returns the published bases of dir, best first by
// (Epoch, Generation, Seq); only footers are read.
func ranked(dir string) ([]fileSnap, error) {
	ps, err := pieces(dir)
	if err != nil {
		return nil, err
	}
	var out []fileSnap
	for _, p := range ps {
		if p.base != 0 {
			continue
		}
		path := filepath.Join(dir, fileName(p.seq))
		sn := fileSnap{}
		sn.meta, sn.err = footerOf(path)
		if sn.err == nil {
			sn.meta.Seq = p.seq
			sn.err = pieceError(path, checkPiece(sn.meta, 0))
		}
		if sn.err != nil {
			sn.meta = Meta{}
		}
		sn.meta.Seq = p.seq
		out = append(out, sn)
	}
	slices.SortStableFunc(out, func(a, b fileSnap) int { return -compareRank(a.meta, b.meta) })
	return out, nil
}

func footerOf(path string) (Meta, error) {
	f, err := os.Open(path)
	if err != nil {
		return Meta{}, err
	}
	defer f.Close()
	return readFooter(f, path)
}

// checkFence refuses m when dir holds a readable piece written by a
// greater (Epoch, Generation). Of increments only each chain's newest is
// read: an increment has its base's, but for its Owner, which never
// decreases along a chain.
func checkFence(dir string, m Meta) error {
	ps, err := pieces(dir)
	if err != nil {
		return fmt.Errorf("list snapshots: %w", err)
	}
	newest := map[uint64]dirPiece{} // base seq -> its newest piece
	for _, p := range ps {
		b := p.base
		if b == 0 {
			b = p.seq
		}
		if q, ok := newest[b]; !ok || p.seq > q.seq {
			newest[b] = p
		}
	}
	for _, p := range newest {
		path := filepath.Join(dir, p.name())
		pm, err := footerOf(path)
		if err == nil && compareWriter(pm, m) > 0 {
			return staleError(m, pm, path)
		}
		if p.base == 0 {
			continue
		}
		// The base too: an unreadable newest increment hides nothing of it.
		path = filepath.Join(dir, fileName(p.base))
		if bm, err := footerOf(path); err == nil && compareWriter(bm, m) > 0 {
			return staleError(m, bm, path)
		}
	}
	return nil
}

// List implements Store. Every file is checksummed, so List reads all data.
func (s *FileStore) List(ctx context.Context) ([]Entry, error) {
	topics, err := os.ReadDir(s.root)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	var entries []Entry
	for _, t := range topics {
		if !t.IsDir() || checkName("topic", t.Name()) != nil {
			continue
		}
		parts, err := os.ReadDir(filepath.Join(s.root, t.Name()))
		if err != nil {
			return nil, fmt.Errorf("list checkpoints: %w", err)
		}
		var nums []int
		for _, p := range parts {
			if n, err := strconv.Atoi(p.Name()); err == nil && p.IsDir() && n >= 0 {
				nums = append(nums, n)
			}
		}
		slices.Sort(nums)
		for _, p := range nums {
			dir := s.partitionDir(t.Name(), p)
			ps, err := pieces(dir)
			if err != nil {
				return nil, fmt.Errorf("list checkpoints: %w", err)
			}
			var part []Entry
			for _, pc := range ps {
				if err := ctx.Err(); err != nil {
					return nil, fmt.Errorf("list checkpoints: %w", err)
				}
				part = append(part, statFile(filepath.Join(dir, pc.name()), pc.seq, pc.base, t.Name(), p))
			}
			sortChains(part)
			entries = append(entries, part...)
			entries = append(entries, listDamaged(dir, t.Name(), p)...)
		}
	}
	return entries, nil
}

func statFile(path string, seq, base uint64, topic string, partition int) Entry {
	m, err := verifyPiece(path, seq, base)
	if err != nil {
		return Entry{Where: path, Meta: Meta{Topic: topic, Partition: partition, Seq: seq, Base: base}, Err: err}
	}
	return Entry{Where: path, Meta: m}
}

// verifyPiece reads and checks the file of piece seq of base (0: a base):
// its footer, checksums and its Meta's fit to its name.
func verifyPiece(path string, seq, base uint64) (Meta, error) {
	f, err := os.Open(path)
	if err != nil {
		return Meta{}, err
	}
	defer f.Close()
	m, err := verifyFile(f, path)
	if err == nil {
		m.Seq = seq
		err = pieceError(path, checkPiece(m, base))
	}
	return m, err
}

// Open returns the decompressed, checksum-verified state of an entry
// returned by List, for inspection. The caller closes it.
func (s *FileStore) Open(ctx context.Context, e Entry) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if rel, err := filepath.Rel(s.root, e.Where); err != nil || !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("open checkpoint: %s is not in %s", e.Where, s.root)
	}
	rc, _, err := openFile(e.Where, e.Meta.Seq, e.Meta.Base)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint: %w", err)
	}
	return rc, nil
}

// Close implements Store. A FileStore holds no open resources.
func (s *FileStore) Close() error { return nil }

// Kind names the store for metrics labels: "file".
func (s *FileStore) Kind() string { return "file" }
