package checkpoint

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// File layout: <Dir>[/<Group>]/<topic>/<partition>/<seq, 20 digits>.ckpt
//
// A snapshot file is the zstd stream of the state followed by a footer:
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
	s := &FileStore{root: opts.Dir, keep: opts.Keep, group: opts.Group, log: opts.Logger}
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

func parseFileName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, fileExt)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	seq, err := strconv.ParseUint(digits, 10, 64)
	return seq, err == nil
}

// snapshots returns the sequence numbers of the published files in dir, newest first.
func snapshots(dir string) ([]uint64, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var seqs []uint64
	for _, d := range des {
		if seq, ok := parseFileName(d.Name()); ok && d.Type().IsRegular() {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	slices.Reverse(seqs)
	return seqs, nil
}

// Save writes the snapshot to a temporary file, fsyncs it, publishes it under
// the next free sequence number, fsyncs the directory and prunes all but the
// newest Keep snapshots of the partition.
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
	tmp, err := os.CreateTemp(dir, tempPrefix+"*"+fileExt)
	if err != nil {
		return Meta{}, fmt.Errorf("save checkpoint: %w", err)
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName) // after a successful link this only drops the temporary name

	m, err = writeFile(tmp, m, state)
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
	seq, err := publish(tmpName, dir)
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
	return nil
}

// writeFile streams the compressed state and the footer to f and fsyncs it.
func writeFile(f *os.File, m Meta, state io.WriterTo) (Meta, error) {
	bw := bufio.NewWriterSize(f, fileBufferSize)
	raw, stored, sum, err := compress(bw, state)
	if err != nil {
		return m, err
	}
	m.Seq, m.RawBytes, m.StoredBytes, m.Checksum = 0, raw, stored, sum
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
func publish(tmp, dir string) (uint64, error) {
	for attempt := 0; ; attempt++ {
		seqs, err := snapshots(dir)
		if err != nil {
			return 0, fmt.Errorf("list snapshots: %w", err)
		}
		seq := uint64(1)
		if len(seqs) > 0 {
			seq = seqs[0] + 1
		}
		err = claim(tmp, dir, seq)
		if err == nil {
			return seq, nil
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
func claim(tmp, dir string, seq uint64) error {
	name := filepath.Join(dir, fileName(seq))
	if err := os.Link(tmp, name); err != nil {
		return err
	}
	seqs, err := snapshots(dir)
	if err != nil {
		return fmt.Errorf("list snapshots: %w", err)
	}
	if len(seqs) > 0 && seqs[0] == seq {
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
	return errSuperseded
}

// prune removes all but the best Keep snapshots by rank: a stale
// generation's snapshot with a higher Seq never pushes out a newer
// generation's.
//
// A damaged snapshot (its footer unreadable) is not pruned and does not
// count against Keep: it is kept aside (keepAside).
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
	snaps = intact
	var errs []error
	for _, sn := range snaps[min(s.keep, len(snaps)):] {
		if err := os.Remove(filepath.Join(dir, fileName(sn.meta.Seq))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
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
			m, err := loadFile(path, seq, decode)
			if errors.Is(err, fs.ErrNotExist) && relist < 100 {
				vanished = true
				break
			}
			if err == nil {
				src := SourceLatest
				if tried > 0 {
					src = SourceFallback
				}
				return m, src, nil
			}
			if cerr := ctx.Err(); cerr != nil {
				// A decode cut short by the end of the context says nothing
				// about the file.
				return Meta{}, "", fmt.Errorf("load checkpoint %s/%d: %w", topic, partition, cerr)
			}
			tried++
			where := path
			if IsDamage(err) {
				if kept := s.keepAside(ctx, dir, Damage{Topic: topic, Partition: partition, Seq: seq, Where: path, Err: err}); kept != "" {
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

func loadFile(path string, seq uint64, decode func(Meta, io.Reader) error) (Meta, error) {
	rc, m, err := openFile(path, seq)
	if err != nil {
		return Meta{}, err
	}
	err = decode(m, rc)
	if cerr := rc.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return Meta{}, &RefusedError{Err: err}
	}
	return m, nil
}

// openFile verifies the file's footer and payload checksum and returns the
// decompressed state.
func openFile(path string, seq uint64) (io.ReadCloser, Meta, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, Meta{}, err
	}
	m, err := verifyFile(f, path)
	if err != nil {
		f.Close()
		return nil, Meta{}, err
	}
	m.Seq = seq
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

// ranked returns the published snapshots of dir, best first by
// (Epoch, Generation, Seq); only footers are read.
func ranked(dir string) ([]fileSnap, error) {
	seqs, err := snapshots(dir)
	if err != nil {
		return nil, err
	}
	out := make([]fileSnap, len(seqs))
	for i, seq := range seqs {
		out[i].meta, out[i].err = footerOf(filepath.Join(dir, fileName(seq)))
		if out[i].err != nil {
			out[i].meta = Meta{}
		}
		out[i].meta.Seq = seq
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

// checkFence refuses m when dir holds a readable snapshot of a greater
// (Epoch, Generation).
func checkFence(dir string, m Meta) error {
	snaps, err := ranked(dir)
	if err != nil {
		return fmt.Errorf("list snapshots: %w", err)
	}
	for _, sn := range snaps {
		if sn.err == nil && compareFence(sn.meta, m) > 0 {
			return staleError(m, sn.meta, filepath.Join(dir, fileName(sn.meta.Seq)))
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
			seqs, err := snapshots(dir)
			if err != nil {
				return nil, fmt.Errorf("list checkpoints: %w", err)
			}
			for _, seq := range seqs {
				if err := ctx.Err(); err != nil {
					return nil, fmt.Errorf("list checkpoints: %w", err)
				}
				entries = append(entries, statFile(filepath.Join(dir, fileName(seq)), seq, t.Name(), p))
			}
			entries = append(entries, listDamaged(dir, t.Name(), p)...)
		}
	}
	return entries, nil
}

func statFile(path string, seq uint64, topic string, partition int) Entry {
	e := Entry{Where: path, Meta: Meta{Topic: topic, Partition: partition, Seq: seq}}
	f, err := os.Open(path)
	if err != nil {
		e.Err = err
		return e
	}
	defer f.Close()
	m, err := verifyFile(f, path)
	if err != nil {
		e.Err = err
		return e
	}
	m.Seq = seq
	e.Meta = m
	return e
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
	rc, _, err := openFile(e.Where, e.Meta.Seq)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint: %w", err)
	}
	return rc, nil
}

// Close implements Store. A FileStore holds no open resources.
func (s *FileStore) Close() error { return nil }

// Kind names the store for metrics labels: "file".
func (s *FileStore) Kind() string { return "file" }
