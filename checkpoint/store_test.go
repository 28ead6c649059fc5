package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// state is a snapshot payload: half random, half repetitive, so it both
// compresses and has enough entropy to catch misplaced bytes.
type state []byte

func (s state) WriteTo(w io.Writer) (int64, error) { return bytes.NewReader(s).WriteTo(w) }

func newState(seed uint64, n int) state {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		if i < n/2 {
			b[i] = byte(r.Uint32())
		} else {
			b[i] = byte(i / 4096)
		}
	}
	return b
}

// collect returns a decode func that stores what it was given.
func collect(got *[]byte, meta *Meta) func(Meta, io.Reader) error {
	return func(m Meta, r io.Reader) error {
		b, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		*got, *meta = b, m
		return nil
	}
}

func testMeta(topic string, partition int, offset int64) Meta {
	return Meta{
		Group: "g", Topic: topic, Partition: partition, Offset: offset,
		OutputTopic: "out", OutputEnds: map[int]int64{0: offset * 2, 1: offset*2 + 1},
		Created: time.Unix(1700000000, 0).UTC(),
	}
}

func mustSave(t *testing.T, s Store, m Meta, st state) Meta {
	t.Helper()
	saved, err := s.Save(context.Background(), m, st)
	if err != nil {
		t.Fatalf("save %s/%d offset %d: %v", m.Topic, m.Partition, m.Offset, err)
	}
	return saved
}

// checkRoundTrip saves two snapshots and loads the newest back.
func checkRoundTrip(t *testing.T, s Store, size int) {
	t.Helper()
	ctx := context.Background()
	st1, st2 := newState(1, size), newState(2, size)
	m1 := mustSave(t, s, testMeta("in", 3, 100), st1)
	m2 := mustSave(t, s, testMeta("in", 3, 200), st2)
	if m2.Seq <= m1.Seq {
		t.Fatalf("seq not increasing: %d then %d", m1.Seq, m2.Seq)
	}
	if m2.RawBytes != int64(size) {
		t.Errorf("RawBytes = %d, want %d", m2.RawBytes, size)
	}
	if m2.StoredBytes <= 0 || m2.StoredBytes >= m2.RawBytes {
		t.Errorf("StoredBytes = %d for %d raw bytes: not compressed", m2.StoredBytes, m2.RawBytes)
	}
	var got []byte
	var meta Meta
	loaded, src, err := s.Load(ctx, "in", 3, collect(&got, &meta))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if src != SourceLatest {
		t.Errorf("source = %q, want %q", src, SourceLatest)
	}
	if !bytes.Equal(got, st2) {
		t.Fatalf("loaded state differs from the newest saved (%d vs %d bytes)", len(got), len(st2))
	}
	if loaded.Seq != m2.Seq || loaded.Offset != 200 || loaded.OutputEnds[1] != 401 || loaded.Checksum != m2.Checksum ||
		loaded.StoredBytes != m2.StoredBytes || !loaded.Created.Equal(m2.Created) || loaded.Group != "g" || loaded.OutputTopic != "out" {
		t.Errorf("loaded meta %+v, saved %+v", loaded, m2)
	}
	if meta.Seq != loaded.Seq {
		t.Errorf("decode saw seq %d, Load returned %d", meta.Seq, loaded.Seq)
	}
	if _, _, err := s.Load(ctx, "in", 4, collect(&got, &meta)); !errors.Is(err, ErrNotFound) {
		t.Errorf("load of a partition without snapshots: %v, want ErrNotFound", err)
	}
}

// checkKeep saves more than keep snapshots and expects only the newest keep listed.
func checkKeep(t *testing.T, s Store, keep int) {
	t.Helper()
	var last Meta
	for i := range keep + 3 {
		last = mustSave(t, s, testMeta("keep", 0, int64(i)), newState(uint64(i), 1000))
	}
	mustSave(t, s, testMeta("other", 0, 1), newState(99, 1000))
	entries, err := s.List(context.Background())
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	var seqs []uint64
	for _, e := range entries {
		if e.Meta.Topic != "keep" {
			continue
		}
		if e.Err != nil {
			t.Errorf("entry %d: %v", e.Meta.Seq, e.Err)
		}
		seqs = append(seqs, e.Meta.Seq)
	}
	want := make([]uint64, keep)
	for i := range want {
		want[i] = last.Seq - uint64(i)
	}
	if fmt.Sprint(seqs) != fmt.Sprint(want) {
		t.Errorf("listed seqs %v, want %v (newest %d first)", seqs, want, keep)
	}
}

// saveSpans records, on a logical clock, when each Save began and ended and
// the seq it got. Safe for concurrent use.
type saveSpans struct {
	mu    sync.Mutex
	clock int64
	spans []saveSpan
}

type saveSpan struct {
	seq        uint64
	st         state
	start, end int64
}

func (l *saveSpans) tick() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clock++
	return l.clock
}

// save saves st with s and records the Save's span.
func (l *saveSpans) save(ctx context.Context, s Store, m Meta, st state) error {
	start := l.tick()
	saved, err := s.Save(ctx, m, st)
	if err != nil {
		return err
	}
	end := l.tick()
	l.mu.Lock()
	l.spans = append(l.spans, saveSpan{saved.Seq, st, start, end})
	l.mu.Unlock()
	return nil
}

// checkOrdered fails t when a Save that ended before another began got a
// seq not below the other's.
func (l *saveSpans) checkOrdered(t *testing.T) {
	t.Helper()
	for _, a := range l.spans {
		for _, b := range l.spans {
			if a.end < b.start && a.seq >= b.seq {
				t.Fatalf("save ending at %d got seq %d, a later save (began %d) got %d", a.end, a.seq, b.start, b.seq)
			}
		}
	}
}
