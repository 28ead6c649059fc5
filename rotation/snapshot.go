package rotation

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"time"
)

// Snapshot format, version 1 (all integers little-endian):
//
//	offset size
//	     0    4  magic "DDRP"
//	     4    2  format version (1)
//	     6    1  mode (1 counting, 2 plain, 3 fingerprint)
//	     7    1  flags (bit 0: a record has set the current window)
//	     8    8  Options.ExpectedKeys
//	    16    8  Options.FPRate (IEEE 754 bits)
//	    24    8  Options.Window (nanoseconds)
//	    32    8  current window start (Unix nanoseconds)
//	    40    8  rotations
//	    48    8  m: counters (counting), bits (plain) or slots (fingerprint) per generation
//	    56    4  k (fingerprint: fingerprint bits)
//	    60    4  reserved (0)
//	    64   16  current generation counts: non-zero, saturated counters (counting), keys added, 0 (plain)
//	             or fingerprints held, stashed (fingerprint)
//	    80   16  previous generation counts
//	    96    4  CRC-32C of bytes 0..95 (checked before anything is allocated)
//	   100    …  current generation words (uint64), then previous generation words
//	     …    …  fingerprint only: overflows, early rotations, forgotten keys (3×8),
//	             then the current and the previous stash: per stashed fingerprint,
//	             its lower bucket and fingerprint (2×8), in ascending order
//	     …    4  CRC-32C of every byte before it
//
// A counting generation has m/16 words, a plain one ceil(m/64). A
// fingerprint generation is its buckets' bytes in bucket order (m/4 buckets
// of k/2 bytes, slots packed k bits apiece from the low bit), zero-padded
// to whole words.
const (
	snapshotMagic   = "DDRP"
	snapshotVersion = 1
	headerSize      = 100
	chunkBytes      = 64 << 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// snapWriter counts and checksums what it writes.
type snapWriter struct {
	w   io.Writer
	crc uint32
	n   int64
}

func (s *snapWriter) write(b []byte) error {
	n, err := s.w.Write(b)
	s.crc = crc32.Update(s.crc, castagnoli, b[:n])
	s.n += int64(n)
	if err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	return nil
}

// chunkWords is the streaming buffer of snapshots, in words (a multiple of
// blockWords).
const chunkWords = chunkBytes / 8

// putPreamble writes what snapshot and delta headers begin with (bytes
// 0..31): magic, version, mode, flags and options.
func (p *Pair) putPreamble(h []byte, magic string, version uint16) {
	copy(h[0:], magic)
	binary.LittleEndian.PutUint16(h[4:], version)
	h[6] = byte(p.opts.Mode)
	if p.started {
		h[7] = 1
	}
	binary.LittleEndian.PutUint64(h[8:], p.opts.ExpectedKeys)
	rate := math.Float64bits(p.opts.FPRate)
	if rateMarked(p.opts) {
		rate ^= 1
	}
	binary.LittleEndian.PutUint64(h[16:], rate)
	binary.LittleEndian.PutUint64(h[24:], uint64(p.opts.Window))
}

// rateMarked reports whether headers of a pair of options o store FPRate
// with its lowest bit flipped: a fingerprint pair of this release's sizing
// where it differs from the sizing of releases up to 0.9.0. Those decode
// the pair all the same (the format is theirs), but with options one ulp
// off their configured ones, so they keep it read-only beside filters of
// their own sizing instead of running it with a spare of another geometry
// (their CopyTo would refuse it at the next full snapshot); and when the
// partition comes back, this release resumes it (headerOptions clears the
// bit).
func rateMarked(o Options) bool {
	if o.Mode != Fingerprint || o.otherSizing {
		return false
	}
	p := generationFPRate(o.FPRate)
	b, f := fingerprintGeometry(o.ExpectedKeys, p)
	eb, ef := earlierFingerprintGeometry(o.ExpectedKeys, p)
	return b != eb || f != ef
}

// headerOptions decodes the options of a snapshot or delta header of
// geometry (m, k), normalised: FPRate's lowest bit flipped back when
// rateMarked says this release set it, and a fingerprint pair of another
// sizing marked otherSizing.
func headerOptions(h []byte, m, k uint64) (Options, error) {
	o := preambleOptions(h)
	if o.Mode == Fingerprint {
		o1 := o
		o1.FPRate = math.Float64frombits(math.Float64bits(o.FPRate) ^ 1)
		if n1, err := o1.normalize(); err == nil && rateMarked(n1) {
			if wm, wk := geometry(n1); wm == m && uint64(wk) == k {
				return n1, nil
			}
		}
	}
	n, err := o.normalize()
	if err == nil && n.Mode == Fingerprint {
		if wm, wk := geometry(n); wm != m || uint64(wk) != k {
			n.otherSizing = true
		}
	}
	return n, err
}

// preambleOptions decodes the options putPreamble wrote, unchecked.
func preambleOptions(h []byte) Options {
	return Options{
		Mode:         Mode(h[6]),
		ExpectedKeys: binary.LittleEndian.Uint64(h[8:]),
		FPRate:       math.Float64frombits(binary.LittleEndian.Uint64(h[16:])),
		Window:       time.Duration(binary.LittleEndian.Uint64(h[24:])),
	}
}

// chunks returns the streaming buffers of p's generations: words, and as
// many bytes.
func (p *Pair) chunks() ([]uint64, []byte) {
	words := make([]uint64, min(chunkWords, p.genWords()))
	return words, make([]byte, 8*len(words))
}

// writeGens streams both generations of p, current first.
func (s *snapWriter) writeGens(p *Pair) error {
	words, buf := p.chunks()
	for g := range 2 {
		for i := uint64(0); i < p.genWords(); {
			n := p.gens.gather(g, i, words)
			for j, x := range words[:n] {
				binary.LittleEndian.PutUint64(buf[8*j:], x)
			}
			if err := s.write(buf[:8*n]); err != nil {
				return err
			}
			i += uint64(n)
		}
	}
	return nil
}

// genWords is the number of words of one generation.
func (p *Pair) genWords() uint64 { return p.gens.genWords() }

// WriteTo writes a versioned, checksummed snapshot of the whole pair: options,
// window, rotations, geometry, and both generations. It streams the filters
// through a small buffer.
func (p *Pair) WriteTo(w io.Writer) (int64, error) {
	if !p.initialised() {
		return 0, errors.New("write snapshot: pair not initialised (use New)")
	}
	var h [headerSize]byte
	p.putPreamble(h[:], snapshotMagic, snapshotVersion)
	binary.LittleEndian.PutUint64(h[32:], uint64(p.start))
	binary.LittleEndian.PutUint64(h[40:], p.rotations)
	binary.LittleEndian.PutUint64(h[48:], p.m)
	binary.LittleEndian.PutUint32(h[56:], uint32(p.k))
	p.putCounts(h[64:96])
	binary.LittleEndian.PutUint32(h[96:], crc32.Checksum(h[:96], castagnoli))

	sw := &snapWriter{w: w}
	if err := sw.write(h[:]); err != nil {
		return sw.n, err
	}
	if err := sw.writeGens(p); err != nil {
		return sw.n, err
	}
	if p.fp != nil {
		if err := sw.write(p.fp.appendStashes(nil)); err != nil {
			return sw.n, err
		}
	}
	var t [4]byte
	binary.LittleEndian.PutUint32(t[:], sw.crc)
	err := sw.write(t[:])
	return sw.n, err
}

// putCounts writes the counts of the current then the previous generation
// (2×8 bytes each, as the snapshot header holds them) to b.
func (p *Pair) putCounts(b []byte) {
	a, z := p.gens.counts()
	for g := range 2 {
		binary.LittleEndian.PutUint64(b[16*g:], a[g])
		binary.LittleEndian.PutUint64(b[16*g+8:], z[g])
	}
}

// countsValid reports whether a generation's counts (a, b as the snapshot
// header holds them) can be right for mode o and m.
func countsValid(mode Mode, m, a, b uint64) bool {
	switch mode {
	case Counting:
		return a <= m && b <= a
	case Plain:
		return b == 0
	default:
		return b <= a && b <= stashCapacity(m/slotsPerBucket) && a-b <= m
	}
}

// snapReader counts and checksums what it reads.
type snapReader struct {
	r   io.Reader
	crc uint32
	n   int64
}

func (s *snapReader) read(b []byte, what string) error {
	n, err := io.ReadFull(s.r, b)
	s.crc = crc32.Update(s.crc, castagnoli, b[:n])
	s.n += int64(n)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return &CorruptError{What: what, Offset: s.n, Err: ErrTruncated}
	default:
		return fmt.Errorf("read snapshot %s: %w", what, err)
	}
}

// readGens reads both generations into p, current first.
func (s *snapReader) readGens(p *Pair) error {
	words, buf := p.chunks()
	total := p.genWords()
	for g, what := range [2]string{"current generation", "previous generation"} {
		for i := uint64(0); i < total; {
			n := min(total-i, uint64(len(words)))
			if err := s.read(buf[:8*n], what); err != nil {
				return err
			}
			for j := range words[:n] {
				words[j] = binary.LittleEndian.Uint64(buf[8*j:])
			}
			i += uint64(p.gens.scatter(g, i, words[:n]))
		}
	}
	if p.fp != nil {
		p.fp.flush()
	}
	return nil
}

func invalid(what string, off int64, format string, args ...any) error {
	return &CorruptError{What: what, Offset: off, Err: fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)}
}

// ReadFrom decodes a snapshot written by WriteTo and replaces the receiver's
// whole state (options included) with it; it works on a zero Pair. It reads
// exactly one snapshot and nothing after it. The receiver is changed only
// when the snapshot is complete, its checksums match and every field is
// consistent; otherwise the error is a *CorruptError wrapping ErrTruncated,
// ErrChecksum, ErrVersion or ErrInvalid (or a read error from r).
//
// Before allocating the filters the decoder checks the header's own checksum
// and that the declared geometry is within a factor of two of what the
// declared options size, so a corrupt header cannot make it allocate more
// than a valid snapshot of those options would.
func (p *Pair) ReadFrom(r io.Reader) (int64, error) {
	sr := &snapReader{r: r}
	var h [headerSize]byte
	if err := sr.read(h[:], "header"); err != nil {
		return sr.n, err
	}
	if string(h[0:4]) != snapshotMagic {
		return sr.n, invalid("magic", 0, "got %q, want %q", h[0:4], snapshotMagic)
	}
	if v := binary.LittleEndian.Uint16(h[4:]); v != snapshotVersion {
		return sr.n, &CorruptError{What: "version", Offset: 4, Err: fmt.Errorf("%w %d (this build reads %d)", ErrVersion, v, snapshotVersion)}
	}
	if got, want := binary.LittleEndian.Uint32(h[96:]), crc32.Checksum(h[:96], castagnoli); got != want {
		return sr.n, &CorruptError{What: "header", Offset: 96, Err: fmt.Errorf("%w: stored %08x, computed %08x", ErrChecksum, got, want)}
	}
	q, err := decodeHeader(&h)
	if err != nil {
		return sr.n, err
	}

	if err := sr.readGens(q); err != nil {
		return sr.n, err
	}
	if q.fp != nil {
		if err := sr.readStashes(q.fp); err != nil {
			return sr.n, err
		}
	}
	computed := sr.crc
	var t [4]byte
	if err := sr.read(t[:], "checksum"); err != nil {
		return sr.n, err
	}
	if stored := binary.LittleEndian.Uint32(t[:]); stored != computed {
		return sr.n, &CorruptError{What: "checksum", Offset: sr.n - 4, Err: fmt.Errorf("%w: stored %08x, computed %08x", ErrChecksum, stored, computed)}
	}
	if err := q.validateData(); err != nil {
		return sr.n, err
	}
	*p = *q
	return sr.n, nil
}

// decodeHeader checks the header fields and allocates a pair for them.
func decodeHeader(h *[headerSize]byte) (*Pair, error) {
	o := preambleOptions(h[:])
	if o.Mode != Counting && o.Mode != Plain && o.Mode != Fingerprint {
		return nil, invalid("mode", 6, "mode %d", h[6])
	}
	m := binary.LittleEndian.Uint64(h[48:])
	k := binary.LittleEndian.Uint32(h[56:])
	o, err := headerOptions(h[:], m, uint64(k))
	if err != nil {
		return nil, invalid("options", 8, "%v", err)
	}
	flags := h[7]
	if flags&^1 != 0 {
		return nil, invalid("flags", 7, "unknown flags %#x", flags)
	}
	started := flags&1 != 0
	start := int64(binary.LittleEndian.Uint64(h[32:]))
	rotations := binary.LittleEndian.Uint64(h[40:])
	switch {
	case started && (start < minNanos || start > maxNanos || start%int64(o.Window) != 0):
		return nil, invalid("window start", 32, "%d is not a window boundary of %v", start, o.Window)
	case !started && (start != 0 || rotations != 0):
		return nil, invalid("window start", 32, "window start %d and %d rotations before the first record", start, rotations)
	}
	if r := binary.LittleEndian.Uint32(h[60:]); r != 0 {
		return nil, invalid("reserved", 60, "reserved field %#x", r)
	}
	wantM, wantK := geometry(o)
	switch {
	case m < wantM/2 || m > 2*wantM:
		return nil, invalid("geometry", 48, "m=%d far from the %d the options size", m, wantM)
	case o.Mode == Counting && m%blockCounters != 0:
		return nil, invalid("geometry", 48, "m=%d is not a whole number of %d-counter blocks", m, blockCounters)
	case o.Mode == Fingerprint && (m%slotsPerBucket != 0 || k%2 != 0):
		return nil, invalid("geometry", 48, "m=%d, k=%d: want whole %d-slot buckets and even k", m, k, slotsPerBucket)
	case k == 0 || k > maxK || int(k) > 2*wantK:
		return nil, invalid("geometry", 56, "k=%d (options give %d)", k, wantK)
	}
	for i, off := range []int{64, 80} {
		a, b := binary.LittleEndian.Uint64(h[off:]), binary.LittleEndian.Uint64(h[off+8:])
		if !countsValid(o.Mode, m, a, b) {
			return nil, invalid([2]string{"current counts", "previous counts"}[i], int64(off), "counts %d, %d", a, b)
		}
	}
	p := newPair(o, m, int(k))
	p.start, p.started, p.rotations = start, started, rotations
	p.deltaFrom = rotations
	u64 := func(off int) uint64 { return binary.LittleEndian.Uint64(h[off:]) }
	p.gens.setCounts([2]uint64{u64(64), u64(80)}, [2]uint64{u64(72), u64(88)})
	return p, nil
}

// validateData checks that the decoded filters agree with the header: exact
// counter counts (counting), fingerprints in slots (fingerprint), no bits
// beyond m (plain).
func (p *Pair) validateData() error {
	return p.gens.validate()
}
