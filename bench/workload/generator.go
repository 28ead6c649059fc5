package workload

import (
	"encoding/binary"
	"math/rand/v2"
)

// Record is one generated input record. Key and Value are reused by the next
// call to Generator.Next: copy them to keep them.
type Record struct {
	Index     uint64 // position in the input, 0-based
	KeyID     uint64 // which distinct key, 0-based, in order of first occurrence
	First     bool   // the first occurrence of its key
	Partition int
	Key       []byte
	Value     []byte
}

// Generator produces a Workload's records deterministically: the same
// Workload yields the same records in the same order. Exactly Keys distinct
// keys occur among Records records; a record repeats an earlier key with
// probability chosen so that the remaining new keys are spread uniformly over
// the remaining records, and a repeat picks uniformly among the keys already
// seen.
//
// Not safe for concurrent use.
type Generator struct {
	w       Workload
	rng     *rand.Rand
	next    uint64 // index of the next record
	emitted uint64 // distinct keys emitted so far
	rec     Record
}

// NewGenerator returns a generator at the first record of w, which must be
// valid.
func NewGenerator(w Workload) *Generator {
	w = w.Resolved()
	g := &Generator{
		w:   w,
		rng: rand.New(rand.NewPCG(w.Seed, 0x6465647570)),
	}
	g.rec.Key = make([]byte, w.KeySize)
	g.rec.Value = make([]byte, w.ValueSize)
	fillPattern(g.rec.Key[:w.KeySize-16], 'k')
	return g
}

// Next returns the next record, or nil after the last one.
func (g *Generator) Next() *Record {
	if g.next >= g.w.Records {
		return nil
	}
	remaining := g.w.Records - g.next
	newLeft := g.w.Keys - g.emitted
	r := &g.rec
	r.Index = g.next
	r.First = g.emitted == 0 || newLeft == remaining || (newLeft > 0 && g.rng.Uint64N(remaining) < newLeft)
	if r.First {
		r.KeyID = g.emitted
		g.emitted++
	} else {
		r.KeyID = g.rng.Uint64N(g.emitted)
	}
	r.Partition = int(r.KeyID % uint64(g.w.Partitions))
	putKeyID(r.Key[len(r.Key)-16:], r.KeyID)
	binary.BigEndian.PutUint64(r.Value, r.Index)
	fillPattern(r.Value[8:], byte(r.Index))
	g.next++
	return r
}

// Emitted is how many distinct keys the records so far carried: the keys
// KeyBytes(w, 0) .. KeyBytes(w, Emitted()-1).
func (g *Generator) Emitted() uint64 { return g.emitted }

// KeyBytes returns the key of distinct key id for workload w.
func KeyBytes(w Workload, id uint64) []byte {
	k := make([]byte, w.KeySize)
	fillPattern(k[:w.KeySize-16], 'k')
	putKeyID(k[w.KeySize-16:], id)
	return k
}

// RecordIndex recovers the input index a value was generated with.
func RecordIndex(value []byte) (uint64, bool) {
	if len(value) < MinValueSize {
		return 0, false
	}
	return binary.BigEndian.Uint64(value), true
}

const hexDigits = "0123456789abcdef"

// putKeyID writes a bijective scramble of id as 16 hex digits, so that keys
// look random rather than sequential.
func putKeyID(dst []byte, id uint64) {
	x := id*0x9e3779b97f4a7c15 + 0x2545f4914f6cdd1d
	for i := 15; i >= 0; i-- {
		dst[i] = hexDigits[x&0xf]
		x >>= 4
	}
}

func fillPattern(dst []byte, seed byte) {
	for i := range dst {
		dst[i] = 'a' + (seed+byte(i))%26
	}
}
