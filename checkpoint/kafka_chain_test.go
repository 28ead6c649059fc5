package checkpoint

import (
	"sync/atomic"
	"testing"

	"github.com/segmentio/kafka-go"
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

func TestKafkaChainRoundTrip(t *testing.T) {
	brokers := newCluster(t)
	s := newKafkaStore(t, brokers, KafkaOptions{ChunkBytes: 4 << 10})
	checkChainRoundTrip(t, s, kafkaHooks(brokers, s, 0))
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
	brokers := newCluster(t)
	s := newKafkaStore(t, brokers, KafkaOptions{ChunkBytes: 4 << 10})
	checkChainCut(t, s, kafkaHooks(brokers, s, 0), false)
}

func TestKafkaChainMissingIncrement(t *testing.T) {
	brokers := newCluster(t)
	s := newKafkaStore(t, brokers, KafkaOptions{ChunkBytes: 4 << 10})
	checkChainCut(t, s, kafkaHooks(brokers, s, 0), true)
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
	brokers := newCluster(t)
	s := newKafkaStore(t, brokers, KafkaOptions{ChunkBytes: 1 << 10})
	checkChainCrash(t, s, kafkaHooks(brokers, s, 0))
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

// A chain's increments are read in one pass, not one fetch each.
func TestKafkaChainReadInOnePass(t *testing.T) {
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
