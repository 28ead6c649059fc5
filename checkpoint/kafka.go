package checkpoint

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/internal/buildinfo"
	"dedup/offsets"
)

const (
	defaultChunkBytes = 512 << 10
	recordOverhead    = 16 << 10 // key, headers and batch framing around a chunk
	minChunkBytes     = 1 << 10
	saveHeader        = "dedup-checkpoint-save"
)

// KafkaOptions configures a KafkaStore.
type KafkaOptions struct {
	Brokers   []string
	Dialer    *kafka.Dialer      // TLS/SASL used when Transport is nil
	Transport kafka.RoundTripper // nil = a transport built from Dialer
	Topic     string             // checkpoint topic, created with TopicSettings when missing
	Group     string             // consumer group: namespaces the keys
	Keep      int                // snapshots kept per partition (default 3)
	// ChunkBytes is the most stored bytes per record (default 512 KiB). It is
	// lowered to fit the topic's max.message.bytes when that is smaller.
	ChunkBytes int
	Partitions int // partitions of the checkpoint topic when the store creates it (default 1)
	// Patience bounds how long a read of the checkpoint topic may bring
	// nothing before Load or Save fails with a *ReadError (default 30s).
	Patience time.Duration
	Logger   *slog.Logger
}

// KafkaStore keeps snapshots in a compacted Kafka topic. Any instance can
// restore any partition. It is safe for concurrent use; Saves that map to the
// same checkpoint partition are serialised.
type KafkaStore struct {
	client *kafka.Client
	writer *kafka.Writer
	own    *kafka.Transport // closed on Close when the store built it
	topic  string
	group  string
	prefix string // escaped group + "/"
	keep   int
	chunk  int
	nparts int
	wait   time.Duration // KafkaOptions.Patience
	log    *slog.Logger
	// baseMaxAge bounds a chain base's age (0: none): see BaseMaxAge.
	baseMaxAge time.Duration
	// tombstoneLife is the topic's delete.retention.ms (TombstoneRetention
	// when not reported): see refresh.
	tombstoneLife time.Duration

	mu      sync.Mutex
	indexes map[int]*partIndex // by checkpoint partition
	moved   map[snapID]movedFrom
	// reported holds the damaged manifests already reported, by key, at
	// the offset of the manifest record found damaged: each is reported
	// once, and is never tombstoned by a Save.
	reported map[string]int64
	// unreachable holds the increments reported unreachable (their chain
	// broken before them), likewise, reported once; they are tombstoned
	// with their base.
	unreachable map[string]int64
	// stale holds the increments found superseded or orphaned (see
	// staleIncrements), likewise, logged once; they are tombstoned.
	stale map[string]int64
	notes formatNotes

	saves sync.Map // save id -> *saveTrace, filled by the writer's Completion
}

var _ Store = (*KafkaStore)(nil)

// NewKafkaStore connects, creates the topic with TopicSettings when
// missing, and fits ChunkBytes to the topic's max.message.bytes.
func NewKafkaStore(ctx context.Context, opts KafkaOptions) (*KafkaStore, error) {
	if len(opts.Brokers) == 0 || opts.Topic == "" || opts.Group == "" {
		return nil, errors.New("create kafka store: brokers, topic and group are required")
	}
	if opts.Keep < 0 || opts.ChunkBytes < 0 || opts.Partitions < 0 {
		return nil, errors.New("create kafka store: negative keep, chunk bytes or partitions")
	}
	rt, own := transportFor(opts.Transport, opts.Dialer)
	s := &KafkaStore{
		client:  &kafka.Client{Addr: kafka.TCP(opts.Brokers...), Transport: rt},
		own:     own,
		topic:   opts.Topic,
		group:   opts.Group,
		prefix:  url.PathEscape(opts.Group) + "/",
		keep:    orDefault(opts.Keep, defaultKeep),
		chunk:   orDefault(opts.ChunkBytes, defaultChunkBytes),
		wait:    opts.Patience,
		log:     opts.Logger,
		indexes: map[int]*partIndex{},
		moved:   map[snapID]movedFrom{},

		tombstoneLife: TombstoneRetention,

		reported:    map[string]int64{},
		unreachable: map[string]int64{},
		stale:       map[string]int64{},
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	parts, err := s.ensureTopic(ctx, orDefault(opts.Partitions, 1))
	if err != nil {
		s.closeTransport()
		return nil, fmt.Errorf("create kafka store: %w", err)
	}
	s.nparts = len(parts)
	if err := s.readTopicConfig(ctx); err != nil {
		s.closeTransport()
		return nil, fmt.Errorf("create kafka store: %w", err)
	}
	s.writer = &kafka.Writer{
		Addr:         s.client.Addr,
		Topic:        s.topic,
		Balancer:     kafka.BalancerFunc(s.balance),
		RequiredAcks: kafka.RequireAll,
		Transport:    rt,
		BatchBytes:   int64(s.chunk + recordOverhead),
		BatchSize:    writeGroup,
		BatchTimeout: time.Millisecond,
		// A short retry budget (about 1s, not kafka-go's ten attempts of up
		// to 1s each): a failed Save is retried by the next checkpoint
		// anyway, and an outage must show in the log and
		// dedup_checkpoint_failures_total within about one interval.
		MaxAttempts:     4,
		WriteBackoffMin: 100 * time.Millisecond,
		WriteBackoffMax: 400 * time.Millisecond,
		Completion:      s.completed,
	}
	return s, nil
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func (s *KafkaStore) closeTransport() {
	if s.own != nil {
		s.own.CloseIdleConnections()
	}
}

// balance routes input partition p to checkpoint partition p % nparts, or a
// record to the partition its partitionHeader names. The count is fixed
// when the store starts so that writes and reads agree even if partitions
// are added to the topic while it runs.
func (s *KafkaStore) balance(msg kafka.Message, partitions ...int) int {
	want, ok := routed(msg)
	if !ok {
		p, _ := inputPartition(msg.Key)
		want = s.checkpointPartition(p)
	}
	if slices.Contains(partitions, want) {
		return want
	}
	return partitions[want%len(partitions)]
}

// saveTrace records where a Save's records landed.
type saveTrace struct {
	mu       sync.Mutex
	count    int
	min, max int64
	failed   bool
}

func (s *KafkaStore) completed(msgs []kafka.Message, err error) {
	for _, m := range msgs {
		for _, h := range m.Headers {
			if h.Key != saveHeader {
				continue
			}
			v, ok := s.saves.Load(string(h.Value))
			if !ok {
				continue
			}
			t := v.(*saveTrace)
			t.mu.Lock()
			if err != nil {
				t.failed = true
			} else {
				if t.count == 0 || m.Offset < t.min {
					t.min = m.Offset
				}
				t.max = max(t.max, m.Offset)
				t.count++
			}
			t.mu.Unlock()
		}
	}
}

// Save implements Store: chunks first, then the manifest, then tombstones for
// what the new snapshot supersedes.
func (s *KafkaStore) Save(ctx context.Context, m Meta, state io.WriterTo) (Meta, error) {
	if m.Topic == "" || strings.Contains(m.Topic, "/") || m.Partition < 0 {
		return Meta{}, fmt.Errorf("save checkpoint: invalid topic %q or partition %d", m.Topic, m.Partition)
	}
	if m.Group == "" {
		m.Group = s.group
	} else if m.Group != s.group {
		return Meta{}, fmt.Errorf("save checkpoint: group %q does not match store group %q", m.Group, s.group)
	}
	if m.Created.IsZero() {
		m.Created = time.Now()
	}
	m.Writer = buildinfo.Version
	if m.Base == 0 && m.Prev != 0 {
		return Meta{}, fmt.Errorf("save checkpoint: a base with prev %d", m.Prev)
	}
	id := snapID{m.Topic, m.Partition}
	cp := s.checkpointPartition(m.Partition)
	m.Seq = s.movedSeq(id) + 1 // numbering goes on from snapshots found away from home
	pi := s.index(cp)
	m, err := s.save(ctx, pi, cp, id, m, state)
	pi.mu.Unlock()
	var cerr *ChainError
	if errors.As(err, &cerr) {
		return Meta{}, cerr
	}
	if err != nil {
		return Meta{}, fmt.Errorf("save checkpoint %s/%d: %w", m.Topic, m.Partition, err)
	}
	s.retireMoved(ctx, id)
	return m, nil
}

func (s *KafkaStore) save(ctx context.Context, pi *partIndex, cp int, id snapID, m Meta, state io.WriterTo) (Meta, error) {
	if err := s.refresh(ctx, pi, cp); err != nil {
		return m, err
	}
	if err := s.checkFence(pi, id, m); err != nil {
		return m, err
	}
	prevChain, err := s.checkChain(pi, id, m)
	if err != nil {
		return m, err
	}
	for seq := range pi.manifests[id] { // m.Seq comes in as the floor (Save)
		m.Seq = max(m.Seq, seq+1)
	}
	nonceBytes := make([]byte, 8)
	rand.Read(nonceBytes)
	nonce := hex.EncodeToString(nonceBytes)

	trace := &saveTrace{}
	s.saves.Store(nonce, trace)
	defer s.saves.Delete(nonce)
	headers := []kafka.Header{{Key: saveHeader, Value: []byte(nonce)}}

	var written []kafka.Message // kept only to update the index afterwards
	w := &chunkWriter{ctx: ctx, size: s.chunk, flush: func(ctx context.Context, chunks [][]byte) error {
		msgs := make([]kafka.Message, len(chunks))
		for i, c := range chunks {
			n := len(written) + i
			msgs[i] = kafka.Message{Key: []byte(s.chunkKey(id, m.Seq, nonce, n)), Value: c, Headers: headers}
		}
		if err := s.write(ctx, msgs...); err != nil {
			return err
		}
		for i := range msgs {
			msgs[i].Value = nil // do not keep the data, only the sums
		}
		written = append(written, msgs...)
		return nil
	}}
	raw, stored, sum, err := compress(w, state)
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		return m, err
	}
	m.RawBytes, m.StoredBytes, m.Checksum, m.ChainBytes = raw, stored, sum, 0
	if m.Increment() {
		m.ChainBytes = prevChain + stored
	}
	man := manifest{Meta: m, Nonce: nonce, Chunks: w.sums}
	value, err := json.Marshal(man)
	if err != nil {
		return m, fmt.Errorf("encode manifest: %w", err)
	}
	mkey := s.pieceKey(id, m.Seq, m.Base)
	if err := s.recheckFence(ctx, pi, cp, id, m, trace, len(written)); err != nil {
		return m, err
	}
	if err := s.write(ctx, kafka.Message{Key: []byte(mkey), Value: value, Headers: headers}); err != nil {
		return m, fmt.Errorf("write manifest: %w", err)
	}
	// The snapshot is durable from here on; failing to tidy up is only logged.
	tombs := s.superseded(ctx, pi, id, m)
	for i := range tombs {
		tombs[i].Headers = headers
	}
	if len(tombs) > 0 {
		if err := s.write(ctx, tombs...); err != nil {
			s.log.Warn("tombstone superseded checkpoints", "topic", id.topic, "partition", id.partition, "err", err)
		}
	}
	s.learn(pi, trace, written, mkey, value, tombs, w.sums)
	return m, nil
}

// write produces msgs and waits for all in-sync replicas.
func (s *KafkaStore) write(ctx context.Context, msgs ...kafka.Message) error {
	err := s.writer.WriteMessages(ctx, msgs...)
	var werrs kafka.WriteErrors
	if errors.As(err, &werrs) {
		return fmt.Errorf("write %d of %d records: %w", werrs.Count(), len(msgs), errors.Join(werrs...))
	}
	return err
}

// checkFence refuses m when the index holds a decodable manifest of id
// written by a greater (Epoch, Generation) (an increment's Owner counts).
// Called with pi.mu held.
func (s *KafkaStore) checkFence(pi *partIndex, id snapID, m Meta) error {
	for _, loc := range pi.manifests[id] {
		if loc.err == nil && compareWriter(loc.m.Meta, m) > 0 {
			return staleError(m, loc.m.Meta, loc.key)
		}
	}
	return nil
}

// recheckFence is checkFence again before the manifest is written, when
// anything but this Save's own chunks landed in the checkpoint partition
// since the index was read: a newer generation's snapshot written
// meanwhile wins. Called with pi.mu held.
func (s *KafkaStore) recheckFence(ctx context.Context, pi *partIndex, cp int, id snapID, m Meta, t *saveTrace, chunks int) error {
	offs, err := offsets.List(ctx, s.client, s.topic, []int{cp})
	if err != nil {
		return err
	}
	t.mu.Lock()
	alone := t.count == chunks && (chunks == 0 || t.min == pi.next) && offs[cp].End == pi.next+int64(chunks)
	t.mu.Unlock()
	if alone {
		return nil
	}
	if err := s.refresh(ctx, pi, cp); err != nil {
		return err
	}
	if err := s.checkFence(pi, id, m); err != nil {
		return err
	}
	_, err = s.checkChain(pi, id, m)
	return err
}

// checkChain checks that increment m continues its chain as the index
// shows it: the base is held, intact as far as the index shows (manifest
// and chunk sums, not the payload) and not reported damaged, of m's
// (Epoch, Generation), and m.Prev is the chain's newest piece. It returns
// the ChainBytes of m.Prev (0 for a base m). Called with pi.mu held.
func (s *KafkaStore) checkChain(pi *partIndex, id snapID, m Meta) (int64, error) {
	if !m.Increment() {
		return 0, nil
	}
	ms := pi.manifests[id]
	b, ok := ms[m.Base]
	if !ok || b.base != 0 {
		return 0, chainError(m, 0, "base not held (pruned, or never written)")
	}
	if err := s.verifyIndexed(pi, b); err != nil {
		return 0, chainError(m, 0, fmt.Sprintf("base damaged: %v", err))
	}
	if s.isReported(b) {
		return 0, chainError(m, 0, "base reported damaged")
	}
	newest := m.Base
	for seq, loc := range ms {
		if loc.base == m.Base {
			newest = max(newest, seq)
		}
	}
	if compareFence(b.m.Meta, m) != 0 {
		return 0, chainError(m, newest, fmt.Sprintf("base is of generation %d (epoch %d), the increment of %d (epoch %d): an increment keeps its base's, its writer's goes in owner",
			b.m.Meta.Generation, b.m.Meta.Epoch, m.Generation, m.Epoch))
	}
	if newest != m.Prev {
		return 0, chainError(m, newest, "prev is not the newest piece of the chain")
	}
	if m.Owner != 0 {
		for seq, loc := range ms {
			if loc.base == 0 && seq > m.Base {
				return 0, newerBaseError(m, newest, seq)
			}
		}
	}
	if newest == m.Base {
		return 0, nil
	}
	p := ms[newest]
	if p.err != nil {
		return 0, chainError(m, newest, fmt.Sprintf("previous increment unreadable: %v", p.err))
	}
	if cerr := continuesOwner(m, p.m.Meta); cerr != nil {
		return 0, cerr
	}
	return p.m.Meta.ChainBytes, nil
}

// superseded lists tombstones for the bases of id beyond the best Keep by
// rank (counting m, the one just written, when it is a base), for the
// increments of every base not kept (tombstoned now, gone before, or
// damaged), for the stale increments (staleIncrements), and for chunks no
// kept manifest refers to (older partial writes, or the chunks of a
// manifest another writer replaced).
//
// A damaged manifest (undecodable, a chunk not matching, a chunk missing
// from a piece still needed, or reported damaged by a Load) is neither
// tombstoned nor counted against Keep, and its chunks stay: it is left in
// place for inspection and reported once (see docs/checkpoints.md,
// "Integrity").
func (s *KafkaStore) superseded(ctx context.Context, pi *partIndex, id snapID, m Meta) []kafka.Message {
	newSeq := m.Seq
	newKey := s.pieceKey(id, m.Seq, m.Base)
	var tombs []kafka.Message
	ranked := pi.newest(id) // without m: the index learns it afterwards
	// The chains a restore takes from now on: m's, and, beside an
	// increment m, the best base by rank (another, only when two writers
	// of one generation overlapped).
	live := map[uint64]bool{m.Seq: true}
	if m.Increment() {
		live = map[uint64]bool{m.Base: true}
		if i := slices.IndexFunc(ranked, func(l *manifestLoc) bool { return l.base == 0 && l.err == nil }); i >= 0 {
			live[ranked[i].m.Meta.Seq] = true
		}
	}
	stale := s.staleIncrements(pi, id, ranked, live, newKey)
	kept := 0
	keptBases := map[uint64]bool{}
	if !m.Increment() {
		kept = 1
		keptBases[newSeq] = true
	}
	referenced := map[string]bool{}
	// Bases first, so that the increments know which bases stay.
	slices.SortStableFunc(ranked, func(a, b *manifestLoc) int { return cmp.Compare(min(a.base, 1), min(b.base, 1)) })
	for _, loc := range ranked {
		seq := loc.m.Meta.Seq
		if loc.key == newKey {
			continue // replaced by m (same key)
		}
		if why, ok := stale[loc.key]; ok {
			s.staleFound(id, loc, why)
			tombs = append(tombs, kafka.Message{Key: []byte(loc.key)})
			continue
		}
		if err := s.verifyIndexed(pi, loc); err != nil || s.isReported(loc) {
			if err != nil {
				s.damaged(ctx, id, loc, err)
			}
			if loc.err == nil {
				referenced[fmt.Sprintf("%d/%s", seq, loc.m.Nonce)] = true
			}
			continue
		}
		if loc.base != 0 {
			if keptBases[loc.base] {
				referenced[fmt.Sprintf("%d/%s", seq, loc.m.Nonce)] = true
			} else {
				tombs = append(tombs, kafka.Message{Key: []byte(loc.key)})
			}
			continue
		}
		if kept >= s.keep {
			tombs = append(tombs, kafka.Message{Key: []byte(loc.key)})
			continue
		}
		kept++
		keptBases[seq] = true
		referenced[fmt.Sprintf("%d/%s", seq, loc.m.Nonce)] = true
	}
	var chunkKeys []string
	for key, c := range pi.chunks {
		// seq+1 < newSeq: chunks of the newest seq may belong to another
		// process's Save still in progress.
		if c.id == id && c.seq+1 < newSeq && !referenced[fmt.Sprintf("%d/%s", c.seq, c.nonce)] {
			chunkKeys = append(chunkKeys, key)
		}
	}
	slices.Sort(chunkKeys)
	slices.SortFunc(tombs, func(a, b kafka.Message) int { return bytes.Compare(a.Key, b.Key) })
	for _, k := range chunkKeys {
		tombs = append(tombs, kafka.Message{Key: []byte(k)})
	}
	return tombs
}

// staleIncrements returns, by manifest key with the reason, the
// increments of id no restore can use that are no damage: those whose
// base is not held, and, in a chain not live (a newer base exists), each
// from the first one whose chunks are missing on. A release that
// predates chains reads only bases and tombstones every chunk no base
// refers to, so after a downgrade and an upgrade again the older chains'
// increments have lost their chunks; the newer base is what restores use.
// A missing chunk in the live chain, a chunk that does not match its
// sums, or an undecodable manifest is damage all the same (the caller
// reports it), and so is a manifest already reported damaged.
func (s *KafkaStore) staleIncrements(pi *partIndex, id snapID, ranked []*manifestLoc, live map[uint64]bool, newKey string) map[string]string {
	ms := pi.manifests[id]
	stale := map[string]string{}
	cut := map[uint64]uint64{} // base -> seq of its chain's first increment with chunks missing
	verdicts := map[string]error{}
	for _, loc := range ranked {
		if loc.base == 0 || loc.err != nil || loc.key == newKey || s.isReported(loc) {
			continue
		}
		err := s.verifyIndexed(pi, loc)
		verdicts[loc.key] = err
		if err != nil && !errors.Is(err, ErrMissing) {
			continue
		}
		if b, ok := ms[loc.base]; !ok || b.base != 0 {
			stale[loc.key] = "its base is gone"
			continue
		}
		if !live[loc.base] && err != nil {
			if c, ok := cut[loc.base]; !ok || loc.m.Meta.Seq < c {
				cut[loc.base] = loc.m.Meta.Seq
			}
		}
	}
	for _, loc := range ranked {
		c, ok := cut[loc.base]
		if !ok || loc.base == 0 || loc.m.Meta.Seq < c || stale[loc.key] != "" {
			continue
		}
		if err, checked := verdicts[loc.key]; checked && (err == nil || errors.Is(err, ErrMissing)) {
			stale[loc.key] = fmt.Sprintf("a newer base exists, and the chunks of seq %d of its chain are gone", c)
		}
	}
	return stale
}

// learn applies a Save's own records to the index without reading them back,
// when the trace proves nobody else wrote to the partition in between.
func (s *KafkaStore) learn(pi *partIndex, t *saveTrace, chunks []kafka.Message, mkey string, mvalue []byte, tombs []kafka.Message, sums []chunkSum) {
	t.mu.Lock()
	defer t.mu.Unlock()
	total := len(chunks) + 1 + len(tombs)
	if t.failed || t.count != total || t.min != pi.next || t.max-t.min+1 != int64(total) {
		return // the next refresh reads the partition from pi.next
	}
	// Within one partition the records landed in the order written.
	off := t.min
	for i, c := range chunks {
		k, _ := s.parseKey(string(c.Key))
		pi.chunks[string(c.Key)] = &chunkLoc{id: k.id, seq: k.seq, nonce: k.nonce, n: k.n, offset: off, sum: sums[i]}
		off++
	}
	s.apply(pi, mkey, mvalue, false, off)
	off++
	for _, tb := range tombs {
		s.apply(pi, string(tb.Key), nil, true, off)
		off++
	}
	pi.next = off
}

// Load implements Store.
func (s *KafkaStore) Load(ctx context.Context, topic string, partition int, decode func(Meta, io.Reader) error) (Meta, Source, error) {
	id := snapID{topic, partition}
	cands, err := s.locate(ctx, id)
	if err != nil {
		return Meta{}, "", fmt.Errorf("load checkpoint %s/%d: %w", topic, partition, err)
	}
	if len(cands) == 0 {
		return Meta{}, "", fmt.Errorf("load checkpoint %s/%d: %w", topic, partition, ErrNotFound)
	}
	lerr := &LoadError{Topic: topic, Partition: partition}
	tried := 0
	for _, c := range cands {
		if c.loc.base != 0 {
			continue // an increment: applied after its base
		}
		err := c.err
		if err == nil {
			err = s.loadPlan(ctx, c.cp, c.plan, decode)
		}
		if err == nil {
			head, whole, err := s.loadChain(ctx, id, c, cands, decode)
			return loaded(topic, partition, head, tried, whole, err)
		}
		tried++
		if ctx.Err() != nil {
			return Meta{}, "", fmt.Errorf("load checkpoint %s/%d: %w", topic, partition, ctx.Err())
		}
		if IsDamage(err) {
			s.damaged(ctx, id, c.loc, err)
		} else {
			s.log.Warn("checkpoint rejected", "key", c.loc.key, "seq", c.loc.m.Meta.Seq, "err", err)
		}
		lerr.Rejected = append(lerr.Rejected, Rejection{Seq: c.loc.m.Meta.Seq, Where: c.loc.key, Err: err})
	}
	if len(lerr.Rejected) == 0 {
		// Only increments whose base is gone: nothing to restore from.
		return Meta{}, "", fmt.Errorf("load checkpoint %s/%d: %w", topic, partition, ErrNotFound)
	}
	return Meta{}, "", lerr
}

// loadChain applies the increments of base (decoded already), found in
// the same checkpoint partition among cands, in chain order (planChain),
// and returns the head; whole is false when the chain was cut short (a
// damaged, refused or unreachable increment, each reported once). Errors
// are those of the context.
func (s *KafkaStore) loadChain(ctx context.Context, id snapID, base candidate, cands []candidate, decode func(Meta, io.Reader) error) (Meta, bool, error) {
	bm := base.loc.m.Meta
	var incs []candidate
	for _, c := range cands {
		if c.cp == base.cp && c.loc.base == bm.Seq {
			incs = append(incs, c)
		}
	}
	slices.SortFunc(incs, func(a, b candidate) int { return cmp.Compare(a.loc.m.Meta.Seq, b.loc.m.Meta.Seq) })
	links := make([]link, len(incs))
	for i, c := range incs {
		links[i] = link{seq: c.loc.m.Meta.Seq, prev: c.loc.m.Meta.Prev, err: c.loc.err}
		if c.loc.err == nil && compareFence(c.loc.m.Meta, bm) != 0 {
			links[i].err = &CorruptError{Key: c.loc.key, What: "manifest", Err: fmt.Errorf("%w: generation %d (epoch %d), its base's %d (epoch %d)",
				ErrFormat, c.loc.m.Meta.Generation, c.loc.m.Meta.Epoch, bm.Generation, bm.Epoch)}
		}
	}
	plan := planChain(bm.Seq, links)
	for _, i := range plan.forks {
		s.log.Info("checkpoint increment ignored: another took its place in the chain", "key", incs[i].loc.key, "prev", links[i].prev)
	}
	// The increments' chunks read together (readChunks), not a fetch each:
	// they are small and many.
	var plans []chunkPlan
	for _, i := range plan.path {
		if incs[i].err == nil {
			plans = append(plans, incs[i].plan)
		}
	}
	got, err := s.readChunks(ctx, base.cp, plans)
	if err != nil {
		return Meta{}, false, fmt.Errorf("read increments of base %d: %w", bm.Seq, err)
	}
	head := bm
	cut := plan.rest
	failed := false // an increment on the path was damaged or refused
	for k, i := range plan.path {
		c := incs[i]
		err := c.err
		if err == nil {
			err = decodeChunks(c.plan, got, decode)
		}
		if err == nil {
			head = c.loc.m.Meta
			continue
		}
		if cerr := ctx.Err(); cerr != nil {
			return Meta{}, false, cerr
		}
		if IsDamage(err) {
			s.damaged(ctx, id, c.loc, err)
		} else {
			s.log.Warn("checkpoint increment rejected", "key", c.loc.key, "seq", c.loc.m.Meta.Seq, "err", err)
		}
		cut = append(slices.Clone(plan.path[k+1:]), plan.rest...)
		failed = true
		break
	}
	for _, i := range cut {
		if links[i].err != nil {
			s.damaged(ctx, id, incs[i].loc, links[i].err)
			continue
		}
		s.unreachableFound(ctx, id, incs[i].loc, gapError("", incs[i].loc.key, links[i], head.Seq))
	}
	whole := len(cut) == 0 && !failed
	if !whole {
		s.log.Warn("checkpoint chain cut short: restored up to the last intact increment",
			"topic", id.topic, "partition", id.partition, "base", bm.Seq, "head", head.Seq, "ignored", len(cut))
	}
	return head, whole, nil
}

func (s *KafkaStore) loadPlan(ctx context.Context, cp int, p chunkPlan, decode func(Meta, io.Reader) error) error {
	rc, err := s.openPlan(ctx, cp, p)
	if err != nil {
		return err
	}
	return decodeFrom(p, rc, decode)
}

// decodeChunks verifies the chunks of p out of got (readChunks) and hands
// the state to decode.
func decodeChunks(p chunkPlan, got map[int64][]byte, decode func(Meta, io.Reader) error) error {
	chunks, err := p.verify(got)
	if err != nil {
		return err
	}
	rc, err := newDecompressed(chunkReader(chunks), nil)
	if err != nil {
		return err
	}
	return decodeFrom(p, rc, decode)
}

func decodeFrom(p chunkPlan, rc io.ReadCloser, decode func(Meta, io.Reader) error) error {
	err := decode(p.loc.m.Meta, rc)
	if cerr := rc.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return &RefusedError{Err: err}
	}
	return nil
}

func (s *KafkaStore) openPlan(ctx context.Context, cp int, p chunkPlan) (io.ReadCloser, error) {
	chunks, err := s.fetchChunks(ctx, cp, p)
	if err != nil {
		return nil, err
	}
	return newDecompressed(chunkReader(chunks), nil)
}

// List implements Store. It reads the whole topic; the verdict covers the
// manifest and every chunk's size and checksum. Open verifies the whole.
func (s *KafkaStore) List(ctx context.Context) ([]Entry, error) {
	var entries []Entry
	for cp := range s.nparts {
		pi := s.index(cp)
		err := s.refresh(ctx, pi, cp)
		if err == nil {
			for id := range pi.manifests {
				for _, loc := range pi.newest(id) {
					e := Entry{Meta: loc.m.Meta, Where: loc.key, Err: s.verifyIndexed(pi, loc), part: cp}
					e.Damaged = e.Err != nil || s.isReported(loc)
					e.Meta.Topic, e.Meta.Partition = id.topic, id.partition
					entries = append(entries, e)
				}
			}
		}
		pi.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("list checkpoints: %w", err)
		}
	}
	// By seq first, so that pieces of one seq (overlapping writers) keep
	// an order that does not depend on map iteration.
	slices.SortStableFunc(entries, func(a, b Entry) int { return -cmp.Compare(a.Meta.Seq, b.Meta.Seq) })
	sortChains(entries)
	return entries, nil
}

// Open returns the decompressed, checksum-verified state of an entry
// returned by List, for inspection, read from the checkpoint partition List
// found it in. The caller closes it.
func (s *KafkaStore) Open(ctx context.Context, e Entry) (io.ReadCloser, error) {
	id := snapID{e.Meta.Topic, e.Meta.Partition}
	cands, err := s.candidates(ctx, e.part, id)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint: %w", err)
	}
	i := slices.IndexFunc(cands, func(c candidate) bool { return c.loc.m.Meta.Seq == e.Meta.Seq && c.loc.base == e.Meta.Base })
	if i < 0 {
		return nil, fmt.Errorf("open checkpoint %s/%d seq %d: %w", id.topic, id.partition, e.Meta.Seq, ErrNotFound)
	}
	if cands[i].err != nil {
		return nil, fmt.Errorf("open checkpoint: %w", cands[i].err)
	}
	rc, err := s.openPlan(ctx, e.part, cands[i].plan)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint: %w", err)
	}
	return rc, nil
}

// Close implements Store.
func (s *KafkaStore) Close() error {
	err := s.writer.Close()
	s.closeTransport()
	if err != nil {
		return fmt.Errorf("close kafka store: %w", err)
	}
	return nil
}

// Kind names the store for metrics labels: "kafka".
func (s *KafkaStore) Kind() string { return "kafka" }

// damaged reports a damaged manifest once per record: a warn line naming
// its key and what failed, and the context's report. Its records are left
// in place: the operator inspects them (dedup inspect) and tombstones the
// key by hand.
func (s *KafkaStore) damaged(ctx context.Context, id snapID, loc *manifestLoc, err error) {
	s.mu.Lock()
	off, seen := s.reported[loc.key]
	s.reported[loc.key] = loc.offset
	s.mu.Unlock()
	d := Damage{Topic: id.topic, Partition: id.partition, Seq: loc.m.Meta.Seq, Where: loc.key, Err: err, Writer: loc.m.Meta.Writer}
	if seen && off == loc.offset {
		s.log.Debug("checkpoint damaged (reported before)", append(damageAttrs(d), "key", loc.key)...)
		return
	}
	s.log.Warn("checkpoint damaged: left in place for inspection, not tombstoned and not counted against CHECKPOINT_KEEP",
		append(damageAttrs(d), "key", loc.key)...)
	reportDamage(ctx, d)
}

// unreachableFound reports, once per record, an increment Load could not
// reach from its base: a warn line naming its key, and the context's
// report. Unlike a damaged manifest it is tombstoned with its base.
func (s *KafkaStore) unreachableFound(ctx context.Context, id snapID, loc *manifestLoc, err error) {
	if !s.firstReport(s.unreachable, loc) {
		return
	}
	d := Damage{Topic: id.topic, Partition: id.partition, Seq: loc.m.Meta.Seq, Where: loc.key, Err: err}
	s.log.Warn("checkpoint increment unreachable: its chain is broken before it; left in place, tombstoned with its base",
		append(damageAttrs(d), "key", loc.key)...)
	reportDamage(ctx, d)
}

// firstReport records loc's record in seen (by key, the offset it was
// read at) and reports whether it is new there: each record is logged once.
func (s *KafkaStore) firstReport(seen map[string]int64, loc *manifestLoc) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	off, ok := seen[loc.key]
	seen[loc.key] = loc.offset
	return !ok || off != loc.offset
}

// staleFound logs, once per record and at info, a stale increment a
// Save tombstones (staleIncrements): no damage, nothing is counted.
func (s *KafkaStore) staleFound(id snapID, loc *manifestLoc, why string) {
	if !s.firstReport(s.stale, loc) {
		return
	}
	s.log.Info("checkpoint increment superseded: tombstoned, no damage", "topic", id.topic, "partition", id.partition,
		"seq", loc.m.Meta.Seq, "base", loc.base, "key", loc.key, "reason", why)
}

// isReported reports whether this manifest record was reported damaged.
func (s *KafkaStore) isReported(loc *manifestLoc) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	off, ok := s.reported[loc.key]
	return ok && off == loc.offset
}
