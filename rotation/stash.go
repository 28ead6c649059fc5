package rotation

import (
	"cmp"
	"encoding/binary"
	"slices"
)

// appendStashes appends the fingerprint section of a snapshot to b: the
// cumulative overflow counts, then the current and the previous stash (see
// appendStash).
func (c *fingerprint) appendStashes(b []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, c.refused)
	b = binary.LittleEndian.AppendUint64(b, c.early)
	b = binary.LittleEndian.AppendUint64(b, c.forgotten)
	for _, g := range [2]int{c.cur, 1 - c.cur} {
		b, _ = c.appendStash(b, g, nil)
	}
	return b
}

// appendStash appends the stash of generation g to b: each entry, its lower
// bucket and fingerprint (2×8 bytes), as many times as it is held, in
// ascending order so that equal pairs encode to equal bytes. keys is
// scratch space, returned for reuse.
func (c *fingerprint) appendStash(b []byte, g int, keys []stashKey) ([]byte, []stashKey) {
	keys = keys[:0]
	for k := range c.stash[g] {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareStashKeys)
	for _, k := range keys {
		for range c.stash[g][k] {
			b = binary.LittleEndian.AppendUint64(b, k.bucket)
			b = binary.LittleEndian.AppendUint64(b, k.fp)
		}
	}
	return b, keys
}

func compareStashKeys(x, y stashKey) int {
	return cmp.Or(cmp.Compare(x.bucket, y.bucket), cmp.Compare(x.fp, y.fp))
}

// stashEntryValid reports whether (bucket, fp) can be a stash entry of c.
func (c *fingerprint) stashEntryValid(k stashKey) bool {
	return k.bucket < c.buckets && k.fp != 0 && k.fp <= c.mask && k.bucket <= c.alt(k.bucket, k.fp)
}

// readStashes reads what appendStashes wrote into c, a freshly decoded pair
// whose generation 0 is current and whose stash sizes come from the header
// (bounded by stashCapacity, so they bound what this reads).
func (s *snapReader) readStashes(c *fingerprint) error {
	var b [24]byte
	if err := s.read(b[:], "overflow counts"); err != nil {
		return err
	}
	c.refused = binary.LittleEndian.Uint64(b[0:])
	c.early = binary.LittleEndian.Uint64(b[8:])
	c.forgotten = binary.LittleEndian.Uint64(b[16:])
	for g := range 2 {
		what := [2]string{"current stash", "previous stash"}[g]
		var last stashKey
		for i := range c.stashed[g] {
			off := s.n
			if err := s.read(b[:16], what); err != nil {
				return err
			}
			k := stashKey{bucket: binary.LittleEndian.Uint64(b[0:]), fp: binary.LittleEndian.Uint64(b[8:])}
			switch {
			case !c.stashEntryValid(k):
				return invalid(what, off, "entry (bucket %d, fingerprint %#x) cannot be stashed", k.bucket, k.fp)
			case i > 0 && compareStashKeys(k, last) < 0:
				return invalid(what, off, "entries out of order")
			}
			c.stash[g][k]++
			last = k
		}
	}
	return nil
}
