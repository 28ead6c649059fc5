package processor

import (
	"context"
	"errors"
	"maps"
	"testing"

	"github.com/segmentio/kafka-go"
)

func TestCommitMetadataRoundTrip(t *testing.T) {
	for _, ends := range []map[int]int64{
		{0: 0},
		{0: 12345, 1: 1<<40 + 7, 7: 3},
		func() map[int]int64 {
			m := map[int]int64{}
			for p := range 300 {
				m[p] = int64(p) * 1_000_003
			}
			return m
		}(),
	} {
		s := commitMetadata(ends)
		got, err := parseCommitMetadata(s)
		if err != nil || !maps.Equal(got, ends) {
			t.Errorf("%q: parsed %v, %v; want %v", s, got, err, ends)
		}
	}
	if s := commitMetadata(nil); s != "" {
		t.Errorf("no ends: %q, want empty", s)
	}
	for _, bad := range []string{"", "x", "e1:", "e1:1", "e1:1.", "e1:.1", "e1:1.-2", "e1:1.2,1.3", "e1:zzzzzzzzz.1", "e2:1.2"} {
		if _, err := parseCommitMetadata(bad); !errors.Is(err, errCommitMetadata) {
			t.Errorf("%q: %v, want errCommitMetadata", bad, err)
		}
	}
}

// TestCommitMetadataTooLarge: output ends that do not fit Kafka's default
// offset.metadata.max.bytes are left out of the commit (logged), and the
// commit itself succeeds; ends that fit are read back.
func TestCommitMetadataTooLarge(t *testing.T) {
	e := newTestEnv(t, 1, 1)
	p := mustNew(t, e.options("meta"))
	g := &generation{gen: &kafka.Generation{GroupID: "meta", ID: -1}}
	ctx := context.Background()
	big := map[int]int64{}
	for part := range 2000 {
		big[part] = 1 << 40
	}
	if len(commitMetadata(big)) <= maxCommitMetadata {
		t.Fatal("the test's ends fit: it would prove nothing")
	}
	if err := p.commit(ctx, g, inTopic, 0, 42, big); err != nil {
		t.Fatalf("commit with too many ends: %v", err)
	}
	off, ends, err := p.committed(ctx, inTopic, 0)
	if err != nil || off != 42 || ends != nil {
		t.Errorf("committed %d %v %v, want 42 without ends", off, ends, err)
	}
	if !p.metadataWarned.Load() {
		t.Error("commit without its ends was not reported")
	}
	small := map[int]int64{0: 7, 3: 9}
	if err := p.commit(ctx, g, inTopic, 0, 43, small); err != nil {
		t.Fatal(err)
	}
	off, ends, err = p.committed(ctx, inTopic, 0)
	if err != nil || off != 43 || !maps.Equal(ends, small) {
		t.Errorf("committed %d %v %v, want 43 with %v", off, ends, err, small)
	}
}
