package checkpoint

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/errgroup"

	"dedup/offsets"
)

type chunkSum struct {
	Size int    `json:"size"`
	CRC  uint32 `json:"crc"`
}

type manifest struct {
	Meta   Meta       `json:"meta"`
	Nonce  string     `json:"nonce"`
	Chunks []chunkSum `json:"chunks"`
}

type manifestLoc struct {
	key    string
	offset int64
	base   uint64 // from the key: the base of an increment, 0 for a base
	m      manifest
	err    error // the manifest record could not be decoded
}

type chunkLoc struct {
	id     snapID
	seq    uint64
	nonce  string
	n      int
	offset int64
	sum    chunkSum
}

// partIndex is what one checkpoint partition holds, built by reading it.
type partIndex struct {
	mu        sync.Mutex // held while reading or writing the partition
	next      int64      // next offset to read
	read      int        // records read from Kafka so far (a Save's own records are learned, not read)
	manifests map[snapID]map[uint64]*manifestLoc
	chunks    map[string]*chunkLoc
	// since is when the refresh began that last read the partition to its
	// end, or the first one while none has: the index holds no deleted
	// piece if it reaches the end within delete.retention.ms of it.
	since time.Time
}

// index returns the index of a checkpoint partition, locked.
func (s *KafkaStore) index(cp int) *partIndex {
	s.mu.Lock()
	pi, ok := s.indexes[cp]
	if !ok {
		pi = &partIndex{manifests: map[snapID]map[uint64]*manifestLoc{}, chunks: map[string]*chunkLoc{}}
		s.indexes[cp] = pi
	}
	s.mu.Unlock()
	pi.mu.Lock()
	return pi
}

// refresh reads the checkpoint partition from where the index stopped to its
// current end. Called with pi.mu held.
func (s *KafkaStore) refresh(ctx context.Context, pi *partIndex, cp int) error {
	start := time.Now() // before the end offsets: whatever lies past them was written after it
	offs, err := offsets.List(ctx, s.client, s.topic, []int{cp})
	if err != nil {
		return err
	}
	r := offs[cp]
	switch {
	case r.End < pi.next:
		// The partition ends before where the index stopped: the topic was
		// deleted and created again. What the index holds is gone with it,
		// and the new records sit below pi.next: read the partition anew.
		pi.reset(r.First, start)
	case !pi.since.IsZero() && start.Sub(pi.since) > s.tombstoneLife/2:
		// Compaction removes a piece's records at once and its tombstones
		// delete.retention.ms later: an index that has not caught up for
		// that long may hold pieces gone with tombstones it never read.
		// Half of it is left for this read to reach the end.
		pi.reset(r.First, start)
	case pi.since.IsZero():
		pi.since = start
	}
	if pi.next < r.First {
		pi.next = r.First
	}
	err = readRange(ctx, s.client, s.topic, cp, pi.next, r.End, s.wait, func(rec *kafka.Record) error {
		key, err := kafka.ReadAll(rec.Key)
		if err != nil {
			return fmt.Errorf("read key at %d: %w", rec.Offset, err)
		}
		var value []byte
		if rec.Value != nil {
			if value, err = kafka.ReadAll(rec.Value); err != nil {
				return fmt.Errorf("read value at %d: %w", rec.Offset, err)
			}
		}
		s.apply(pi, string(key), value, rec.Value == nil, rec.Offset)
		pi.next = rec.Offset + 1
		pi.read++
		return nil
	})
	if err != nil {
		return err
	}
	pi.next = max(pi.next, r.End)
	pi.since = start
	return nil
}

// reset empties the index, to be read again from first from now on.
func (pi *partIndex) reset(first int64, now time.Time) {
	pi.manifests, pi.chunks, pi.next, pi.since = map[snapID]map[uint64]*manifestLoc{}, map[string]*chunkLoc{}, first, now
}

// apply adds one record of the checkpoint topic to the index.
func (s *KafkaStore) apply(pi *partIndex, key string, value []byte, tombstone bool, offset int64) {
	k, ok := s.parseKey(key)
	if !ok {
		if !tombstone {
			s.foreignRecord(key, value)
		}
		return
	}
	if !k.manifest {
		if tombstone {
			delete(pi.chunks, key)
			return
		}
		pi.chunks[key] = &chunkLoc{id: k.id, seq: k.seq, nonce: k.nonce, n: k.n, offset: offset,
			sum: chunkSum{Size: len(value), CRC: checksum(value)}}
		return
	}
	ms := pi.manifests[k.id]
	if tombstone {
		// Only the piece of that key: a base and an increment may share a
		// seq when two writers overlapped.
		if loc, ok := ms[k.seq]; ok && loc.key == key {
			delete(ms, k.seq)
		}
		return
	}
	if ms == nil {
		ms = map[uint64]*manifestLoc{}
		pi.manifests[k.id] = ms
	}
	loc := &manifestLoc{key: key, offset: offset, base: k.base}
	if err := json.Unmarshal(value, &loc.m); err != nil {
		loc.err = &CorruptError{Key: key, What: "manifest", Err: fmt.Errorf("%w: %v", ErrFormat, err)}
	} else if f := unknownField[manifest](value); f != "" {
		s.notes.note(s.log, "manifest field "+f, loc.m.Meta.Writer, key)
	}
	// The key is the authority on what the manifest describes.
	loc.m.Meta.Topic, loc.m.Meta.Partition, loc.m.Meta.Seq = k.id.topic, k.id.partition, k.seq
	if loc.err == nil {
		if err := checkPiece(loc.m.Meta, k.base); err != nil {
			loc.err = &CorruptError{Key: key, What: "manifest", Err: err}
		}
	}
	loc.m.Meta.Base = k.base
	ms[k.seq] = loc
}

// foreignRecord notes a record of an input partition's key space that
// this release does not parse: a kind of piece a newer release writes
// (as increments were to releases before them). Other keys of the group
// (the probe's) are none of its business.
func (s *KafkaStore) foreignRecord(key string, value []byte) {
	rest, _ := strings.CutPrefix(key, s.prefix)
	f := strings.Split(rest, "/")
	if len(f) < 3 || len(rest) == len(key) {
		return
	}
	if _, err := strconv.Atoi(f[1]); err != nil {
		return
	}
	var v struct {
		Meta struct {
			Writer string `json:"writer"`
		} `json:"meta"`
	}
	_ = json.Unmarshal(value, &v) // a chunk, or another format: no writer to name
	s.notes.note(s.log, "records of kind "+strconv.Quote(f[2]), v.Meta.Writer, key)
}

// newest returns the manifests of id, best first by (Epoch, Generation,
// Seq); undecodable manifests rank by Seq alone.
func (pi *partIndex) newest(id snapID) []*manifestLoc {
	var out []*manifestLoc
	for _, loc := range pi.manifests[id] {
		out = append(out, loc)
	}
	slices.SortFunc(out, newestFirst)
	return out
}

// newestFirst orders manifests best first by (Epoch, Generation, Seq).
func newestFirst(a, b *manifestLoc) int {
	if c := compareRank(a.rank(), b.rank()); c != 0 {
		return -c
	}
	return -cmp.Compare(a.m.Meta.Seq, b.m.Meta.Seq)
}

// rank is what the manifest is ranked by: its Meta, or only its Seq when
// it could not be decoded.
func (loc *manifestLoc) rank() Meta {
	if loc.err != nil {
		return Meta{Seq: loc.m.Meta.Seq}
	}
	return loc.m.Meta
}

// verifyIndexed checks a manifest against the chunks the index has seen.
func (s *KafkaStore) verifyIndexed(pi *partIndex, loc *manifestLoc) error {
	if loc.err != nil {
		return loc.err
	}
	m := loc.m
	var total int64
	for n, want := range m.Chunks {
		key := s.chunkKey(snapID{m.Meta.Topic, m.Meta.Partition}, m.Meta.Seq, m.Nonce, n)
		c, ok := pi.chunks[key]
		if !ok {
			return &CorruptError{Key: key, What: fmt.Sprintf("chunk %d of %d", n, len(m.Chunks)), Err: ErrMissing}
		}
		if c.sum != want {
			return &CorruptError{Key: key, What: fmt.Sprintf("chunk %d of %d", n, len(m.Chunks)),
				Err: fmt.Errorf("%w: %d bytes crc %08x, manifest says %d bytes crc %08x", ErrChecksum, c.sum.Size, c.sum.CRC, want.Size, want.CRC)}
		}
		total += int64(want.Size)
	}
	if total != m.Meta.StoredBytes {
		return &CorruptError{Key: loc.key, What: "manifest", Err: fmt.Errorf("%w: chunks hold %d bytes, meta says %d", ErrFormat, total, m.Meta.StoredBytes)}
	}
	return nil
}

// chunkPlan is what is needed to read one snapshot back.
type chunkPlan struct {
	loc     *manifestLoc
	offsets []int64 // of each chunk
	keys    []string
}

func (s *KafkaStore) plan(pi *partIndex, loc *manifestLoc) (chunkPlan, error) {
	if err := s.verifyIndexed(pi, loc); err != nil {
		return chunkPlan{}, err
	}
	p := chunkPlan{loc: loc}
	m := loc.m
	for n := range m.Chunks {
		key := s.chunkKey(snapID{m.Meta.Topic, m.Meta.Partition}, m.Meta.Seq, m.Nonce, n)
		p.keys = append(p.keys, key)
		p.offsets = append(p.offsets, pi.chunks[key].offset)
	}
	return p, nil
}

// fetchChunks reads the chunks of a plan and verifies every checksum, so the
// returned bytes are exactly what Save stored.
func (s *KafkaStore) fetchChunks(ctx context.Context, cp int, p chunkPlan) ([][]byte, error) {
	got, err := s.readChunks(ctx, cp, []chunkPlan{p})
	if err != nil {
		return nil, err
	}
	return p.verify(got)
}

const (
	// runGap is the most records between two wanted chunks that one read
	// goes through rather than fetching again: the manifest and tombstones
	// a Save writes after its chunks. Wider gaps are mostly other input
	// partitions' chunks, which may be large.
	runGap = 3
	// runReads is how many reads of separate runs go at once: a chain's
	// increments, between other partitions' records, are many small runs.
	runReads = 8
)

// readChunks reads the chunks of plans from checkpoint partition cp, by
// offset (an offset missing from the answer: compacted away meanwhile).
// Nearby chunks are read in one run, each run with fetches sized to it,
// and several runs at once.
func (s *KafkaStore) readChunks(ctx context.Context, cp int, plans []chunkPlan) (map[int64][]byte, error) {
	size := map[int64]int{}
	for _, p := range plans {
		for n, off := range p.offsets {
			size[off] = p.loc.m.Chunks[n].Size
		}
	}
	offsets := slices.Sorted(maps.Keys(size))
	var mu sync.Mutex
	got := make(map[int64][]byte, len(offsets))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runReads)
	for len(offsets) > 0 {
		n := 1
		bytes := size[offsets[0]]
		for n < len(offsets) && offsets[n]-offsets[n-1] <= runGap+1 {
			bytes += size[offsets[n]]
			n++
		}
		run := offsets[:n]
		offsets = offsets[n:]
		maxBytes := min(bytes+(runGap+1)*n*recordOverhead, fetchMaxBytes)
		g.Go(func() error {
			from, to := run[0], run[len(run)-1]+1
			return readRangeMax(gctx, s.client, s.topic, cp, from, to, s.wait, maxBytes, func(rec *kafka.Record) error {
				if _, ok := size[rec.Offset]; !ok {
					return nil
				}
				b, err := kafka.ReadAll(rec.Value)
				if err != nil {
					return fmt.Errorf("read chunk at %d: %w", rec.Offset, err)
				}
				mu.Lock()
				got[rec.Offset] = b
				mu.Unlock()
				return nil
			})
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return got, nil
}

// verify returns the chunks of the plan out of got (readChunks) once every
// checksum holds, so the returned bytes are exactly what Save stored.
func (p chunkPlan) verify(got map[int64][]byte) ([][]byte, error) {
	m := p.loc.m
	chunks := make([][]byte, len(p.keys))
	for n, off := range p.offsets {
		chunks[n] = got[off]
	}
	total := newCRC()
	for n, b := range chunks {
		what := fmt.Sprintf("chunk %d of %d", n, len(chunks))
		if b == nil {
			return nil, &CorruptError{Key: p.keys[n], What: what, Err: ErrMissing}
		}
		if got := (chunkSum{Size: len(b), CRC: checksum(b)}); got != m.Chunks[n] {
			return nil, &CorruptError{Key: p.keys[n], What: what, Err: fmt.Errorf("%w: crc %08x, want %08x", ErrChecksum, got.CRC, m.Chunks[n].CRC)}
		}
		total.Write(b)
	}
	if got := total.Sum32(); got != m.Meta.Checksum {
		return nil, &CorruptError{Key: p.loc.key, What: "payload", Err: fmt.Errorf("%w: crc %08x, want %08x", ErrChecksum, got, m.Meta.Checksum)}
	}
	return chunks, nil
}

func chunkReader(chunks [][]byte) io.Reader {
	rs := make([]io.Reader, len(chunks))
	for i, b := range chunks {
		rs[i] = bytes.NewReader(b)
	}
	return io.MultiReader(rs...)
}
