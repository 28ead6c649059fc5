package rotation

import (
	"cmp"
	"encoding/binary"
	"slices"
)

// appendStashes appends the fingerprint section of a snapshot to b: the
// cumulative overflow counts, then the current and the previous stash, each
// entry as many times as it is held, in ascending order so that equal pairs
// encode to equal bytes.
func (c *fingerprint) appendStashes(b []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, c.refused)
	b = binary.LittleEndian.AppendUint64(b, c.early)
	b = binary.LittleEndian.AppendUint64(b, c.forgotten)
	for _, g := range [2]int{c.cur, 1 - c.cur} {
		keys := make([]stashKey, 0, len(c.stash[g]))
		for k := range c.stash[g] {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(x, y stashKey) int {
			return cmp.Or(cmp.Compare(x.bucket, y.bucket), cmp.Compare(x.fp, y.fp))
		})
		for _, k := range keys {
			for range c.stash[g][k] {
				b = binary.LittleEndian.AppendUint64(b, k.bucket)
				b = binary.LittleEndian.AppendUint64(b, k.fp)
			}
		}
	}
	return b
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
			case k.bucket >= c.buckets || k.fp == 0 || k.fp > c.mask || k.bucket > c.alt(k.bucket, k.fp):
				return invalid(what, off, "entry (bucket %d, fingerprint %#x) cannot be stashed", k.bucket, k.fp)
			case i > 0 && cmp.Or(cmp.Compare(k.bucket, last.bucket), cmp.Compare(k.fp, last.fp)) < 0:
				return invalid(what, off, "entries out of order")
			}
			c.stash[g][k]++
			last = k
		}
	}
	return nil
}
