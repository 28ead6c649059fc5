package explain

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"dedup/checkpoint"
	"dedup/processor/partition"
	"dedup/rotation"
)

// Reader is what explain needs of a checkpoint store: its listing and the
// state behind each entry. Both stores have it; neither call writes.
type Reader interface {
	List(ctx context.Context) ([]checkpoint.Entry, error)
	Open(ctx context.Context, e checkpoint.Entry) (io.ReadCloser, error)
}

var (
	_ Reader = (*checkpoint.FileStore)(nil)
	_ Reader = (*checkpoint.KafkaStore)(nil)
)

// Options say which checkpointed filters to ask.
type Options struct {
	Group string
	Topic string // whose partitions hold the filters: INPUT_TOPIC, or REPARTITION_TOPIC
	// Partitions is Topic's partition count; 0 when it could not be read:
	// then the partitions the store holds are answered.
	Partitions int
	// Partition asks one partition only; negative: every one.
	Partition int
	// Repartitioned: Topic is filled by hop 1 by the dedup key, so one
	// partition alone is where a key lives (MarkKeyPartition).
	Repartitioned bool
	// Filter is the configured filter options: a checkpoint built with
	// others is noted (the stage keeps it read-only beside new filters).
	Filter rotation.Options
	Now    time.Time
}

// Result is Explain's answer.
type Result struct {
	Answers []Answer
	// Partitions is the partition count the answers span (Options', or
	// when unknown the highest partition found plus one); KeyPartition is
	// the partition hop 1 routes the key to with REPARTITION_TOPIC, -1
	// without it or when the count is not known.
	Partitions   int
	KeyPartition int
}

// Explain answers, for every partition of o.Topic (or o.Partition), what
// its newest intact checkpoint says of dedup key k. It only reads the
// store.
func Explain(ctx context.Context, r Reader, o Options, k []byte) (Result, error) {
	f, err := Load(ctx, r, o)
	if err != nil {
		return Result{}, err
	}
	return f.Ask(k), nil
}

// Filters are the checkpointed filters of a topic's partitions, restored
// read-only, to ask about any number of keys.
type Filters struct {
	o          Options
	partitions int
	routed     bool // the key's partition can be named
	parts      []partFilters
}

// partFilters is one partition's restored state.
type partFilters struct {
	part int
	c    chain // c.snap.Pair nil: nothing intact
	none bool  // no checkpoint at all
}

// Load restores, for every partition of o.Topic (or o.Partition), its
// newest intact checkpoint chain, reading the store only.
func Load(ctx context.Context, r Reader, o Options) (*Filters, error) {
	entries, err := r.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	byPart := map[int][]checkpoint.Entry{}
	partitions := o.Partitions
	repartitions := 0 // hop 2's input count, as its snapshots recorded it
	for _, e := range entries {
		m := e.Meta
		if m.Topic != o.Topic || (m.Group != "" && m.Group != o.Group) {
			continue
		}
		byPart[m.Partition] = append(byPart[m.Partition], e)
		repartitions = max(repartitions, m.InputPartitions)
		if o.Partitions == 0 {
			partitions = max(partitions, m.Partition+1)
		}
	}
	if o.Partitions == 0 && o.Repartitioned {
		// Snapshots name the count they were routed with: counts only grow.
		partitions = max(partitions, repartitions)
	}
	f := &Filters{o: o, partitions: partitions, routed: o.Repartitioned && (o.Partitions > 0 || repartitions > 0)}
	for p := range partitions {
		if o.Partition >= 0 && p != o.Partition {
			continue
		}
		pf := partFilters{part: p, none: len(byPart[p]) == 0}
		if !pf.none {
			if pf.c, err = restore(ctx, r, byPart[p]); err != nil {
				return nil, err
			}
		}
		f.parts = append(f.parts, pf)
	}
	return f, nil
}

// Ask is what every restored partition says of dedup key k.
func (f *Filters) Ask(k []byte) Result {
	res := Result{Partitions: f.partitions, KeyPartition: -1}
	for _, pf := range f.parts {
		a := f.ask(pf, k)
		a.Topic, a.Partition = f.o.Topic, pf.part
		res.Answers = append(res.Answers, a)
	}
	if f.routed {
		res.KeyPartition = MarkKeyPartition(res.Answers, k, f.partitions)
	}
	return res
}

func (f *Filters) ask(pf partFilters, k []byte) Answer {
	c := pf.c
	switch {
	case pf.none:
		return Answer{Generation: "none", Windows: []Window{}, Note: "no checkpoint: the stage holds no filters of it"}
	case c.snap.Pair == nil:
		return Answer{Generation: "none", Windows: []Window{}, Note: "no intact checkpoint: " + c.note}
	}
	a := NewAnswer(f.o.Topic, pf.part, c.snap.Ask(k))
	head := c.head
	a.Checkpoint = &Checkpoint{Offset: head.Offset, Seq: head.Seq, Base: c.base, Increments: c.increments,
		Created: head.Created.UTC(), AgeSeconds: f.o.Now.Sub(head.Created).Seconds()}
	a.Note = c.note
	if got := c.snap.Pair.Options(); f.o.Filter != (rotation.Options{}) && got != f.o.Filter {
		a.Note = join(a.Note, fmt.Sprintf("built with other filter options (%s, %s window, %d keys, fp %g): "+
			"the stage keeps them read-only beside new filters", got.Mode, got.Window, got.ExpectedKeys, got.FPRate))
	}
	return a
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// chain is a partition's state as restored from its checkpoints.
type chain struct {
	snap       partition.Snapshot // Pair nil: nothing intact
	head       checkpoint.Meta
	base       uint64
	increments int
	note       string // what the restore passed over
}

// restore restores, read-only, what a partition's Load would: the newest
// intact base by (epoch, generation, seq), with its increments applied
// along the chain (the lowest seq following the piece before), up to the
// first that is damaged, refused or out of the chain.
func restore(ctx context.Context, r Reader, entries []checkpoint.Entry) (chain, error) {
	var bases []checkpoint.Entry
	incs := map[uint64][]checkpoint.Entry{}
	for _, e := range entries {
		if e.Meta.Increment() {
			incs[e.Meta.Base] = append(incs[e.Meta.Base], e)
			continue
		}
		bases = append(bases, e)
	}
	slices.SortStableFunc(bases, func(a, b checkpoint.Entry) int {
		return cmp.Or(cmp.Compare(b.Meta.Epoch, a.Meta.Epoch), cmp.Compare(b.Meta.Generation, a.Meta.Generation),
			cmp.Compare(b.Meta.Seq, a.Meta.Seq))
	})
	var c chain
	for _, b := range bases {
		if b.Damaged || b.Err != nil {
			c.note = join(c.note, fmt.Sprintf("base seq %d passed over (%s)", b.Meta.Seq, why(b)))
			continue
		}
		snap, err := decode(ctx, r, b)
		if err != nil {
			if ctx.Err() != nil || errors.As(err, new(*checkpoint.ReadError)) {
				// The store could not be read, which says nothing of
				// the snapshot: an error, not a fallback.
				return chain{}, fmt.Errorf("read checkpoint seq %d: %w", b.Meta.Seq, err)
			}
			c.note = join(c.note, fmt.Sprintf("base seq %d passed over (%v)", b.Meta.Seq, err))
			continue
		}
		c.snap, c.head, c.base = snap, b.Meta, b.Meta.Seq
		if err := c.apply(ctx, r, incs[b.Meta.Seq]); err != nil {
			return chain{}, err
		}
		return c, nil
	}
	return c, nil
}

// apply applies a base's increments in chain order; it fails only when
// the store cannot be read.
func (c *chain) apply(ctx context.Context, r Reader, incs []checkpoint.Entry) error {
	slices.SortStableFunc(incs, func(a, b checkpoint.Entry) int { return cmp.Compare(a.Meta.Seq, b.Meta.Seq) })
	onPath := map[uint64]bool{c.base: true}
	for _, e := range incs {
		m := e.Meta
		switch {
		case onPath[m.Seq] || (m.Prev != c.head.Seq && onPath[m.Prev]):
			continue // a copy found twice, or a fork that lost its place
		case e.Damaged || e.Err != nil:
			c.note = join(c.note, fmt.Sprintf("chain cut at increment seq %d (%s)", m.Seq, why(e)))
			return nil
		case m.Prev != c.head.Seq || c.snap.Legacy != nil:
			c.note = join(c.note, fmt.Sprintf("chain cut at increment seq %d (it follows seq %d)", m.Seq, m.Prev))
			return nil
		}
		if err := applyEntry(ctx, r, e, c.snap.Pair); err != nil {
			if ctx.Err() != nil || errors.As(err, new(*checkpoint.ReadError)) {
				return fmt.Errorf("read checkpoint seq %d: %w", m.Seq, err)
			}
			// ApplyDelta verifies an increment whole before applying it:
			// the pair stays as the pieces before made it, as in a restore.
			c.note = join(c.note, fmt.Sprintf("chain cut at increment seq %d (%v)", m.Seq, err))
			return nil
		}
		onPath[m.Seq] = true
		c.head = m
		c.increments++
	}
	return nil
}

func why(e checkpoint.Entry) string {
	switch {
	case e.Damaged && e.Err != nil:
		return "damaged, kept aside: " + e.Err.Error()
	case e.Damaged:
		return "damaged, kept aside"
	}
	return e.Err.Error()
}

func decode(ctx context.Context, r Reader, e checkpoint.Entry) (partition.Snapshot, error) {
	rc, err := r.Open(ctx, e)
	if err != nil {
		return partition.Snapshot{}, fmt.Errorf("open checkpoint: %w", err)
	}
	defer rc.Close()
	s, err := partition.ReadSnapshot(rc)
	if err != nil {
		return partition.Snapshot{}, fmt.Errorf("decode filter state: %w", err)
	}
	return s, nil
}

func applyEntry(ctx context.Context, r Reader, e checkpoint.Entry, pair *rotation.Pair) error {
	rc, err := r.Open(ctx, e)
	if err != nil {
		return fmt.Errorf("open checkpoint: %w", err)
	}
	defer rc.Close()
	if err := partition.ApplyIncrement(pair, rc); err != nil {
		return fmt.Errorf("apply increment: %w", err)
	}
	return nil
}
