package checkpoint

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/internal/kfaketest"
	"dedup/internal/testkit"
)

func newCluster(t *testing.T, opts ...kfake.Opt) []string {
	t.Helper()
	c := testkit.NewCluster(t, append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	return c.ListenAddrs()
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newKafkaStore(t *testing.T, brokers []string, opts KafkaOptions) *KafkaStore {
	t.Helper()
	opts.Brokers = brokers
	if opts.Topic == "" {
		opts.Topic = "g-dedup-state"
	}
	if opts.Group == "" {
		opts.Group = "g"
	}
	s, err := NewKafkaStore(testContext(t), opts)
	if err != nil {
		t.Fatalf("new kafka store: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

// TestKafkaCreatesCompactedTopic: the store creates its topic with
// TopicSettings (read back from the broker), and a store on an existing
// topic takes the topic's delete.retention.ms.
func TestKafkaCreatesCompactedTopic(t *testing.T) {
	brokers := newCluster(t)
	s := newKafkaStore(t, brokers, KafkaOptions{Topic: "state", Partitions: 3})
	c := testkit.KafkaClient(t, brokers...)
	req := kafka.DescribeConfigRequestResource{ResourceType: kafka.ResourceTypeTopic, ResourceName: "state"}
	want := map[string]string{}
	for _, ts := range TopicSettings {
		req.ConfigNames = append(req.ConfigNames, ts.Name)
		want[ts.Name] = ts.Value
	}
	res, err := c.DescribeConfigs(testContext(t), &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{req}})
	if err != nil || len(res.Resources) != 1 {
		t.Fatalf("describe configs: %+v, %v", res, err)
	}
	got := map[string]string{}
	for _, e := range res.Resources[0].ConfigEntries {
		got[e.ConfigName] = e.ConfigValue
	}
	if !maps.Equal(got, want) {
		t.Errorf("topic created with %v, want %v", got, want)
	}
	if want := map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "3600000", "min.compaction.lag.ms": "600000", "segment.ms": "3600000"}; !maps.Equal(got, want) {
		t.Errorf("topic created with %v, docs/checkpoints.md says %v", got, want)
	}
	if s.tombstoneLife != TombstoneRetention {
		t.Errorf("store on the topic it created: tombstones last %v, want %v", s.tombstoneLife, TombstoneRetention)
	}
	parts, err := partitionIDs(testContext(t), c, "state")
	if err != nil || len(parts) != 3 {
		t.Errorf("partitions %v (%v), want 3", parts, err)
	}
	// A second store finds the topic and does not fail on it.
	newKafkaStore(t, brokers, KafkaOptions{Topic: "state", Partitions: 3})

	// A topic created with the broker's defaults keeps tombstones a day.
	if _, err := c.CreateTopics(testContext(t), &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: "defaults", NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}},
	}}}); err != nil {
		t.Fatal(err)
	}
	if s := newKafkaStore(t, brokers, KafkaOptions{Topic: "defaults"}); s.tombstoneLife != 24*time.Hour {
		t.Errorf("store on a topic with the broker's delete.retention.ms: tombstones last %v, want 24h", s.tombstoneLife)
	}
}

// TestKafkaStaleIndexReadAgain: an index that has not caught up for half
// the topic's delete.retention.ms is read again from the start. Compaction
// removed the pieces it had read, and their tombstones after them; read on
// from where it stopped, it would list pieces that are gone.
func TestKafkaStaleIndexReadAgain(t *testing.T) {
	cluster := testkit.NewCluster(t, kfake.NumBrokers(1))
	brokers := cluster.ListenAddrs()
	// kfake removes tombstones at the first compaction after
	// delete.retention.ms: 0 stands for "an hour later".
	if err := cluster.CreateTopic("g-dedup-state", 1, map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "0"}); err != nil {
		t.Fatal(err)
	}
	w := newKafkaStore(t, brokers, KafkaOptions{Keep: 2, ChunkBytes: 4 << 10})
	r := newKafkaStore(t, brokers, KafkaOptions{Keep: 2})
	r.tombstoneLife = time.Hour
	seqs := func(s *KafkaStore) string {
		t.Helper()
		entries, err := s.List(testContext(t))
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for _, e := range entries {
			out = append(out, e.Meta.Seq)
		}
		return fmt.Sprint(out)
	}
	for i := range 3 {
		mustSave(t, w, testMeta("in", 0, int64(i)), newState(uint64(i), 10_000))
	}
	if got := seqs(r); got != "[3 2]" {
		t.Fatalf("reader lists %s, want [3 2]", got)
	}
	for i := 3; i < 6; i++ {
		mustSave(t, w, testMeta("in", 0, int64(i)), newState(uint64(i), 10_000))
	}
	cluster.Compact()
	// The hazard, set up: 2 and 3 are gone with their tombstones, which
	// the reader never read; reading on from where it stopped (it caught
	// up just now, by its clock) it still holds them.
	if got := seqs(r); got != "[6 5 3 2]" {
		t.Fatalf("setup: reader reading on lists %s, want [6 5 3 2]: compaction did not remove 2 and 3 with their tombstones", got)
	}
	pi := r.index(0)
	pi.since = pi.since.Add(-r.tombstoneLife/2 - time.Second)
	pi.mu.Unlock()
	if got, fresh := seqs(r), seqs(newKafkaStore(t, brokers, KafkaOptions{Keep: 2})); got != fresh || got != "[6 5]" {
		t.Errorf("reader last caught up delete.retention.ms/2 ago lists %s, a new store %s; want [6 5]", got, fresh)
	}
}

func TestKafkaRoundTrip(t *testing.T) {
	checkRoundTrip(t, newKafkaStore(t, newCluster(t), KafkaOptions{ChunkBytes: 64 << 10}), 1<<20)
}

// describeIndex renders what a store knows of checkpoint partition 0.
func describeIndex(s *KafkaStore) string {
	pi := s.index(0)
	defer pi.mu.Unlock()
	var lines []string
	for _, ms := range pi.manifests {
		for _, loc := range ms {
			lines = append(lines, fmt.Sprintf("%s@%d %v %s %v", loc.key, loc.offset, loc.err, loc.m.Nonce, loc.m.Chunks))
		}
	}
	for key, c := range pi.chunks {
		lines = append(lines, fmt.Sprintf("%s@%d %+v", key, c.offset, *c))
	}
	slices.Sort(lines)
	return fmt.Sprintf("next %d\n%s", pi.next, strings.Join(lines, "\n"))
}

func TestKafkaKeepsLastN(t *testing.T) {
	brokers := newCluster(t)
	w := newKafkaStore(t, brokers, KafkaOptions{Keep: 2, ChunkBytes: 4 << 10})
	checkKeep(t, w, 2)
	// The writer learned its own records instead of reading them back, and
	// what it learned is what a reader of the topic finds.
	if pi := w.index(0); pi.read != 0 {
		pi.mu.Unlock()
		t.Errorf("writer read %d of its own records back", pi.read)
	} else {
		pi.mu.Unlock()
	}
	reader := newKafkaStore(t, brokers, KafkaOptions{})
	if _, err := reader.List(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if got, want := describeIndex(w), describeIndex(reader); got != want {
		t.Errorf("learned index:\n%s\nread index:\n%s", got, want)
	}
	// What a fresh instance reads from the topic agrees, chunks included:
	// only the kept snapshots' chunks are live (not tombstoned).
	s := newKafkaStore(t, brokers, KafkaOptions{Keep: 2})
	entries, err := s.List(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, e := range entries {
		if e.Meta.Topic == "keep" {
			seqs = append(seqs, e.Meta.Seq)
		}
	}
	if fmt.Sprint(seqs) != "[5 4]" {
		t.Errorf("fresh store lists %v, want [5 4]", seqs)
	}
	pi := s.index(0)
	defer pi.mu.Unlock()
	for key, c := range pi.chunks {
		if c.id.topic == "keep" && c.seq < 4 {
			t.Errorf("chunk %s of a superseded snapshot not tombstoned", key)
		}
	}
}

// Partitions map to checkpoint partitions, and any instance restores any
// partition.
func TestKafkaPartitionsAndInstances(t *testing.T) {
	brokers := newCluster(t)
	a := newKafkaStore(t, brokers, KafkaOptions{Partitions: 2})
	states := map[int]state{}
	for p := range 4 {
		states[p] = newState(uint64(p), 20_000)
		mustSave(t, a, testMeta("in", p, int64(p)), states[p])
	}
	b := newKafkaStore(t, brokers, KafkaOptions{})
	for p := range 4 {
		var got []byte
		m, _, err := b.Load(testContext(t), "in", p, collect(&got, new(Meta)))
		if err != nil || m.Offset != int64(p) || string(got) != string(states[p]) {
			t.Errorf("partition %d: offset %d err %v", p, m.Offset, err)
		}
		pi := b.index(p % 2)
		_, held := pi.manifests[snapID{"in", p}]
		pi.mu.Unlock()
		if !held {
			t.Errorf("partition %d not on checkpoint partition %d", p, p%2)
		}
	}
}

// produce writes raw records to the checkpoint topic, as a damaged or
// interfering writer would.
func produce(t *testing.T, s *KafkaStore, msgs ...kafka.Message) {
	t.Helper()
	if err := s.write(testContext(t), msgs...); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func kafkaDamage(t *testing.T, damage func(s *KafkaStore, chunkKey string) kafka.Message, want error) {
	t.Helper()
	brokers := newCluster(t)
	s := newKafkaStore(t, brokers, KafkaOptions{ChunkBytes: 8 << 10})
	st1 := newState(1, 100_000)
	m1 := mustSave(t, s, testMeta("in", 0, 10), st1)
	m2 := mustSave(t, s, testMeta("in", 0, 20), newState(2, 100_000))
	pi := s.index(0)
	loc := pi.manifests[snapID{"in", 0}][m2.Seq]
	pi.mu.Unlock()
	if len(loc.m.Chunks) < 3 {
		t.Fatalf("%d chunks, want several", len(loc.m.Chunks))
	}
	produce(t, s, damage(s, s.chunkKey(snapID{"in", 0}, m2.Seq, loc.m.Nonce, 1)))

	r := newKafkaStore(t, brokers, KafkaOptions{}) // a fresh instance: nothing cached
	var got []byte
	var reports []Damage
	ctx := WithDamageReport(testContext(t), func(d Damage) { reports = append(reports, d) })
	loaded, src, err := r.Load(ctx, "in", 0, collect(&got, new(Meta)))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if src != SourceFallback || loaded.Seq != m1.Seq || string(got) != string(st1) {
		t.Errorf("loaded seq %d source %q, want seq %d as fallback", loaded.Seq, src, m1.Seq)
	}
	mkey := r.manifestKey(snapID{"in", 0}, m2.Seq)
	var ce *CorruptError
	if len(reports) != 1 || reports[0].Where != mkey || reports[0].Seq != m2.Seq || reports[0].KeptAt != "" ||
		!errors.As(reports[0].Err, &ce) || !errors.Is(ce, want) {
		t.Fatalf("damage reports %+v, want one naming %s wrapping %v", reports, mkey, want)
	}
	entries, err := r.List(testContext(t))
	if err != nil || len(entries) != 2 {
		t.Fatalf("list: %v %v", entries, err)
	}
	if !errors.As(entries[0].Err, &ce) || !errors.Is(ce, want) || !strings.Contains(ce.Key, "/c/") || entries[1].Err != nil ||
		!entries[0].Damaged || entries[1].Damaged {
		t.Errorf("verdicts %v / %v, want a *CorruptError of a chunk wrapping %v, then nil", entries[0].Err, entries[1].Err, want)
	}
	// Saves beyond Keep leave the damaged snapshot in place, uncounted,
	// and report it no more.
	reports = nil
	for i := range 4 {
		if _, err := r.Save(ctx, testMeta("in", 0, int64(30+i)), newState(uint64(3+i), 1000)); err != nil {
			t.Fatal(err)
		}
	}
	if len(reports) != 0 {
		t.Errorf("saves reported %d damages again", len(reports))
	}
	fresh := newKafkaStore(t, brokers, KafkaOptions{})
	entries, err = fresh.List(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	var intact, damaged int
	for _, e := range entries {
		if e.Damaged {
			damaged++
			if e.Where != mkey {
				t.Errorf("damaged entry %s, want %s", e.Where, mkey)
			}
		} else if e.Err == nil {
			intact++
		}
	}
	if intact != defaultKeep || damaged != 1 {
		t.Errorf("after saves: %d intact, %d damaged, want %d and 1 (the damaged one kept, not counted)", intact, damaged, defaultKeep)
	}
}

// Every manifest garbage: Load names each, reports each once, and keeps
// them all.
func TestKafkaAllDamaged(t *testing.T) {
	brokers := newCluster(t)
	s := newKafkaStore(t, brokers, KafkaOptions{})
	m1 := mustSave(t, s, testMeta("in", 0, 10), newState(1, 1000))
	m2 := mustSave(t, s, testMeta("in", 0, 20), newState(2, 1000))
	for _, m := range []Meta{m1, m2} {
		produce(t, s, kafka.Message{Key: []byte(s.manifestKey(snapID{"in", 0}, m.Seq)), Value: []byte("not a manifest")})
	}
	r := newKafkaStore(t, brokers, KafkaOptions{})
	var reports []Damage
	ctx := WithDamageReport(testContext(t), func(d Damage) { reports = append(reports, d) })
	for range 2 {
		_, _, err := r.Load(ctx, "in", 0, collect(new([]byte), new(Meta)))
		var le *LoadError
		if !errors.As(err, &le) || len(le.Rejected) != 2 || !errors.Is(err, ErrFormat) {
			t.Fatalf("load: %v, want a *LoadError naming both manifests", err)
		}
	}
	if len(reports) != 2 || reports[0].Seq != m2.Seq || reports[1].Seq != m1.Seq {
		t.Errorf("reports %+v, want seq %d then %d, once each", reports, m2.Seq, m1.Seq)
	}
	entries, err := newKafkaStore(t, brokers, KafkaOptions{}).List(testContext(t))
	if err != nil || len(entries) != 2 || !entries[0].Damaged || !entries[1].Damaged {
		t.Errorf("list %+v %v, want both manifests, damaged", entries, err)
	}
}

func TestKafkaCorruptChunkFallsBack(t *testing.T) {
	kafkaDamage(t, func(s *KafkaStore, key string) kafka.Message {
		v := newState(2, 8<<10)
		return kafka.Message{Key: []byte(key), Value: v}
	}, ErrChecksum)
}

func TestKafkaMissingChunkFallsBack(t *testing.T) {
	kafkaDamage(t, func(s *KafkaStore, key string) kafka.Message {
		return kafka.Message{Key: []byte(key)} // tombstone
	}, ErrMissing)
}

// failingState writes n bytes and then fails, like a crash mid-Save.
type failingState int

func (f failingState) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(newState(9, int(f))[:f/2*2])
	if err != nil {
		return int64(n), err
	}
	return int64(n), errors.New("crash")
}

func TestKafkaChunksWithoutManifestIgnored(t *testing.T) {
	brokers := newCluster(t)
	s := newKafkaStore(t, brokers, KafkaOptions{ChunkBytes: 1 << 10})
	st := newState(1, 10_000)
	m1 := mustSave(t, s, testMeta("in", 0, 10), st)
	if _, err := s.Save(testContext(t), testMeta("in", 0, 20), failingState(200_000)); err == nil {
		t.Fatal("save of a failing state succeeded")
	}
	r := newKafkaStore(t, brokers, KafkaOptions{})
	var got []byte
	m, src, err := r.Load(testContext(t), "in", 0, collect(&got, new(Meta)))
	if err != nil || m.Seq != m1.Seq || src != SourceLatest || string(got) != string(st) {
		t.Fatalf("load: seq %d source %q err %v, want seq %d as latest", m.Seq, src, err, m1.Seq)
	}
	orphans := func(s *KafkaStore) int {
		pi := s.index(0)
		defer pi.mu.Unlock()
		n := 0
		for _, c := range pi.chunks {
			if c.seq != m1.Seq {
				n++
			}
		}
		return n
	}
	if orphans(r) == 0 {
		t.Fatal("the failed save wrote no chunks: the test does not test a partial write")
	}
	// Two more saves: the partial write's chunks are no longer of the newest
	// seq and get tombstoned.
	mustSave(t, r, testMeta("in", 0, 30), newState(3, 1000))
	last := mustSave(t, r, testMeta("in", 0, 40), newState(4, 1000))
	fresh := newKafkaStore(t, brokers, KafkaOptions{})
	if _, err := fresh.List(testContext(t)); err != nil {
		t.Fatal(err)
	}
	pi := fresh.index(0)
	for key, c := range pi.chunks {
		if c.seq != m1.Seq && c.seq < last.Seq-1 {
			t.Errorf("chunk %s of the partial write still live", key)
		}
	}
	pi.mu.Unlock()
}

func TestKafkaSplitsBeyondMaxMessageBytes(t *testing.T) {
	const maxMessage = 32 << 10
	brokers := newCluster(t, kfake.BrokerConfigs(map[string]string{"message.max.bytes": fmt.Sprint(maxMessage)}))
	s := newKafkaStore(t, brokers, KafkaOptions{}) // default ChunkBytes is above the limit
	st := newState(7, 300_000)
	m := mustSave(t, s, testMeta("in", 0, 1), st)
	if m.StoredBytes <= maxMessage {
		t.Fatalf("stored %d bytes: not above max.message.bytes", m.StoredBytes)
	}
	var got []byte
	if _, _, err := newKafkaStore(t, brokers, KafkaOptions{}).Load(testContext(t), "in", 0, collect(&got, new(Meta))); err != nil || string(got) != string(st) {
		t.Fatalf("load: %v", err)
	}
	pi := s.index(0)
	chunks := len(pi.manifests[snapID{"in", 0}][m.Seq].m.Chunks)
	pi.mu.Unlock()
	if want := int(m.StoredBytes/int64(s.chunk)) + 1; chunks != want || s.chunk+recordOverhead > maxMessage {
		t.Errorf("%d chunks of %d bytes, want %d under %d", chunks, s.chunk, want, maxMessage)
	}
}

// Several instances (processes) sharing the topic, several goroutines each.
// A Save that finished before another began has the lower seq, so the
// newest snapshot is always ranked newest; overlapping Saves may share a
// seq (their nonces keep the chunks apart; the later manifest wins). Load
// returns a state saved under the newest seq.
func TestKafkaConcurrentWriters(t *testing.T) {
	brokers := newCluster(t)
	const stores, writers, saves = 3, 2, 4
	var (
		spans saveSpans
		wg    sync.WaitGroup
	)
	for i := range stores {
		s := newKafkaStore(t, brokers, KafkaOptions{ChunkBytes: 4 << 10})
		for w := range writers {
			wg.Go(func() {
				for n := range saves {
					st := newState(uint64(i*100+w*10+n), 30_000)
					if err := spans.save(testContext(t), s, testMeta("in", 0, int64(n)), st); err != nil {
						t.Errorf("save: %v", err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if len(spans.spans) != stores*writers*saves {
		t.Fatalf("%d saves finished, want %d", len(spans.spans), stores*writers*saves)
	}
	spans.checkOrdered(t)
	newest := slices.MaxFunc(spans.spans, func(a, b saveSpan) int { return cmp.Compare(a.seq, b.seq) }).seq
	var got []byte
	m, _, err := newKafkaStore(t, brokers, KafkaOptions{}).Load(testContext(t), "in", 0, collect(&got, new(Meta)))
	if err != nil || m.Seq != newest {
		t.Fatalf("load: seq %d err %v, want the newest seq %d", m.Seq, err, newest)
	}
	if !slices.ContainsFunc(spans.spans, func(s saveSpan) bool { return s.seq == newest && string(s.st) == string(got) }) {
		t.Error("loaded state is not one saved under the newest seq")
	}
}

// Groups sharing a checkpoint topic do not see each other's snapshots.
func TestKafkaGroupsAreSeparate(t *testing.T) {
	brokers := newCluster(t)
	a := newKafkaStore(t, brokers, KafkaOptions{Group: "a/b"})
	b := newKafkaStore(t, brokers, KafkaOptions{Group: "a"})
	m := testMeta("in", 0, 1)
	m.Group = ""
	mustSave(t, a, m, newState(1, 100))
	if _, _, err := b.Load(testContext(t), "in", 0, collect(new([]byte), new(Meta))); !errors.Is(err, ErrNotFound) {
		t.Errorf("group a loads group a/b's snapshot: %v", err)
	}
	m.Group = "a"
	if _, err := a.Save(testContext(t), m, newState(1, 100)); err == nil {
		t.Error("store of group a/b saved a snapshot of group a")
	}
}

func TestKafkaOpenListed(t *testing.T) {
	brokers := newCluster(t)
	st := newState(5, 50_000)
	mustSave(t, newKafkaStore(t, brokers, KafkaOptions{ChunkBytes: 4 << 10}), testMeta("in", 1, 5), st)
	checkOpenListed(t, newKafkaStore(t, brokers, KafkaOptions{}), st)
}

// TestKafkaPartitionsAdded: partitions added to the checkpoint topic change
// the checkpoint partition an input partition maps to. A store started
// after that still restores every input partition's newest snapshot, and
// lists and opens it; the first Save writes at the new home, numbering on,
// and tombstones the copies left behind.
func TestKafkaPartitionsAdded(t *testing.T) {
	brokers := newCluster(t)
	a := newKafkaStore(t, brokers, KafkaOptions{Partitions: 1})
	newest := map[int]state{}
	for p := range 4 {
		for i := range 2 {
			newest[p] = newState(uint64(10*p+i), 20_000)
			mustSave(t, a, testMeta("in", p, int64(10*p+i)), newest[p])
		}
	}
	growCheckpointTopic(t, brokers, 3)

	b := newKafkaStore(t, brokers, KafkaOptions{})
	if b.nparts != 3 {
		t.Fatalf("store sees %d checkpoint partitions, want 3", b.nparts)
	}
	for p := range 4 {
		var got []byte
		m, src, err := b.Load(testContext(t), "in", p, collect(&got, new(Meta)))
		if err != nil || src != SourceLatest || m.Offset != int64(10*p+1) || string(got) != string(newest[p]) {
			t.Fatalf("partition %d (home %d): offset %d source %q err %v; want the newest snapshot, offset %d",
				p, p%3, m.Offset, src, err, 10*p+1)
		}
	}
	entries := listN(t, b, 8)
	for _, e := range entries {
		rc, err := b.Open(testContext(t), e)
		if err != nil {
			t.Fatalf("open %s/%d seq %d: %v", e.Meta.Topic, e.Meta.Partition, e.Meta.Seq, err)
		}
		rc.Close()
	}

	moved := newState(99, 20_000)
	m := mustSave(t, b, testMeta("in", 1, 12), moved)
	if m.Seq != 3 {
		t.Errorf("seq %d after snapshots numbered 1 and 2, want 3", m.Seq)
	}
	c := newKafkaStore(t, brokers, KafkaOptions{}) // nothing cached
	var got []byte
	loaded, _, err := c.Load(testContext(t), "in", 1, collect(&got, new(Meta)))
	if err != nil || loaded.Offset != 12 || string(got) != string(moved) {
		t.Fatalf("after the move: offset %d err %v, want the snapshot saved at home", loaded.Offset, err)
	}
	for cp := range 3 {
		ms, chunks := c.held(t, cp, snapID{"in", 1})
		want := 0
		if cp == 1 {
			want = 1
		}
		if ms != want || (want == 0 && chunks != 0) {
			t.Errorf("checkpoint partition %d holds %d manifests and %d chunks of in/1, want %d manifests (left behind copies tombstoned)", cp, ms, chunks, want)
		}
	}
}

// growCheckpointTopic adds partitions to the checkpoint topic, up to n.
func growCheckpointTopic(t *testing.T, brokers []string, n int) {
	t.Helper()
	res, err := testkit.KafkaClient(t, brokers...).CreatePartitions(testContext(t), &kafka.CreatePartitionsRequest{
		Topics: []kafka.TopicPartitionsConfig{{Name: "g-dedup-state", Count: int32(n)}},
	})
	if err == nil {
		err = res.Errors["g-dedup-state"]
	}
	if err != nil {
		t.Fatalf("add partitions: %v", err)
	}
}

// held counts the manifests and chunks of id checkpoint partition cp holds.
func (s *KafkaStore) held(t *testing.T, cp int, id snapID) (manifests, chunks int) {
	t.Helper()
	pi := s.index(cp)
	defer pi.mu.Unlock()
	if err := s.refresh(testContext(t), pi, cp); err != nil {
		t.Fatal(err)
	}
	for _, loc := range pi.chunks {
		if loc.id == id {
			chunks++
		}
	}
	return len(pi.manifests[id]), chunks
}

// TestKafkaMovedTwice: partitions are added twice (2, 4, 8), so input
// partition 6 maps to checkpoint partition 0, then 2, then 6, and the
// tombstones of the first move fail. The newest snapshot is restored
// however many copies were left behind, and the failed tombstones are
// written by the next Save.
func TestKafkaMovedTwice(t *testing.T) {
	c := testkit.NewCluster(t, kfake.NumBrokers(1))
	brokers := c.ListenAddrs()
	id := snapID{"in", 6}

	a := newKafkaStore(t, brokers, KafkaOptions{Partitions: 2})
	mustSave(t, a, testMeta("in", 6, 100), newState(1, 20_000))

	growCheckpointTopic(t, brokers, 4)
	b := newKafkaStore(t, brokers, KafkaOptions{})
	var got []byte
	if m, _, err := b.Load(testContext(t), "in", 6, collect(&got, new(Meta))); err != nil || m.Offset != 100 {
		t.Fatalf("load after the first addition: offset %d, %v; want 100", m.Offset, err)
	}
	// Produce requests to checkpoint partition 0, the tombstones of the
	// move, are refused; the Save at home, partition 2, goes through.
	var refuse atomic.Bool
	refuse.Store(true)
	c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.ProduceRequest)
		if !refuse.Load() {
			return nil, nil, false
		}
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				if rp.Partition == 0 {
					return kfaketest.ErrorResponse(req, kerr.TopicAuthorizationFailed.Code), nil, true
				}
			}
		}
		return nil, nil, false
	})
	newer := newState(2, 20_000)
	mustSave(t, b, testMeta("in", 6, 200), newer)
	if ms, _ := b.held(t, 0, id); ms == 0 {
		t.Fatal("the copy in checkpoint partition 0 is gone though its tombstones were refused")
	}

	growCheckpointTopic(t, brokers, 8)
	d := newKafkaStore(t, brokers, KafkaOptions{})
	m, _, err := d.Load(testContext(t), "in", 6, collect(&got, new(Meta)))
	if err != nil || m.Offset != 200 || string(got) != string(newer) {
		t.Fatalf("load after the second addition: offset %d seq %d, %v; want the newest snapshot (offset 200), not the copy left in partition 0", m.Offset, m.Seq, err)
	}

	// The earlier store, still routing by 4 partitions, tries its refused
	// tombstones again with its next Save.
	refuse.Store(false)
	mustSave(t, b, testMeta("in", 6, 300), newState(3, 20_000))
	if ms, chunks := b.held(t, 0, id); ms != 0 || chunks != 0 {
		t.Errorf("checkpoint partition 0 still holds %d manifests and %d chunks of in/6 after the next Save", ms, chunks)
	}
}

// listN lists s's entries and fails t unless there are n.
func listN(t *testing.T, s Store, n int) []Entry {
	t.Helper()
	entries, err := s.List(testContext(t))
	if err != nil || len(entries) != n {
		t.Fatalf("list: %d entries, %v; want %d", len(entries), err, n)
	}
	return entries
}

// TestKafkaOpenListedAwayCopy: after partitions were added, one manifest key
// can be in two checkpoint partitions (a Save at the new home with no Load
// before it numbers from 1). Open returns the state of the entry List
// returned, read where List found it.
func TestKafkaOpenListedAwayCopy(t *testing.T) {
	brokers := newCluster(t)
	a := newKafkaStore(t, brokers, KafkaOptions{Partitions: 2})
	states := map[int64]state{100: newState(1, 20_000), 200: newState(2, 20_000)}
	mustSave(t, a, testMeta("in", 2, 100), states[100])
	growCheckpointTopic(t, brokers, 4)
	b := newKafkaStore(t, brokers, KafkaOptions{})
	mustSave(t, b, testMeta("in", 2, 200), states[200])

	entries := listN(t, b, 2)
	for _, e := range entries {
		rc, err := b.Open(testContext(t), e)
		if err != nil {
			t.Fatalf("open the entry listed with offset %d (%s): %v", e.Meta.Offset, e.Where, err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(got) != string(states[e.Meta.Offset]) {
			t.Errorf("open of the entry listed with offset %d returned another snapshot's state (%v)", e.Meta.Offset, err)
		}
	}
}
