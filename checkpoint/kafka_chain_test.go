package checkpoint

import (
	"dedup/internal/testkit"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func kafkaHooks(brokers []string, s *KafkaStore, keep int) chainHooks {
	return chainHooks{
		// A chunk record of the piece overwritten with other bytes.
		corrupt: func(t *testing.T, m Meta) {
			t.Helper()
			id := snapID{m.Topic, m.Partition}
			pi := s.index(s.checkpointPartition(m.Partition))
			loc := pi.manifests[id][m.Seq]
			pi.mu.Unlock()
			if loc == nil || loc.base != m.Base || len(loc.m.Chunks) == 0 {
				t.Fatalf("piece %d of base %d not indexed", m.Seq, m.Base)
			}
			key := s.chunkKey(id, m.Seq, loc.m.Nonce, 0)
			produce(t, s, kafka.Message{Key: []byte(key), Value: newState(99, loc.m.Chunks[0].Size)})
		},
		// The manifest tombstoned, as a hand or a lost record would.
		remove: func(t *testing.T, m Meta) {
			t.Helper()
			produce(t, s, kafka.Message{Key: []byte(s.pieceKey(snapID{m.Topic, m.Partition}, m.Seq, m.Base))})
		},
		fresh: func(t *testing.T) Store { return newKafkaStore(t, brokers, KafkaOptions{Keep: keep}) },
	}
}

// kafkaChainStore is a Kafka store with o on a cluster of its own, and the
// hooks that damage its pieces.
func kafkaChainStore(t *testing.T, o KafkaOptions) (*KafkaStore, chainHooks) {
	t.Helper()
	brokers := newCluster(t)
	s := newKafkaStore(t, brokers, o)
	return s, kafkaHooks(brokers, s, o.Keep)
}

func TestKafkaChainRoundTrip(t *testing.T) {
	s, hooks := kafkaChainStore(t, KafkaOptions{ChunkBytes: 4 << 10})
	checkChainRoundTrip(t, s, hooks)
	// Increments are under their own keys, one manifest each.
	pi := s.index(0)
	defer pi.mu.Unlock()
	incs := 0
	for _, loc := range pi.manifests[snapID{"in", 0}] {
		if loc.base != 0 {
			incs++
			if loc.key != s.incKey(snapID{"in", 0}, loc.m.Meta.Seq, loc.base) {
				t.Errorf("increment %d under key %s", loc.m.Meta.Seq, loc.key)
			}
		}
	}
	if incs != 7 {
		t.Errorf("%d increment manifests, want 7", incs)
	}
}

func TestKafkaChainPruning(t *testing.T) {
	brokers := newCluster(t)
	s := newKafkaStore(t, brokers, KafkaOptions{Keep: 2, ChunkBytes: 4 << 10})
	checkChainPruning(t, s, 2, kafkaHooks(brokers, s, 2))
	// The pruned chains are tombstoned, chunks and manifests: a reader of
	// the topic finds only the kept chains' records live.
	fresh := newKafkaStore(t, brokers, KafkaOptions{Keep: 2})
	if _, err := fresh.List(testContext(t)); err != nil {
		t.Fatal(err)
	}
	// What the writer learned of its own records is what a reader finds.
	if _, err := s.List(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if got, want := describeIndex(s), describeIndex(fresh); got != want {
		t.Errorf("learned index:\n%s\nread index:\n%s", got, want)
	}
	pi := fresh.index(0)
	defer pi.mu.Unlock()
	live := map[uint64]bool{}
	for seq, loc := range pi.manifests[snapID{"in", 1}] {
		live[seq] = true
		if loc.base != 0 && !live[loc.base] && pi.manifests[snapID{"in", 1}][loc.base] == nil {
			t.Errorf("increment %s live without its base", loc.key)
		}
	}
	for key, c := range pi.chunks {
		if c.id == (snapID{"in", 1}) && !live[c.seq] {
			t.Errorf("chunk %s of a pruned piece still live", key)
		}
	}
	if len(live) != 2*4+3 {
		t.Errorf("%d live manifests, want %d (two chains of a base and 3 increments, and 3 more)", len(live), 2*4+3)
	}
}

func TestKafkaChainDamagedIncrement(t *testing.T) {
	s, hooks := kafkaChainStore(t, KafkaOptions{ChunkBytes: 4 << 10})
	checkChainCut(t, s, hooks, false)
}

func TestKafkaChainMissingIncrement(t *testing.T) {
	s, hooks := kafkaChainStore(t, KafkaOptions{ChunkBytes: 4 << 10})
	checkChainCut(t, s, hooks, true)
}

func TestKafkaChainRefusals(t *testing.T) {
	checkChainRefusals(t, newKafkaStore(t, newCluster(t), KafkaOptions{}))
}

// Goroutines of one instance: Saves of a checkpoint partition are
// serialised, so each chain check sees the increment saved before.
func TestKafkaChainConcurrent(t *testing.T) {
	s := newKafkaStore(t, newCluster(t), KafkaOptions{})
	checkChainConcurrent(t, []Store{s})
}

func TestKafkaChainCrash(t *testing.T) {
	s, hooks := kafkaChainStore(t, KafkaOptions{ChunkBytes: 1 << 10})
	checkChainCrash(t, s, hooks)
	// The failed increment wrote chunks (and no manifest): the test tests
	// a partial write.
	pi := s.index(0)
	defer pi.mu.Unlock()
	nonces := map[string]bool{}
	for _, loc := range pi.manifests[snapID{"in", 5}] {
		nonces[loc.m.Nonce] = true
	}
	orphans := 0
	for _, c := range pi.chunks {
		if c.id == (snapID{"in", 5}) && !nonces[c.nonce] {
			orphans++
		}
	}
	if orphans == 0 {
		t.Error("the failed increment wrote no chunks")
	}
}

// A chain's increments are read together, not one fetch each.
func TestKafkaChainReadTogether(t *testing.T) {
	c, brokers := newControlledCluster(t)
	s := newKafkaStore(t, brokers, KafkaOptions{ChunkBytes: 4 << 10})
	metas, _ := saveChain(t, s, 0, 100, 30)
	r := newKafkaStore(t, brokers, KafkaOptions{})
	if _, err := r.List(testContext(t)); err != nil { // the index read: not counted
		t.Fatal(err)
	}
	var fetches atomic.Int64
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		fetches.Add(1)
		return nil, nil, false
	})
	var a applied
	head, _, err := r.Load(testContext(t), "in", 0, a.decode)
	if err != nil || head.Seq != metas[len(metas)-1].Seq || len(a.metas) != len(metas) {
		t.Fatalf("load: head %d %v, applied %d pieces", head.Seq, err, len(a.metas))
	}
	if n := fetches.Load(); n > 4 {
		t.Errorf("%d fetches to restore a base and 30 increments, want at most 4", n)
	}
}

// Increments between other partitions' large records (one checkpoint
// partition holds many input partitions) are read in runs, several at a
// time, with fetches sized to the runs: no fetch starts at another
// partition's chunk, and together they ask for less than one full fetch.
func TestKafkaChainInterleaved(t *testing.T) {
	c, brokers := newControlledCluster(t)
	s := newKafkaStore(t, brokers, KafkaOptions{ChunkBytes: 1 << 10})
	st := newState(1, 5000)
	base := mustSave(t, s, testMeta("in", 0, 1), st)
	metas, states := []Meta{base}, []state{st}
	for i := range 12 {
		mustSave(t, s, testMeta("in", 1, int64(i)), newState(uint64(50+i), 40_000)) // many chunks
		st := newState(uint64(100+i), 300)
		m := mustSave(t, s, incMeta(base, metas[len(metas)-1], int64(10+i)), st)
		metas, states = append(metas, m), append(states, st)
	}
	r := newKafkaStore(t, brokers, KafkaOptions{})
	if _, err := r.List(testContext(t)); err != nil {
		t.Fatal(err)
	}
	other := map[int64]bool{} // offsets of partition 1's chunks
	pi := r.index(0)
	for _, ch := range pi.chunks {
		if ch.id.partition == 1 {
			other[ch.offset] = true
		}
	}
	pi.mu.Unlock()
	var mu sync.Mutex
	var starts []int64
	var asked int64 // bytes the fetches asked for at most
	c.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, t := range kreq.(*kmsg.FetchRequest).Topics {
			for _, p := range t.Partitions {
				mu.Lock()
				starts = append(starts, p.FetchOffset)
				asked += int64(p.PartitionMaxBytes)
				mu.Unlock()
			}
		}
		return nil, nil, false
	})
	var a applied
	head, src, err := r.Load(testContext(t), "in", 0, a.decode)
	if err != nil || src != SourceLatest || head.Seq != metas[len(metas)-1].Seq {
		t.Fatalf("load: head %d %q %v", head.Seq, src, err)
	}
	if !slices.Equal(a.seqs(), seqsOf(metas)) {
		t.Fatalf("applied %v, want %v", a.seqs(), seqsOf(metas))
	}
	for i := range a.states {
		if a.states[i] != string(states[i]) {
			t.Errorf("piece %d: wrong state", i)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, off := range starts {
		if other[off] {
			t.Errorf("a fetch at %d, a chunk of another partition (fetches at %v)", off, starts)
		}
	}
	// Sized to the chain: far below one fetch of the partition's records.
	if asked >= fetchMaxBytes {
		t.Errorf("%d fetches asked for %d bytes to restore a %d-byte chain", len(starts), asked, head.ChainBytes+base.StoredBytes)
	}
}

// TestKafkaChainTopicRecreated: the checkpoint topic is deleted and
// created again under a running store. Its new records sit below where the
// store's index stopped reading; the store notices that the partition ends
// before its index and reads it anew, so a new base and its increments are
// saved and restored as on a fresh topic.
func TestKafkaChainTopicRecreated(t *testing.T) {
	c := testkit.NewCluster(t, kfake.NumBrokers(1))
	s := newKafkaStore(t, c.ListenAddrs(), KafkaOptions{ChunkBytes: 4 << 10, Partitions: 1})
	saveChain(t, s, 0, 10, 3)
	if err := c.DeleteTopic("g-dedup-state"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateTopic("g-dedup-state", 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	metas, _ := saveChain(t, s, 0, 100, 2)
	var a applied
	head, _, err := s.Load(testContext(t), "in", 0, a.decode)
	if err != nil {
		t.Fatal(err)
	}
	if head.Seq != metas[len(metas)-1].Seq || head.Offset != 102 || !slices.Equal(a.seqs(), seqsOf(metas)) {
		t.Errorf("restored head %d at %d, pieces %v; want %d at 102, pieces %v", head.Seq, head.Offset, a.seqs(), metas[len(metas)-1].Seq, seqsOf(metas))
	}
}
