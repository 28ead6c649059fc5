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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/offsets"
)

// Topic layout. Every record key starts with "<group>/<topic>/<partition>/"
// (group path-escaped, so it holds no '/'):
//
//	<g>/<t>/<p>/c/<seq>/<nonce>/<n>   chunk n of snapshot seq (value: stored bytes)
//	<g>/<t>/<p>/m/<seq>               manifest of snapshot seq (value: JSON)
//
// seq is zero-padded to 20 digits, n to 6. The nonce is random per Save, so
// two writers that pick the same seq never overwrite each other's chunks; the
// later manifest wins, as compaction would decide. Chunks are written before
// their manifest, so a manifest is only ever visible after its chunks.
// Superseded manifests and their chunks (and chunks no manifest refers to)
// are tombstoned, so compaction keeps the last Keep snapshots per partition.
// Input partition p goes to checkpoint partition p % (partitions of the
// topic), so a restore reads only that checkpoint partition.
const (
	defaultChunkBytes = 512 << 10
	recordOverhead    = 16 << 10 // key, headers and batch framing around a chunk
	minChunkBytes     = 1 << 10
	writeGroup        = 8 // chunks per WriteMessages call
	saveHeader        = "dedup-checkpoint-save"
)

// KafkaOptions configures a KafkaStore.
type KafkaOptions struct {
	Brokers   []string
	Dialer    *kafka.Dialer      // TLS/SASL used when Transport is nil
	Transport kafka.RoundTripper // nil = a transport built from Dialer
	Topic     string             // checkpoint topic, created compacted when missing
	Group     string             // consumer group: namespaces the keys
	Keep      int                // snapshots kept per partition (default 3)
	// ChunkBytes is the most stored bytes per record (default 512 KiB). It is
	// lowered to fit the topic's max.message.bytes when that is smaller.
	ChunkBytes int
	Partitions int // partitions of the checkpoint topic when the store creates it (default 1)
	Logger     *slog.Logger
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
	log    *slog.Logger

	mu      sync.Mutex
	indexes map[int]*partIndex // by checkpoint partition

	saves sync.Map // save id -> *saveTrace, filled by the writer's Completion
}

var _ Store = (*KafkaStore)(nil)

// snapID names the snapshots of one input partition.
type snapID struct {
	topic     string
	partition int
}

type chunkSum struct {
	Size int    `json:"size"`
	CRC  uint32 `json:"crc"`
}

type manifest struct {
	Meta   Meta       `json:"meta"`
	Nonce  string     `json:"nonce"`
	Chunks []chunkSum `json:"chunks"`
}

type manifestLoc struct {
	key    string
	offset int64
	m      manifest
	err    error // the manifest record could not be decoded
}

type chunkLoc struct {
	id     snapID
	seq    uint64
	nonce  string
	n      int
	offset int64
	sum    chunkSum
}

// partIndex is what one checkpoint partition holds, built by reading it.
type partIndex struct {
	mu        sync.Mutex // held while reading or writing the partition
	next      int64      // next offset to read
	read      int        // records read from Kafka so far (a Save's own records are learned, not read)
	manifests map[snapID]map[uint64]*manifestLoc
	chunks    map[string]*chunkLoc
}

// NewKafkaStore connects, creates the topic with cleanup.policy=compact when
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
		log:     opts.Logger,
		indexes: map[int]*partIndex{},
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
	if err := s.fitChunks(ctx); err != nil {
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
		Completion:   s.completed,
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

// ensureTopic creates the topic when missing and returns its partitions.
func (s *KafkaStore) ensureTopic(ctx context.Context, partitions int) ([]int, error) {
	ids, err := partitionIDs(ctx, s.client, s.topic)
	if err == nil {
		return ids, nil
	}
	if !errors.Is(err, kafka.UnknownTopicOrPartition) {
		return nil, err
	}
	res, err := s.client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic:             s.topic,
		NumPartitions:     partitions,
		ReplicationFactor: -1,
		ConfigEntries:     []kafka.ConfigEntry{{ConfigName: "cleanup.policy", ConfigValue: "compact"}},
	}}})
	if err != nil {
		return nil, fmt.Errorf("create topic %s: %w", s.topic, err)
	}
	if err := res.Errors[s.topic]; err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
		return nil, fmt.Errorf("create topic %s: %w", s.topic, err)
	}
	s.log.Info("created checkpoint topic", "topic", s.topic, "partitions", partitions)
	// Metadata may lag the creation: poll until the partitions show.
	for {
		ids, err := partitionIDs(ctx, s.client, s.topic)
		if err == nil {
			return ids, nil
		}
		if !errors.Is(err, kafka.UnknownTopicOrPartition) && !errors.Is(err, kafka.LeaderNotAvailable) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for topic %s: %w", s.topic, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// fitChunks reads the topic's configuration: warns when it is not compacted
// and lowers the chunk size below max.message.bytes.
func (s *KafkaStore) fitChunks(ctx context.Context) error {
	res, err := s.client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic,
		ResourceName: s.topic,
	}}}) // all configs: some brokers report the broker-level name (message.max.bytes) too

	if err != nil {
		s.log.Warn("cannot read checkpoint topic configuration", "topic", s.topic, "err", err)
		return nil
	}
	for _, r := range res.Resources {
		if r.Error != nil {
			s.log.Warn("cannot read checkpoint topic configuration", "topic", s.topic, "err", r.Error)
			continue
		}
		for _, e := range r.ConfigEntries {
			switch e.ConfigName {
			case "cleanup.policy":
				if !strings.Contains(e.ConfigValue, "compact") {
					s.log.Warn("checkpoint topic is not compacted: old snapshots are kept until retention deletes them",
						"topic", s.topic, "cleanup.policy", e.ConfigValue)
				}
			case "max.message.bytes", "message.max.bytes":
				max, err := strconv.Atoi(e.ConfigValue)
				if err != nil || max <= 0 || s.chunk+recordOverhead <= max {
					continue
				}
				if max-recordOverhead < minChunkBytes {
					return fmt.Errorf("topic %s: max.message.bytes %d leaves no room for chunks", s.topic, max)
				}
				s.log.Info("checkpoint chunk size lowered to fit max.message.bytes", "topic", s.topic,
					"chunk_bytes", max-recordOverhead, "max.message.bytes", max)
				s.chunk = max - recordOverhead
			}
		}
	}
	return nil
}

// Keys.

func (s *KafkaStore) snapPrefix(id snapID) string {
	return fmt.Sprintf("%s%s/%d/", s.prefix, id.topic, id.partition)
}

func (s *KafkaStore) manifestKey(id snapID, seq uint64) string {
	return fmt.Sprintf("%sm/%020d", s.snapPrefix(id), seq)
}

func (s *KafkaStore) chunkKey(id snapID, seq uint64, nonce string, n int) string {
	return fmt.Sprintf("%sc/%020d/%s/%06d", s.snapPrefix(id), seq, nonce, n)
}

// parsedKey is a record key of this store's group.
type parsedKey struct {
	id       snapID
	manifest bool
	seq      uint64
	nonce    string
	n        int
}

func (s *KafkaStore) parseKey(key string) (parsedKey, bool) {
	rest, ok := strings.CutPrefix(key, s.prefix)
	if !ok {
		return parsedKey{}, false
	}
	f := strings.Split(rest, "/")
	if len(f) < 4 {
		return parsedKey{}, false
	}
	var k parsedKey
	var err error
	k.id.topic = f[0]
	if k.id.partition, err = strconv.Atoi(f[1]); err != nil {
		return parsedKey{}, false
	}
	if k.seq, err = strconv.ParseUint(f[3], 10, 64); err != nil {
		return parsedKey{}, false
	}
	switch {
	case f[2] == "m" && len(f) == 4:
		k.manifest = true
	case f[2] == "c" && len(f) == 6:
		k.nonce = f[4]
		if k.n, err = strconv.Atoi(f[5]); err != nil {
			return parsedKey{}, false
		}
	default:
		return parsedKey{}, false
	}
	return k, true
}

// inputPartition reads the input partition from any key of the layout.
func inputPartition(key []byte) (int, bool) {
	f := bytes.SplitN(key, []byte("/"), 4)
	if len(f) < 4 {
		return 0, false
	}
	p, err := strconv.Atoi(string(f[2]))
	return p, err == nil && p >= 0
}

func (s *KafkaStore) checkpointPartition(inputPartition int) int { return inputPartition % s.nparts }

// balance routes input partition p to checkpoint partition p % nparts. The
// count is fixed when the store starts so that writes and reads agree even if
// partitions are added to the topic later.
func (s *KafkaStore) balance(msg kafka.Message, partitions ...int) int {
	p, _ := inputPartition(msg.Key)
	want := s.checkpointPartition(p)
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

// index returns the index of a checkpoint partition, locked.
func (s *KafkaStore) index(cp int) *partIndex {
	s.mu.Lock()
	pi, ok := s.indexes[cp]
	if !ok {
		pi = &partIndex{manifests: map[snapID]map[uint64]*manifestLoc{}, chunks: map[string]*chunkLoc{}}
		s.indexes[cp] = pi
	}
	s.mu.Unlock()
	pi.mu.Lock()
	return pi
}

// refresh reads the checkpoint partition from where the index stopped to its
// current end. Called with pi.mu held.
func (s *KafkaStore) refresh(ctx context.Context, pi *partIndex, cp int) error {
	offs, err := offsets.List(ctx, s.client, s.topic, []int{cp})
	if err != nil {
		return err
	}
	r := offs[cp]
	if pi.next < r.First {
		pi.next = r.First
	}
	err = readRange(ctx, s.client, s.topic, cp, pi.next, r.End, func(rec *kafka.Record) error {
		key, err := kafka.ReadAll(rec.Key)
		if err != nil {
			return fmt.Errorf("read key at %d: %w", rec.Offset, err)
		}
		var value []byte
		if rec.Value != nil {
			if value, err = kafka.ReadAll(rec.Value); err != nil {
				return fmt.Errorf("read value at %d: %w", rec.Offset, err)
			}
		}
		s.apply(pi, string(key), value, rec.Value == nil, rec.Offset)
		pi.next = rec.Offset + 1
		pi.read++
		return nil
	})
	if err != nil {
		return err
	}
	pi.next = max(pi.next, r.End)
	return nil
}

// apply adds one record of the checkpoint topic to the index.
func (s *KafkaStore) apply(pi *partIndex, key string, value []byte, tombstone bool, offset int64) {
	k, ok := s.parseKey(key)
	if !ok {
		return
	}
	if !k.manifest {
		if tombstone {
			delete(pi.chunks, key)
			return
		}
		pi.chunks[key] = &chunkLoc{id: k.id, seq: k.seq, nonce: k.nonce, n: k.n, offset: offset,
			sum: chunkSum{Size: len(value), CRC: checksum(value)}}
		return
	}
	ms := pi.manifests[k.id]
	if tombstone {
		delete(ms, k.seq)
		return
	}
	if ms == nil {
		ms = map[uint64]*manifestLoc{}
		pi.manifests[k.id] = ms
	}
	loc := &manifestLoc{key: key, offset: offset}
	if err := json.Unmarshal(value, &loc.m); err != nil {
		loc.err = &CorruptError{Key: key, What: "manifest", Err: fmt.Errorf("%w: %v", ErrFormat, err)}
	}
	// The key is the authority on what the manifest describes.
	loc.m.Meta.Topic, loc.m.Meta.Partition, loc.m.Meta.Seq = k.id.topic, k.id.partition, k.seq
	ms[k.seq] = loc
}

// newest returns the manifests of id, newest first.
func (pi *partIndex) newest(id snapID) []*manifestLoc {
	var out []*manifestLoc
	for _, loc := range pi.manifests[id] {
		out = append(out, loc)
	}
	slices.SortFunc(out, func(a, b *manifestLoc) int { return -cmp.Compare(a.m.Meta.Seq, b.m.Meta.Seq) })
	return out
}

// verifyIndexed checks a manifest against the chunks the index has seen.
func (s *KafkaStore) verifyIndexed(pi *partIndex, loc *manifestLoc) error {
	if loc.err != nil {
		return loc.err
	}
	m := loc.m
	var total int64
	for n, want := range m.Chunks {
		key := s.chunkKey(snapID{m.Meta.Topic, m.Meta.Partition}, m.Meta.Seq, m.Nonce, n)
		c, ok := pi.chunks[key]
		if !ok {
			return &CorruptError{Key: key, What: fmt.Sprintf("chunk %d of %d", n, len(m.Chunks)), Err: ErrMissing}
		}
		if c.sum != want {
			return &CorruptError{Key: key, What: fmt.Sprintf("chunk %d of %d", n, len(m.Chunks)),
				Err: fmt.Errorf("%w: %d bytes crc %08x, manifest says %d bytes crc %08x", ErrChecksum, c.sum.Size, c.sum.CRC, want.Size, want.CRC)}
		}
		total += int64(want.Size)
	}
	if total != m.Meta.StoredBytes {
		return &CorruptError{Key: loc.key, What: "manifest", Err: fmt.Errorf("%w: chunks hold %d bytes, meta says %d", ErrFormat, total, m.Meta.StoredBytes)}
	}
	return nil
}

// chunkPlan is what is needed to read one snapshot back.
type chunkPlan struct {
	loc     *manifestLoc
	offsets []int64 // of each chunk
	keys    []string
}

func (s *KafkaStore) plan(pi *partIndex, loc *manifestLoc) (chunkPlan, error) {
	if err := s.verifyIndexed(pi, loc); err != nil {
		return chunkPlan{}, err
	}
	p := chunkPlan{loc: loc}
	m := loc.m
	for n := range m.Chunks {
		key := s.chunkKey(snapID{m.Meta.Topic, m.Meta.Partition}, m.Meta.Seq, m.Nonce, n)
		p.keys = append(p.keys, key)
		p.offsets = append(p.offsets, pi.chunks[key].offset)
	}
	return p, nil
}

// fetchChunks reads the chunks of a plan and verifies every checksum, so the
// returned bytes are exactly what Save stored.
func (s *KafkaStore) fetchChunks(ctx context.Context, cp int, p chunkPlan) ([][]byte, error) {
	m := p.loc.m
	chunks := make([][]byte, len(p.keys))
	if len(p.keys) > 0 {
		want := make(map[int64]int, len(p.offsets))
		for n, off := range p.offsets {
			want[off] = n
		}
		from, to := slices.Min(p.offsets), slices.Max(p.offsets)+1
		err := readRange(ctx, s.client, s.topic, cp, from, to, func(rec *kafka.Record) error {
			n, ok := want[rec.Offset]
			if !ok {
				return nil
			}
			b, err := kafka.ReadAll(rec.Value)
			if err != nil {
				return fmt.Errorf("read chunk %d: %w", n, err)
			}
			chunks[n] = b
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	total := newCRC()
	for n, b := range chunks {
		what := fmt.Sprintf("chunk %d of %d", n, len(chunks))
		if b == nil {
			return nil, &CorruptError{Key: p.keys[n], What: what, Err: ErrMissing}
		}
		if got := (chunkSum{Size: len(b), CRC: checksum(b)}); got != m.Chunks[n] {
			return nil, &CorruptError{Key: p.keys[n], What: what, Err: fmt.Errorf("%w: crc %08x, want %08x", ErrChecksum, got.CRC, m.Chunks[n].CRC)}
		}
		total.Write(b)
	}
	if got := total.Sum32(); got != m.Meta.Checksum {
		return nil, &CorruptError{Key: p.loc.key, What: "payload", Err: fmt.Errorf("%w: crc %08x, want %08x", ErrChecksum, got, m.Meta.Checksum)}
	}
	return chunks, nil
}

func chunkReader(chunks [][]byte) io.Reader {
	rs := make([]io.Reader, len(chunks))
	for i, b := range chunks {
		rs[i] = bytes.NewReader(b)
	}
	return io.MultiReader(rs...)
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
	id := snapID{m.Topic, m.Partition}
	cp := s.checkpointPartition(m.Partition)
	pi := s.index(cp)
	defer pi.mu.Unlock()
	m, err := s.save(ctx, pi, cp, id, m, state)
	if err != nil {
		return Meta{}, fmt.Errorf("save checkpoint %s/%d: %w", m.Topic, m.Partition, err)
	}
	return m, nil
}

func (s *KafkaStore) save(ctx context.Context, pi *partIndex, cp int, id snapID, m Meta, state io.WriterTo) (Meta, error) {
	if err := s.refresh(ctx, pi, cp); err != nil {
		return m, err
	}
	m.Seq = 1
	for seq := range pi.manifests[id] {
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
	m.RawBytes, m.StoredBytes, m.Checksum = raw, stored, sum
	man := manifest{Meta: m, Nonce: nonce, Chunks: w.sums}
	value, err := json.Marshal(man)
	if err != nil {
		return m, fmt.Errorf("encode manifest: %w", err)
	}
	mkey := s.manifestKey(id, m.Seq)
	if err := s.write(ctx, kafka.Message{Key: []byte(mkey), Value: value, Headers: headers}); err != nil {
		return m, fmt.Errorf("write manifest: %w", err)
	}
	// The snapshot is durable from here on; failing to tidy up is only logged.
	tombs := s.superseded(pi, id, m.Seq)
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

// superseded lists tombstones for the manifests of id beyond the newest Keep
// (counting the one just written) and for chunks no kept manifest refers to
// (older partial writes, or the chunks of a manifest another writer replaced).
func (s *KafkaStore) superseded(pi *partIndex, id snapID, newSeq uint64) []kafka.Message {
	var tombs []kafka.Message
	keepFrom := uint64(0)
	if newSeq+1 > uint64(s.keep) {
		keepFrom = newSeq + 1 - uint64(s.keep)
	}
	referenced := map[string]bool{}
	for seq, loc := range pi.manifests[id] {
		if seq < keepFrom {
			tombs = append(tombs, kafka.Message{Key: []byte(loc.key)})
			continue
		}
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

// chunkWriter cuts a stream into chunks of size bytes and hands them to
// flush writeGroup at a time.
type chunkWriter struct {
	ctx     context.Context
	size    int
	flush   func(context.Context, [][]byte) error
	cur     []byte
	pending [][]byte
	sums    []chunkSum
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if w.cur == nil {
			w.cur = make([]byte, 0, w.size)
		}
		k := min(len(p), w.size-len(w.cur))
		w.cur = append(w.cur, p[:k]...)
		p = p[k:]
		if len(w.cur) == w.size {
			if err := w.cut(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (w *chunkWriter) cut() error {
	w.sums = append(w.sums, chunkSum{Size: len(w.cur), CRC: checksum(w.cur)})
	w.pending = append(w.pending, w.cur)
	w.cur = nil
	if len(w.pending) < writeGroup {
		return nil
	}
	return w.send()
}

func (w *chunkWriter) send() error {
	if len(w.pending) == 0 {
		return nil
	}
	err := w.flush(w.ctx, w.pending)
	w.pending = nil
	return err
}

// Close writes what is left.
func (w *chunkWriter) Close() error {
	if len(w.cur) > 0 {
		w.sums = append(w.sums, chunkSum{Size: len(w.cur), CRC: checksum(w.cur)})
		w.pending = append(w.pending, w.cur)
		w.cur = nil
	}
	return w.send()
}

// Load implements Store.
func (s *KafkaStore) Load(ctx context.Context, topic string, partition int, decode func(Meta, io.Reader) error) (Meta, Source, error) {
	id := snapID{topic, partition}
	cp := s.checkpointPartition(partition)
	pi := s.index(cp)
	err := s.refresh(ctx, pi, cp)
	cands := pi.newest(id)
	plans := make([]chunkPlan, len(cands))
	planErrs := make([]error, len(cands))
	for i, loc := range cands {
		plans[i], planErrs[i] = s.plan(pi, loc)
	}
	pi.mu.Unlock()
	if err != nil {
		return Meta{}, "", fmt.Errorf("load checkpoint %s/%d: %w", topic, partition, err)
	}
	if len(cands) == 0 {
		return Meta{}, "", fmt.Errorf("load checkpoint %s/%d: %w", topic, partition, ErrNotFound)
	}
	lerr := &LoadError{Topic: topic, Partition: partition}
	for i, loc := range cands {
		err := planErrs[i]
		if err == nil {
			err = s.loadPlan(ctx, cp, plans[i], decode)
		}
		if err == nil {
			src := SourceLatest
			if i > 0 {
				src = SourceFallback
			}
			return loc.m.Meta, src, nil
		}
		if ctx.Err() != nil {
			return Meta{}, "", fmt.Errorf("load checkpoint %s/%d: %w", topic, partition, ctx.Err())
		}
		s.log.Warn("checkpoint rejected", "key", loc.key, "seq", loc.m.Meta.Seq, "err", err)
		lerr.Rejected = append(lerr.Rejected, Rejection{Seq: loc.m.Meta.Seq, Where: loc.key, Err: err})
	}
	return Meta{}, "", lerr
}

func (s *KafkaStore) loadPlan(ctx context.Context, cp int, p chunkPlan, decode func(Meta, io.Reader) error) error {
	rc, err := s.openPlan(ctx, cp, p)
	if err != nil {
		return err
	}
	err = decode(p.loc.m.Meta, rc)
	if cerr := rc.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("decode state: %w", err)
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
					e := Entry{Meta: loc.m.Meta, Where: loc.key, Err: s.verifyIndexed(pi, loc)}
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
	slices.SortStableFunc(entries, func(a, b Entry) int {
		if c := strings.Compare(a.Meta.Topic, b.Meta.Topic); c != 0 {
			return c
		}
		if a.Meta.Partition != b.Meta.Partition {
			return a.Meta.Partition - b.Meta.Partition
		}
		return -cmp.Compare(a.Meta.Seq, b.Meta.Seq)
	})
	return entries, nil
}

// Open returns the decompressed, checksum-verified state of an entry
// returned by List, for inspection. The caller closes it.
func (s *KafkaStore) Open(ctx context.Context, e Entry) (io.ReadCloser, error) {
	id := snapID{e.Meta.Topic, e.Meta.Partition}
	cp := s.checkpointPartition(id.partition)
	pi := s.index(cp)
	err := s.refresh(ctx, pi, cp)
	loc, ok := pi.manifests[id][e.Meta.Seq]
	var p chunkPlan
	if ok && err == nil {
		p, err = s.plan(pi, loc)
	}
	pi.mu.Unlock()
	if !ok && err == nil {
		return nil, fmt.Errorf("open checkpoint %s/%d seq %d: %w", id.topic, id.partition, e.Meta.Seq, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open checkpoint: %w", err)
	}
	rc, err := s.openPlan(ctx, cp, p)
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
