package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"

	"dedup/internal/buildinfo"
	"dedup/internal/testkit"
)

// logTo returns a logger writing text lines to buf, debug and up.
func logTo(buf *testkit.SyncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// logLines returns the lines of buf holding every one of parts.
func logLines(buf *testkit.SyncBuffer, parts ...string) []string {
	var out []string
	for _, l := range strings.Split(buf.String(), "\n") {
		if l != "" && !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(l, p) }) {
			out = append(out, l)
		}
	}
	return out
}

// chunkKeysOf returns the chunk keys of piece m as s indexed it.
func chunkKeysOf(t *testing.T, s *KafkaStore, m Meta) []string {
	t.Helper()
	id := snapID{m.Topic, m.Partition}
	pi := s.index(s.checkpointPartition(m.Partition))
	defer pi.mu.Unlock()
	loc := pi.manifests[id][m.Seq]
	if loc == nil || loc.base != m.Base {
		t.Fatalf("piece %d of base %d not indexed", m.Seq, m.Base)
	}
	keys := make([]string, len(loc.m.Chunks))
	for n := range loc.m.Chunks {
		keys[n] = s.chunkKey(id, m.Seq, loc.m.Nonce, n)
	}
	return keys
}

// tombstones returns a tombstone for each key.
func tombstones(keys ...string) []kafka.Message {
	msgs := make([]kafka.Message, len(keys))
	for i, k := range keys {
		msgs[i] = kafka.Message{Key: []byte(k)}
	}
	return msgs
}

// TestKafkaOrphanIncrementsNotDamaged: what a release that predates
// chains leaves after a downgrade and an upgrade again (it tombstones
// every chunk no base refers to, and prunes bases by its own count) is
// no damage: an increment whose base is gone, with its chunks or
// without, and the increments of an older chain from the first whose
// chunks are gone, are logged once at info and tombstoned by the next
// Save, and counted nowhere. In the same run a chunk that does not match
// (an older base) and a chunk missing from the newest chain are still
// reported and warned about, once each.
func TestKafkaOrphanIncrementsNotDamaged(t *testing.T) {
	brokers := newCluster(t)
	s := newKafkaStore(t, brokers, KafkaOptions{ChunkBytes: 4 << 10})
	hooks := kafkaHooks(brokers, s, defaultKeep)
	x, _ := saveChain(t, s, 0, 10, 2)     // its base goes
	a, _ := saveChain(t, s, 0, 100, 3)    // superseded chain: increments lose their chunks, its base a byte
	b, sts := saveChain(t, s, 0, 1000, 3) // the newest chain: an increment loses a chunk
	produce(t, s, tombstones(s.manifestKey(snapID{"in", 0}, x[0].Seq))...)
	produce(t, s, tombstones(chunkKeysOf(t, s, x[2])...)...)
	produce(t, s, tombstones(append(chunkKeysOf(t, s, a[1]), chunkKeysOf(t, s, a[2])...)...)...)
	produce(t, s, tombstones(chunkKeysOf(t, s, b[2])[0])...)
	hooks.corrupt(t, a[0])

	var logs testkit.SyncBuffer
	r := newKafkaStore(t, brokers, KafkaOptions{Logger: logTo(&logs)})
	var reports []Damage
	ctx := WithDamageReport(testContext(t), func(d Damage) { reports = append(reports, d) })
	var got applied
	head, src, err := r.Load(ctx, "in", 0, got.decode)
	if err != nil || src != SourceFallback || head.Seq != b[1].Seq || !slices.Equal(got.seqs(), seqsOf(b[:2])) ||
		got.states[1] != string(sts[1]) {
		t.Fatalf("load: head %d %q %v, applied %v; want the newest chain up to %d as fallback", head.Seq, src, err, got.seqs(), b[1].Seq)
	}
	reported := func() []uint64 {
		var out []uint64
		for _, d := range reports {
			out = append(out, d.Seq)
		}
		return out
	}
	if want := []uint64{b[2].Seq, b[3].Seq}; !slices.Equal(reported(), want) || !errors.Is(reports[0].Err, ErrMissing) ||
		!errors.Is(reports[1].Err, ErrChainGap) {
		t.Fatalf("load reported %v (%v), want %v: a chunk missing from the newest chain, and the increment after it", reported(), reports, want)
	}

	// The next base supersedes every chain: the stale increments go
	// without a report, the older base with a bad chunk is reported.
	reports = nil
	d, err := r.Save(ctx, testMeta("in", 0, 2000), newState(7, 20_000))
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint64{a[0].Seq}; !slices.Equal(reported(), want) || !errors.Is(reports[0].Err, ErrChecksum) {
		t.Errorf("save reported %v (%v), want %v: the base whose chunk does not match", reported(), reports, want)
	}
	stale := []Meta{x[1], x[2], a[1], a[2], a[3]}
	for _, m := range stale {
		key := r.incKey(snapID{"in", 0}, m.Seq, m.Base)
		if n := len(logLines(&logs, "level=INFO", "checkpoint increment superseded", "key="+key)); n != 1 {
			t.Errorf("%d info lines naming the stale increment %s, want 1", n, key)
		}
		if n := len(logLines(&logs, "checkpoint damaged", "key="+key)); n != 0 {
			t.Errorf("the stale increment %s was called damaged", key)
		}
	}
	for _, m := range []Meta{a[0], b[2]} {
		key := r.pieceKey(snapID{"in", 0}, m.Seq, m.Base)
		if n := len(logLines(&logs, "level=WARN", "checkpoint damaged", "key="+key)); n != 1 {
			t.Errorf("%d damaged warnings naming %s, want 1", n, key)
		}
	}
	// Once: another Save finds nothing stale or damaged left to say.
	reports = nil
	before := len(logLines(&logs, "checkpoint increment superseded"))
	if _, err := r.Save(ctx, incMeta(d, d, 2001), newState(8, 500)); err != nil {
		t.Fatal(err)
	}
	if len(reports) != 0 || len(logLines(&logs, "checkpoint increment superseded")) != before {
		t.Errorf("a second save reported %v and logged %d stale increments more", reported(),
			len(logLines(&logs, "checkpoint increment superseded"))-before)
	}
	// Tombstoned: a reader of the topic finds none of them.
	fresh := newKafkaStore(t, brokers, KafkaOptions{})
	entries, err := fresh.List(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[uint64]bool{}
	for _, e := range entries {
		listed[e.Meta.Seq] = true
	}
	for _, m := range stale {
		if listed[m.Seq] {
			t.Errorf("stale increment %d still listed", m.Seq)
		}
	}
	for _, m := range append([]Meta{a[0]}, b...) {
		if !listed[m.Seq] {
			t.Errorf("piece %d no longer listed: damage and the newest chains stay", m.Seq)
		}
	}
}

// TestFileOrphanIncrementsNotDamaged: increments whose base file is gone
// (a release that predates chains prunes bases by its own count and never
// looks at increments) are removed by the next Save, logged once at info
// and not reported; a damaged increment of the newest chain in the same
// run is.
func TestFileOrphanIncrementsNotDamaged(t *testing.T) {
	dir := t.TempDir()
	var logs testkit.SyncBuffer
	s, err := NewFileStore(FileOptions{Dir: dir, Logger: logTo(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	hooks := fileHooks(dir, defaultKeep)
	x, _ := saveChain(t, s, 0, 10, 2)
	saveChain(t, s, 0, 100, 2)
	b, _ := saveChain(t, s, 0, 1000, 2)
	hooks.remove(t, x[0])
	hooks.corrupt(t, b[2])

	var reports []Damage
	ctx := WithDamageReport(testContext(t), func(d Damage) { reports = append(reports, d) })
	var got applied
	head, src, err := s.Load(ctx, "in", 0, got.decode)
	if err != nil || src != SourceFallback || head.Seq != b[1].Seq {
		t.Fatalf("load: head %d %q %v, want %d as fallback", head.Seq, src, err, b[1].Seq)
	}
	if len(reports) != 1 || reports[0].Seq != b[2].Seq || !errors.Is(reports[0].Err, ErrChecksum) {
		t.Fatalf("load reported %+v, want the damaged increment %d", reports, b[2].Seq)
	}
	d, err := s.Save(ctx, testMeta("in", 0, 2000), newState(7, 20_000))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Save(ctx, incMeta(d, d, 2001), newState(8, 500)); err != nil {
		t.Fatal(err)
	}
	if len(reports) != 1 {
		t.Errorf("saves reported %+v, want nothing more", reports[1:])
	}
	for _, m := range x[1:] {
		path := filepath.Join(s.partitionDir("in", 0), pieceName(m.Seq, m.Base))
		if n := len(logLines(&logs, "level=INFO", "checkpoint increment without its base removed", "path="+path)); n != 1 {
			t.Errorf("%d info lines naming %s, want 1", n, path)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("orphan increment %s still there (%v)", path, err)
		}
	}
	if n := len(logLines(&logs, "checkpoint damaged")); n != 1 {
		t.Errorf("%d damaged warnings, want 1:\n%s", n, logs.String())
	}
}

// TestKafkaNewerFormatNotDamage: records of a kind this release does not
// parse, and a manifest with a field it does not know, are what a newer
// release writes. The store says so once each, naming the release that
// wrote them when recorded, restores what it reads as before, and reports
// no damage. What it writes names this release.
func TestKafkaNewerFormatNotDamage(t *testing.T) {
	brokers := newCluster(t)
	s := newKafkaStore(t, brokers, KafkaOptions{})
	st := newState(1, 5000)
	m := mustSave(t, s, testMeta("in", 0, 10), st)
	if m.Writer != buildinfo.Version {
		t.Errorf("saved by %q, want %q", m.Writer, buildinfo.Version)
	}
	id := snapID{"in", 0}
	pi := s.index(0)
	man := pi.manifests[id][m.Seq].m
	pi.mu.Unlock()
	value, err := json.Marshal(man)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(value, &doc); err != nil {
		t.Fatal(err)
	}
	doc["meta"].(map[string]any)["writer"] = "9.1.0"
	doc["meta"].(map[string]any)["filter_layout"] = 2
	newer, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	produce(t, s,
		kafka.Message{Key: []byte(s.manifestKey(id, m.Seq)), Value: newer},
		kafka.Message{Key: []byte(s.snapPrefix(id) + "x/00000000000000000002"), Value: []byte(`{"meta":{"writer":"9.2.0"}}`)},
		kafka.Message{Key: []byte(s.snapPrefix(id) + "x/00000000000000000003"), Value: []byte(`{"meta":{"writer":"9.2.0"}}`)},
	)

	var logs testkit.SyncBuffer
	r := newKafkaStore(t, brokers, KafkaOptions{Logger: logTo(&logs)})
	var reports []Damage
	ctx := WithDamageReport(testContext(t), func(d Damage) { reports = append(reports, d) })
	for range 2 {
		var got []byte
		var meta Meta
		head, src, err := r.Load(ctx, "in", 0, collect(&got, &meta))
		if err != nil || src != SourceLatest || head.Seq != m.Seq || string(got) != string(st) {
			t.Fatalf("load: head %d %q %v, want %d as latest", head.Seq, src, err, m.Seq)
		}
	}
	if _, err := r.Save(ctx, testMeta("in", 0, 20), newState(2, 5000)); err != nil {
		t.Fatal(err)
	}
	if len(reports) != 0 {
		t.Errorf("reported %+v, want no damage", reports)
	}
	for _, want := range [][]string{
		{"level=WARN", "format newer than this release", "release=" + buildinfo.Version, "written_by=9.1.0", `found="manifest field filter_layout"`},
		{"level=WARN", "format newer than this release", "written_by=9.2.0", `found="records of kind \"x\""`},
	} {
		if n := len(logLines(&logs, want...)); n != 1 {
			t.Errorf("%d lines holding %q, want 1:\n%s", n, want, logs.String())
		}
	}
	checkRefusedNamesWriter(t, r, &logs, "key="+r.manifestKey(id, m.Seq))
}

// checkRefusedNamesWriter: a piece whose state decode refuses (a format
// of a newer release) is reported as damage as before, and the warning
// names the release that wrote it.
func checkRefusedNamesWriter(t *testing.T, s Store, logs *testkit.SyncBuffer, where string) {
	t.Helper()
	_, _, err := s.Load(testContext(t), "in", 0, func(Meta, io.Reader) error { return errors.New("unknown section") })
	var le *LoadError
	if !errors.As(err, &le) {
		t.Fatalf("load refusing every piece: %v, want a *LoadError", err)
	}
	if n := len(logLines(logs, "level=WARN", "checkpoint damaged", where, "written_by=9.1.0")); n != 1 {
		t.Errorf("%d damaged warnings naming %s and its writer 9.1.0, want 1:\n%s", n, where, logs.String())
	}
}

// rewriteFooter replaces the meta of the piece file at path with edit's
// version of it, footer checksum and all, as a newer release would write it.
func rewriteFooter(t *testing.T, path string, edit func(map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := len(b) - footerFixed
	metaLen := int(binary.BigEndian.Uint32(b[n : n+4]))
	var doc map[string]any
	if err := json.Unmarshal(b[n-metaLen:n], &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	meta, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	out := append(b[:n-metaLen:n-metaLen], meta...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(meta)))
	out = binary.BigEndian.AppendUint32(out, checksum(meta))
	out = append(out, fileMagic...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFileNewerFormatNotDamage: a file of a kind this release does not
// read, and a piece whose meta holds a field it does not know, are said
// once each, naming the writer when recorded; the piece is restored as
// before and nothing is reported damaged.
func TestFileNewerFormatNotDamage(t *testing.T) {
	dir := t.TempDir()
	s := newFileStore(t, dir)
	st := newState(1, 5000)
	m := mustSave(t, s, testMeta("in", 0, 10), st)
	part := s.partitionDir("in", 0)
	rewriteFooter(t, filepath.Join(part, fileName(m.Seq)), func(doc map[string]any) {
		doc["writer"], doc["filter_layout"] = "9.1.0", 2
	})
	if err := os.WriteFile(filepath.Join(part, "00000000000000000002.idx"), []byte("an index"), 0o644); err != nil {
		t.Fatal(err)
	}

	var logs testkit.SyncBuffer
	r, err := NewFileStore(FileOptions{Dir: dir, Logger: logTo(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	var reports []Damage
	ctx := WithDamageReport(testContext(t), func(d Damage) { reports = append(reports, d) })
	for range 2 {
		var got []byte
		var meta Meta
		head, src, err := r.Load(ctx, "in", 0, collect(&got, &meta))
		if err != nil || src != SourceLatest || head.Seq != m.Seq || string(got) != string(st) || meta.Writer != "9.1.0" {
			t.Fatalf("load: head %d %q %v, written by %q; want %d as latest, by 9.1.0", head.Seq, src, err, meta.Writer, m.Seq)
		}
	}
	saved, err := r.Save(ctx, testMeta("in", 0, 20), newState(2, 5000))
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 0 {
		t.Errorf("reported %+v, want no damage", reports)
	}
	var meta Meta
	if _, _, err := r.Load(ctx, "in", 0, collect(new([]byte), &meta)); err != nil || meta.Seq != saved.Seq || meta.Writer != buildinfo.Version {
		t.Errorf("load of its own piece: seq %d by %q (%v), want %d by %q", meta.Seq, meta.Writer, err, saved.Seq, buildinfo.Version)
	}
	for _, want := range [][]string{
		{"level=WARN", "format newer than this release", "written_by=9.1.0", `found="meta field filter_layout"`},
		{"level=WARN", "format newer than this release", "written_by=\"not recorded\"", `found="file kind \".idx\""`},
	} {
		if n := len(logLines(&logs, want...)); n != 1 {
			t.Errorf("%d lines holding %q, want 1:\n%s", n, want, logs.String())
		}
	}
	checkRefusedNamesWriter(t, r, &logs, "path="+filepath.Join(part, fileName(m.Seq)))
}

// TestKafkaMovedOrphanIncrementsNotDamaged: the copies left behind when
// partitions were added to the checkpoint topic are tombstoned by the
// first Save at home; increments among them whose chunks another writer
// removed are superseded like every copy there (logged once at info, not
// reported), while a base whose chunk does not match is reported and left
// in place.
func TestKafkaMovedOrphanIncrementsNotDamaged(t *testing.T) {
	brokers := newCluster(t)
	a := newKafkaStore(t, brokers, KafkaOptions{Partitions: 1, ChunkBytes: 4 << 10})
	hooks := kafkaHooks(brokers, a, defaultKeep)
	old, _ := saveChain(t, a, 1, 10, 2)
	saveChain(t, a, 1, 100, 1)
	produce(t, a, tombstones(append(chunkKeysOf(t, a, old[1]), chunkKeysOf(t, a, old[2])...)...)...)
	hooks.corrupt(t, old[0])
	growCheckpointTopic(t, brokers, 3)

	var logs testkit.SyncBuffer
	b := newKafkaStore(t, brokers, KafkaOptions{Logger: logTo(&logs)})
	var reports []Damage
	ctx := WithDamageReport(testContext(t), func(d Damage) { reports = append(reports, d) })
	if _, src, err := b.Load(ctx, "in", 1, collect(new([]byte), new(Meta))); err != nil || src != SourceLatest {
		t.Fatalf("load: %q %v, want the newest chain away from home", src, err)
	}
	if _, err := b.Save(ctx, testMeta("in", 1, 200), newState(3, 20_000)); err != nil {
		t.Fatal(err)
	}
	if len(reports) != 1 || reports[0].Seq != old[0].Seq || !errors.Is(reports[0].Err, ErrChecksum) {
		t.Errorf("reported %+v, want only the base %d whose chunk does not match", reports, old[0].Seq)
	}
	for _, m := range old[1:] {
		key := b.incKey(snapID{"in", 1}, m.Seq, m.Base)
		if n := len(logLines(&logs, "level=INFO", "checkpoint increment superseded", "key="+key)); n != 1 {
			t.Errorf("%d info lines naming %s, want 1:\n%s", n, key, logs.String())
		}
	}
	if n := len(logLines(&logs, "checkpoint damaged")); n != 1 {
		t.Errorf("%d damaged warnings, want 1 (the base):\n%s", n, logs.String())
	}
	c := newKafkaStore(t, brokers, KafkaOptions{})
	if ms, _ := c.held(t, 0, snapID{"in", 1}); ms != 1 {
		t.Errorf("the old checkpoint partition holds %d manifests of in/1, want 1: the damaged base, the rest tombstoned", ms)
	}
}
