package checkpoint

import (
	"bytes"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"

	"dedup/internal/testkit"
	"dedup/offsets"
)

// TestKafkaProbeNotTakenForSnapshot: probe records (what `dedup check`
// writes and tombstones) leave restore, List and later Saves as they were:
// a store restoring after probes, in the same process or a new one, loads
// the snapshots saved before them, and a partition without snapshots still
// has none. The probes are in the topic, each followed by its tombstone.
func TestKafkaProbeNotTakenForSnapshot(t *testing.T) {
	brokers := newCluster(t)
	ctx := testContext(t)
	s := newKafkaStore(t, brokers, KafkaOptions{Partitions: 2, ChunkBytes: 4 << 10})

	// A probe into the empty topic, then snapshots, then probes again.
	if n, err := s.Probe(ctx); err != nil || n != 2 {
		t.Fatalf("probe an empty store: %d partitions, %v", n, err)
	}
	st0, st1 := newState(1, 20<<10), newState(2, 20<<10)
	m0 := mustSave(t, s, testMeta("in", 0, 100), st0)
	m1 := mustSave(t, s, testMeta("in", 1, 200), st1)
	for range 2 {
		if _, err := s.Probe(ctx); err != nil {
			t.Fatalf("probe: %v", err)
		}
	}

	restored := newKafkaStore(t, brokers, KafkaOptions{Partitions: 2})
	for _, store := range []*KafkaStore{s, restored} {
		for _, want := range []struct {
			m  Meta
			st state
		}{{m0, st0}, {m1, st1}} {
			var got []byte
			var meta Meta
			loaded, src, err := store.Load(ctx, "in", want.m.Partition, collect(&got, &meta))
			if err != nil || src != SourceLatest || loaded.Seq != want.m.Seq || !bytes.Equal(got, want.st) {
				t.Fatalf("load partition %d after probes: seq %d from %q, %v; want seq %d and the saved state",
					want.m.Partition, loaded.Seq, src, err, want.m.Seq)
			}
		}
		if _, _, err := store.Load(ctx, "in", 2, collect(new([]byte), new(Meta))); !errors.Is(err, ErrNotFound) {
			t.Errorf("load of a partition never saved: %v, want ErrNotFound", err)
		}
		entries, err := store.List(ctx)
		if err != nil || len(entries) != 2 {
			t.Fatalf("list after probes: %d entries, %v; want the 2 snapshots", len(entries), err)
		}
		for _, e := range entries {
			if e.Err != nil || strings.Contains(e.Where, probeSegment) {
				t.Errorf("listed %s: %v", e.Where, e.Err)
			}
		}
	}
	// Saves after probes number on and keep loading.
	m2 := mustSave(t, restored, testMeta("in", 0, 300), st1)
	if m2.Seq <= m0.Seq {
		t.Errorf("save after probes: seq %d, want above %d", m2.Seq, m0.Seq)
	}

	// Each probe is in its partition: written, then tombstoned.
	c := testkit.KafkaClient(t, brokers...)
	for cp := range 2 {
		offs, err := offsets.List(ctx, c, s.topic, []int{cp})
		if err != nil {
			t.Fatal(err)
		}
		written, tombstoned := map[string]bool{}, map[string]bool{}
		err = readRange(ctx, c, s.topic, cp, offs[cp].First, offs[cp].End, 0, func(rec *kafka.Record) error {
			k, err := kafka.ReadAll(rec.Key)
			if err != nil || !strings.HasPrefix(string(k), "g/"+probeSegment+"/") {
				return err
			}
			if rec.Value == nil {
				if !written[string(k)] {
					t.Errorf("partition %d: tombstone of %s before its probe", cp, k)
				}
				tombstoned[string(k)] = true
			} else {
				written[string(k)] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(written) != 3 || len(tombstoned) != 3 {
			t.Errorf("partition %d: %d probes written, %d tombstoned; want 3 and 3", cp, len(written), len(tombstoned))
		}
	}
}

// TestKafkaProbeKeyNeverParses: no group's store parses a probe key of any
// group as a snapshot record, whatever the group and nonce.
func TestKafkaProbeKeyNeverParses(t *testing.T) {
	groups := []string{"g", "dedup", "a/b", "!probe", "in", "0", "g/!probe/0/m"}
	stores := make([]*KafkaStore, len(groups))
	for i, g := range groups {
		stores[i] = &KafkaStore{prefix: url.PathEscape(g) + "/"}
	}
	for _, writer := range stores {
		for _, nonce := range []string{"0", "00000000000000000001", "deadbeef", "m/1", "c/1/x/000000"} {
			key := writer.probeKey(nonce)
			for _, reader := range stores {
				if k, ok := reader.parseKey(key); ok {
					t.Errorf("store of prefix %q parses probe key %q as %+v", reader.prefix, key, k)
				}
			}
		}
	}
}
