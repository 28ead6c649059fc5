package rotation

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/bits"
)

// Delta format, version 1 (all integers little-endian). A delta carries what
// changed in a pair since the previous delta (or since the state a base
// snapshot holds): the generation swaps to replay, then the final value of
// every word written since, by logical generation, and the small state
// (header scalars, stashes) whole.
//
//	offset size
//	     0    4  magic "DDRD"
//	     4    2  format version (1)
//	     6    1  mode (1 counting, 2 plain, 3 fingerprint)
//	     7    1  flags (bit 0: a record has set the current window)
//	     8    8  Options.ExpectedKeys
//	    16    8  Options.FPRate (IEEE 754 bits)
//	    24    8  Options.Window (nanoseconds)
//	    32    8  m, as in a snapshot
//	    40    4  k, as in a snapshot
//	    44    4  sequence: deltas taken before this one since the base state
//	             (ResetDelta, ReadFrom, CopyTo into the pair), mod 2³²
//	    48    8  from: the rotations of the state the delta applies to
//	    56    8  swaps: generation swap-and-clears to replay first (1: rotate;
//	             2 or more: clear both)
//	    64    8  current window start (Unix nanoseconds), after the delta
//	    72    8  rotations, after the delta
//	    80   16  current generation counts, as in a snapshot
//	    96   16  previous generation counts
//	   112   24  fingerprint: overflows, early rotations, forgotten keys (0 otherwise)
//	   136    8  words carried for the current generation
//	   144    8  words carried for the previous generation
//	   152    8  body length: the bytes after this header, final checksum included
//	   160    4  CRC-32C of bytes 0..159
//	   164    …  the current generation's words, then the previous one's, each
//	             in ascending index order as (uvarint gap, 8-byte value): the
//	             index is the word's in the generation's snapshot data, the
//	             gap is the index minus one more than the previous index (the
//	             first word's gap is its index)
//	     …    …  fingerprint only: the current and the previous stash, whole,
//	             as in a snapshot (16 bytes per entry; the counts say how many)
//	     …    4  CRC-32C of every byte before it
//
// A plain pair does not track which words its bit filters write (the
// bits-and-blooms filter places the bits itself), so its deltas carry every
// word of both generations: as large as a snapshot.
const (
	deltaMagic      = "DDRD"
	deltaVersion    = 1
	deltaHeaderSize = 164
	// Bytes of one carried word: a gap of 1 to 10 bytes and the value.
	minDeltaWord = 1 + 8
	maxDeltaWord = binary.MaxVarintLen64 + 8
	stashEntry   = 16
)

// Delta holds one delta of a pair, captured by TakeDelta, for writing with
// WriteTo and replaying on a copy of the pair's earlier state with
// ApplyDelta. Its memory is reused by the next TakeDelta into it. The zero
// Delta is empty and ready for use.
type Delta struct {
	buf   []byte
	words int
	keys  []stashKey // scratch for ordering stashes
}

// Len is the encoded size of the delta in bytes (what WriteTo writes).
func (d *Delta) Len() int { return len(d.buf) }

// Words is the number of filter words the delta carries.
func (d *Delta) Words() int { return d.words }

// From is the rotations of the state the delta applies to (the
// Stats().Rotations of the pair it was taken from, as of its previous
// delta), and To the rotations of the state it leaves. Both are 0 for an
// empty Delta.
func (d *Delta) From() uint64 { return d.field(48) }
func (d *Delta) To() uint64   { return d.field(72) }

// Seq is the delta's place in its chain: 0 for the first delta after the
// base state (ResetDelta, ReadFrom, CopyTo into the pair), then 1, 2, …
// (mod 2³²). ApplyDelta takes only the next one, so a lost or repeated
// delta is refused, not applied.
func (d *Delta) Seq() uint32 {
	if len(d.buf) < deltaHeaderSize {
		return 0
	}
	return binary.LittleEndian.Uint32(d.buf[44:])
}

func (d *Delta) field(off int) uint64 {
	if len(d.buf) < deltaHeaderSize {
		return 0
	}
	return binary.LittleEndian.Uint64(d.buf[off:])
}

// Bytes returns the encoded delta. It aliases d's memory: valid until the
// next TakeDelta into d.
func (d *Delta) Bytes() []byte { return d.buf }

// WriteTo writes the encoded delta to w.
func (d *Delta) WriteTo(w io.Writer) (int64, error) {
	if len(d.buf) == 0 {
		return 0, errors.New("write delta: empty delta (use TakeDelta)")
	}
	n, err := w.Write(d.buf)
	if err == nil && n < len(d.buf) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return int64(n), fmt.Errorf("write delta: %w", err)
	}
	return int64(n), nil
}

// ReadFrom reads one delta written by WriteTo into d, replacing what d
// held, and checks its checksums and the header fields that need no pair
// (options, geometry, word and stash counts, length), so that a store can
// read, inspect (From, To, Seq, Words, Len) and keep a delta before any
// pair takes it; ApplyDelta of d.Bytes() checks the rest. A refused delta
// is a *CorruptError as in ApplyDelta, and leaves d empty.
func (d *Delta) ReadFrom(r io.Reader) (int64, error) {
	d.words = 0
	if cap(d.buf) < deltaHeaderSize {
		d.buf = make([]byte, deltaHeaderSize)
	}
	d.buf = d.buf[:deltaHeaderSize]
	n, err := d.readFrom(r)
	if err != nil {
		d.buf = d.buf[:0]
		d.words = 0
	}
	return n, err
}

func (d *Delta) readFrom(r io.Reader) (int64, error) {
	h := (*[deltaHeaderSize]byte)(d.buf)
	n, err := io.ReadFull(r, h[:])
	if err != nil {
		return int64(n), deltaReadError("delta header", int64(n), err)
	}
	if err := checkDeltaIntegrity(h); err != nil {
		return int64(n), err
	}
	u64 := func(off int) uint64 { return binary.LittleEndian.Uint64(h[off:]) }
	o := preambleOptions(h[:])
	if o.Mode != Counting && o.Mode != Plain && o.Mode != Fingerprint {
		return int64(n), deltaInvalid("delta mode", 6, "mode %d", h[6])
	}
	m, k := u64(32), uint64(binary.LittleEndian.Uint32(h[40:]))
	o, err = headerOptions(h[:], m, k)
	if err != nil {
		return int64(n), deltaInvalid("delta options", 8, "%v", err)
	}
	wantM, _ := geometry(o)
	if m < wantM/2 || m > 2*wantM || k == 0 || k > maxK {
		return int64(n), deltaInvalid("delta geometry", 32, "m=%d, k=%d far from the options' m=%d", m, k, wantM)
	}
	genWords := generationWords(o.Mode, m, k)
	var stashBytes uint64
	for g := range 2 {
		if w := u64(136 + 8*g); w > genWords {
			return int64(n), deltaInvalid("delta word count", int64(136+8*g), "%d words in a generation of %d", w, genWords)
		}
		if a, b := u64(80+16*g), u64(88+16*g); !countsValid(o.Mode, m, a, b) {
			return int64(n), deltaInvalid([2]string{"delta current counts", "delta previous counts"}[g], int64(80+16*g), "counts %d, %d", a, b)
		} else if o.Mode == Fingerprint {
			stashBytes += stashEntry * b
		}
	}
	w, body := u64(136)+u64(144), u64(152)
	if body < w*minDeltaWord+stashBytes+4 || body > w*maxDeltaWord+stashBytes+4 {
		return int64(n), deltaInvalid("delta body length", 152, "%d bytes for %d words and %d stash bytes", body, w, stashBytes)
	}
	total := deltaHeaderSize + int(body)
	if cap(d.buf) < total {
		grown := make([]byte, total)
		copy(grown, d.buf[:deltaHeaderSize])
		d.buf = grown
	}
	d.buf = d.buf[:total]
	m2, err := io.ReadFull(r, d.buf[deltaHeaderSize:])
	read := int64(n + m2)
	if err != nil {
		return read, deltaReadError("delta body", read, err)
	}
	crc := crc32.Checksum(d.buf[:total-4], castagnoli)
	if stored := binary.LittleEndian.Uint32(d.buf[total-4:]); stored != crc {
		return read, &CorruptError{What: "delta checksum", Offset: read - 4, Err: fmt.Errorf("%w: stored %08x, computed %08x", ErrChecksum, stored, crc), delta: true}
	}
	d.words = int(w)
	return read, nil
}

// checkDeltaIntegrity checks a delta header's magic, version and checksum.
func checkDeltaIntegrity(h *[deltaHeaderSize]byte) error {
	if string(h[0:4]) != deltaMagic {
		return deltaInvalid("delta magic", 0, "got %q, want %q", h[0:4], deltaMagic)
	}
	if v := binary.LittleEndian.Uint16(h[4:]); v != deltaVersion {
		return &CorruptError{What: "delta version", Offset: 4, Err: fmt.Errorf("%w %d (this build reads %d)", ErrVersion, v, deltaVersion), delta: true}
	}
	if got, want := binary.LittleEndian.Uint32(h[160:]), crc32.Checksum(h[:160], castagnoli); got != want {
		return &CorruptError{What: "delta header", Offset: 160, Err: fmt.Errorf("%w: stored %08x, computed %08x", ErrChecksum, got, want), delta: true}
	}
	return nil
}

// TakeDelta captures into d every change of p since its previous TakeDelta
// or ResetDelta (or since New, ReadFrom, ApplyDelta, or CopyTo into p), and
// starts tracking afresh. Applied with ApplyDelta to a pair holding the
// state p had then, the delta gives that pair exactly p's state now. The
// changes are p's to carry no longer: if the delta is lost (its write
// fails), no later delta makes up for it, and ApplyDelta refuses the ones
// after the gap (Seq); take a new base (CopyTo, ResetDelta) instead.
//
// It costs a scan of p's change bitmaps (one bit per filter word: 1/64 of
// the filters' memory) plus the words that changed, and allocates only
// while d's buffer grows to the largest delta it has held; it changes
// nothing observable (answers, Stats, snapshots). Call it on the goroutine
// that owns p. In Plain mode every word is carried (see the format above).
func (p *Pair) TakeDelta(d *Delta) {
	d.buf, d.words = d.buf[:0], 0
	if !p.initialised() {
		return
	}
	var h [deltaHeaderSize]byte
	p.putDeltaHeader(&h)
	b := append(d.buf, h[:]...)
	var n [2]uint64
	for g := range 2 {
		b, n[g] = p.appendWords(b, g)
	}
	if t := p.gens.tracking(); t != nil {
		t.words = 0 // appendWords cleared both bitmaps as it read them
	}
	if c := p.fp; c != nil {
		b, d.keys = c.appendStash(b, c.cur, d.keys)
		b, d.keys = c.appendStash(b, 1-c.cur, d.keys)
	}
	binary.LittleEndian.PutUint64(b[136:], n[0])
	binary.LittleEndian.PutUint64(b[144:], n[1])
	binary.LittleEndian.PutUint64(b[152:], uint64(len(b)-deltaHeaderSize+4))
	binary.LittleEndian.PutUint32(b[160:], crc32.Checksum(b[:160], castagnoli))
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	d.buf, d.words = b, int(n[0]+n[1])
	p.deltaSwaps, p.deltaFrom = 0, p.rotations
	p.deltaSeq++
}

// DeltaWords is how many filter words the next TakeDelta carries: the
// words changed since the last delta. 0 for a pair that does not track
// them (plain mode, whose deltas carry every word). It costs at most the
// folding of a few hundred pending marks: the worker asks it to choose
// between an increment and a full copy.
func (p *Pair) DeltaWords() int {
	if !p.initialised() {
		return 0
	}
	if d := p.gens.tracking(); d != nil {
		return d.changed()
	}
	return 0
}

// ResetDelta forgets the changes tracked since the previous TakeDelta: the
// next delta starts from p's state now. Call it when a full snapshot of
// that state is taken (CopyTo from p, then WriteTo of the copy), on the
// goroutine that owns p. It clears the change bitmaps (1/64 of the filters'
// memory).
func (p *Pair) ResetDelta() {
	if p.initialised() {
		if d := p.gens.tracking(); d != nil {
			d.reset()
		}
	}
	p.deltaSwaps, p.deltaFrom, p.deltaSeq = 0, p.rotations, 0
}

// putDeltaHeader fills h except the word counts, body length and checksum.
func (p *Pair) putDeltaHeader(h *[deltaHeaderSize]byte) {
	p.putPreamble(h[:], deltaMagic, deltaVersion)
	binary.LittleEndian.PutUint64(h[32:], p.m)
	binary.LittleEndian.PutUint32(h[40:], uint32(p.k))
	binary.LittleEndian.PutUint32(h[44:], p.deltaSeq)
	binary.LittleEndian.PutUint64(h[48:], p.deltaFrom)
	binary.LittleEndian.PutUint64(h[56:], p.deltaSwaps)
	binary.LittleEndian.PutUint64(h[64:], uint64(p.start))
	binary.LittleEndian.PutUint64(h[72:], p.rotations)
	p.putCounts(h[80:112])
	if c := p.fp; c != nil {
		binary.LittleEndian.PutUint64(h[112:], c.refused)
		binary.LittleEndian.PutUint64(h[120:], c.early)
		binary.LittleEndian.PutUint64(h[128:], c.forgotten)
	}
}

// appendWords appends the changed words of logical generation g to b,
// clearing their marks, and returns how many it appended.
func (p *Pair) appendWords(b []byte, g int) ([]byte, uint64) {
	d := p.gens.dirtyMap(g)
	if d == nil { // not tracked: every word
		n := p.gens.genWords()
		for i := range n {
			b = append(b, 0)
			b = binary.LittleEndian.AppendUint64(b, p.gens.word(g, i))
		}
		return b, n
	}
	var n, next uint64
	for j, x := range d {
		if x == 0 {
			continue
		}
		d[j] = 0
		for ; x != 0; x &= x - 1 {
			i := uint64(j)<<6 | uint64(bits.TrailingZeros64(x))
			b = binary.AppendUvarint(b, i-next)
			b = binary.LittleEndian.AppendUint64(b, p.gens.word(g, i))
			next = i + 1
			n++
		}
	}
	return b, n
}

func deltaInvalid(what string, off int64, format string, args ...any) error {
	return &CorruptError{What: what, Offset: off, Err: fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...), delta: true}
}

// ApplyDelta reads one delta written by Delta.WriteTo and applies it to p,
// which must hold the state the delta was taken from: the same options and
// geometry, Stats().Rotations equal to the delta's From, and the deltas
// before it in its chain applied (Seq: a pair restored from a base takes
// delta 0, then 1, …). It reads the
// whole delta and checks it (checksums, fields, every word index and stash
// entry) before changing anything, so a refused delta leaves p as it was:
// a damaged delta is refused with a *CorruptError wrapping ErrTruncated,
// ErrChecksum, ErrVersion or ErrInvalid; an intact one for another pair or
// state with an error wrapping ErrDeltaMismatch (then the stream is left
// after the delta's header); a read error of r is returned wrapped. After
// it, p's change tracking is empty: the next TakeDelta of p carries only
// what changes from now on.
//
// It allocates only while its read buffer grows to the largest delta p has
// applied. Call it on the goroutine that owns p.
func (p *Pair) ApplyDelta(r io.Reader) (int64, error) {
	// The header is read into p's buffer, not a local array: r is an
	// interface, so a local array would escape and be allocated.
	if cap(p.applyBuf) < deltaHeaderSize {
		p.applyBuf = make([]byte, deltaHeaderSize)
	}
	h := (*[deltaHeaderSize]byte)(p.applyBuf[:deltaHeaderSize])
	n, err := io.ReadFull(r, h[:])
	if err != nil {
		return int64(n), deltaReadError("delta header", int64(n), err)
	}
	if err := checkDeltaIntegrity(h); err != nil {
		return int64(n), err
	}
	dh, err := p.checkDeltaHeader(h)
	if err != nil {
		return int64(n), err
	}
	if total := deltaHeaderSize + int(dh.body); cap(p.applyBuf) < total {
		grown := make([]byte, total)
		copy(grown, p.applyBuf[:deltaHeaderSize])
		p.applyBuf = grown
	}
	all := p.applyBuf[:deltaHeaderSize+int(dh.body)]
	body := all[deltaHeaderSize:]
	m, err := io.ReadFull(r, body)
	if err != nil {
		return int64(n + m), deltaReadError("delta body", int64(n+m), err)
	}
	read := int64(n + m)
	crc := crc32.Checksum(all[:len(all)-4], castagnoli)
	if stored := binary.LittleEndian.Uint32(all[len(all)-4:]); stored != crc {
		return read, &CorruptError{What: "delta checksum", Offset: read - 4, Err: fmt.Errorf("%w: stored %08x, computed %08x", ErrChecksum, stored, crc), delta: true}
	}
	if err := p.checkDeltaBody(&dh, body[:len(body)-4]); err != nil {
		return read, err
	}
	p.applyDeltaBody(&dh, body[:len(body)-4])
	return read, nil
}

// deltaReadError is the error of a short or failed read of a delta.
func deltaReadError(what string, off int64, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &CorruptError{What: what, Offset: off, Err: ErrTruncated, delta: true}
	}
	return fmt.Errorf("read %s: %w", what, err)
}

// deltaHeader is a checked delta header.
type deltaHeader struct {
	started        bool
	swaps          uint64
	start          int64
	rotations      uint64
	counts         [2][2]uint64 // per logical generation, as in a snapshot header
	refused, early uint64
	forgotten      uint64
	words          [2]uint64
	body           uint64
	stashed        [2]uint64 // fingerprint: stash entries per logical generation
	stashBytes     uint64
}

// checkDeltaHeader checks an intact header against p and itself.
func (p *Pair) checkDeltaHeader(h *[deltaHeaderSize]byte) (deltaHeader, error) {
	var dh deltaHeader
	u64 := func(off int) uint64 { return binary.LittleEndian.Uint64(h[off:]) }
	if !p.initialised() {
		return dh, fmt.Errorf("apply delta: %w: the pair has no state (ReadFrom a base snapshot first)", ErrDeltaMismatch)
	}
	m, k := u64(32), binary.LittleEndian.Uint32(h[40:])
	o, _ := headerOptions(h[:], m, uint64(k)) // invalid options differ from the pair's
	if o.Mode != p.opts.Mode || o.ExpectedKeys != p.opts.ExpectedKeys || math.Float64bits(o.FPRate) != math.Float64bits(p.opts.FPRate) ||
		o.Window != p.opts.Window || o.otherSizing != p.opts.otherSizing || m != p.m || uint64(k) != uint64(p.k) {
		return dh, fmt.Errorf("apply delta: %w: delta of %+v (m=%d k=%d), pair of %+v (m=%d k=%d)", ErrDeltaMismatch, o, m, k, p.opts, p.m, p.k)
	}
	if from := u64(48); from != p.rotations {
		return dh, fmt.Errorf("apply delta: %w: delta applies to the state after %d rotations, the pair is at %d", ErrDeltaMismatch, from, p.rotations)
	}
	if seq := binary.LittleEndian.Uint32(h[44:]); seq != p.deltaSeq {
		return dh, fmt.Errorf("apply delta: %w: delta %d of its chain, the pair expects delta %d", ErrDeltaMismatch, seq, p.deltaSeq)
	}
	if h[7]&^1 != 0 {
		return dh, deltaInvalid("delta flags", 7, "unknown flags %#x", h[7])
	}
	dh.started, dh.swaps, dh.start, dh.rotations = h[7]&1 != 0, u64(56), int64(u64(64)), u64(72)
	switch {
	case dh.started && (dh.start < minNanos || dh.start > maxNanos || dh.start%p.window != 0):
		return dh, deltaInvalid("delta window start", 64, "%d is not a window boundary of %v", dh.start, p.opts.Window)
	case !dh.started && (dh.start != 0 || dh.rotations != 0):
		return dh, deltaInvalid("delta window start", 64, "window start %d and %d rotations before the first record", dh.start, dh.rotations)
	}
	genWords := p.genWords()
	for g := range 2 {
		off := 80 + 16*g
		dh.counts[g] = [2]uint64{u64(off), u64(off + 8)}
		if !countsValid(p.opts.Mode, p.m, dh.counts[g][0], dh.counts[g][1]) {
			return dh, deltaInvalid([2]string{"delta current counts", "delta previous counts"}[g], int64(off), "counts %d, %d", dh.counts[g][0], dh.counts[g][1])
		}
		if dh.words[g] = u64(136 + 8*g); dh.words[g] > genWords {
			return dh, deltaInvalid("delta word count", int64(136+8*g), "%d words in a generation of %d", dh.words[g], genWords)
		}
		if p.fp != nil {
			dh.stashed[g] = dh.counts[g][1]
			dh.stashBytes += stashEntry * dh.stashed[g]
		}
	}
	dh.refused, dh.early, dh.forgotten = u64(112), u64(120), u64(128)
	if p.fp == nil && dh.refused|dh.early|dh.forgotten != 0 {
		return dh, deltaInvalid("delta overflow counts", 112, "non-zero outside fingerprint mode")
	}
	dh.body = u64(152)
	w := dh.words[0] + dh.words[1] // at most 2·genWords: no overflow below
	if lo, hi := w*minDeltaWord+dh.stashBytes+4, w*maxDeltaWord+dh.stashBytes+4; dh.body < lo || dh.body > hi {
		return dh, deltaInvalid("delta body length", 152, "%d bytes for %d words and %d stash bytes", dh.body, w, dh.stashBytes)
	}
	return dh, nil
}

// deltaCursor walks a delta body.
type deltaCursor struct {
	b   []byte
	off int // offset in b
}

// next decodes the next (index, value) of a generation whose previous index
// was next-1; ok is false if the body ends or the index is out of range.
func (c *deltaCursor) next(from, limit uint64) (i, v uint64, ok bool) {
	gap, n := binary.Uvarint(c.b[c.off:])
	if n <= 0 || gap >= limit-from || len(c.b)-c.off-n < 8 {
		return 0, 0, false
	}
	v = binary.LittleEndian.Uint64(c.b[c.off+n:])
	c.off += n + 8
	return from + gap, v, true
}

// checkDeltaBody checks every word and stash entry of body (the checksum
// excluded) without changing p; in Counting mode it also checks that the
// header's counts are what the words make of p's counts.
func (p *Pair) checkDeltaBody(dh *deltaHeader, body []byte) error {
	cur := deltaCursor{b: body}
	genWords := p.genWords()
	for g := range 2 {
		what := [2]string{"delta current generation", "delta previous generation"}[g]
		// Counting: the counts the generation has after the swaps, before the words.
		var nz, sat uint64
		src := -1 // logical generation of p the generation holds after the swaps, or -1: cleared
		switch {
		case dh.swaps == 0:
			src = g
		case dh.swaps == 1 && g == 1:
			src = 0
		}
		if c := p.cnt; c != nil && src >= 0 {
			nz, sat = c.nonzero[c.cur^src], c.saturated[c.cur^src]
		}
		next := uint64(0)
		for range dh.words[g] {
			off := int64(deltaHeaderSize + cur.off)
			i, v, ok := cur.next(next, genWords)
			if !ok {
				return deltaInvalid(what, off, "word entry past the generation or the body")
			}
			next = i + 1
			if i == genWords-1 {
				if problem := p.gens.lastWordProblem(v); problem != "" {
					return deltaInvalid(what, off, "%s", problem)
				}
			}
			if p.cnt != nil {
				var old uint64
				if src >= 0 {
					old = p.gens.word(src, i)
				}
				nz += uint64(bits.OnesCount64(nonzero8(v)&nibbles8)) - uint64(bits.OnesCount64(nonzero8(old)&nibbles8))
				sat += uint64(bits.OnesCount64(full8(v)&nibbles8)) - uint64(bits.OnesCount64(full8(old)&nibbles8))
			}
		}
		if p.cnt != nil && (nz != dh.counts[g][0] || sat != dh.counts[g][1]) {
			return deltaInvalid(what, int64(80+16*g), "header says %d non-zero, %d saturated; the words make %d, %d",
				dh.counts[g][0], dh.counts[g][1], nz, sat)
		}
	}
	if c := p.fp; c != nil {
		for g := range 2 {
			what := [2]string{"delta current stash", "delta previous stash"}[g]
			var last stashKey
			for j := range dh.stashed[g] {
				off := int64(deltaHeaderSize + cur.off)
				if len(body)-cur.off < stashEntry {
					return deltaInvalid(what, off, "stash entries past the body")
				}
				k := stashKey{bucket: binary.LittleEndian.Uint64(body[cur.off:]), fp: binary.LittleEndian.Uint64(body[cur.off+8:])}
				cur.off += stashEntry
				switch {
				case !c.stashEntryValid(k):
					return deltaInvalid(what, off, "entry (bucket %d, fingerprint %#x) cannot be stashed", k.bucket, k.fp)
				case j > 0 && compareStashKeys(k, last) < 0:
					return deltaInvalid(what, off, "entries out of order")
				}
				last = k
			}
		}
	}
	if cur.off != len(body) {
		return deltaInvalid("delta body", int64(deltaHeaderSize+cur.off), "%d bytes after the last entry", len(body)-cur.off)
	}
	return nil
}

// applyDeltaBody changes p as a checked delta says.
func (p *Pair) applyDeltaBody(dh *deltaHeader, body []byte) {
	switch {
	case dh.swaps == 1:
		p.rotate()
	case dh.swaps >= 2:
		p.clearBoth()
	}
	cur := deltaCursor{b: body}
	genWords := p.genWords()
	for g := range 2 {
		next := uint64(0)
		for range dh.words[g] {
			i, v, _ := cur.next(next, genWords)
			p.gens.setWord(g, i, v)
			next = i + 1
		}
	}
	if c := p.fp; c != nil {
		c.flush()
	}
	p.start, p.started, p.rotations = dh.start, dh.started, dh.rotations
	p.gens.setCounts([2]uint64{dh.counts[0][0], dh.counts[1][0]}, [2]uint64{dh.counts[0][1], dh.counts[1][1]})
	if c := p.fp; c != nil {
		c.refused, c.early, c.forgotten = dh.refused, dh.early, dh.forgotten
		for g := range 2 {
			pg := c.cur ^ g
			clear(c.stash[pg])
			for range dh.stashed[g] {
				k := stashKey{bucket: binary.LittleEndian.Uint64(body[cur.off:]), fp: binary.LittleEndian.Uint64(body[cur.off+8:])}
				cur.off += stashEntry
				c.stash[pg][k]++
			}
		}
	}
	seq := p.deltaSeq
	p.ResetDelta()
	p.deltaSeq = seq + 1 // the next delta of the chain
}
