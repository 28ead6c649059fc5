package checkpoint

import (
	"dedup/internal/kfaketest"
	"dedup/internal/testkit"
	"errors"
	"io"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// emptyFetches makes the broker answer fetches of topic number skip+1 to
// skip+n (counted from now) with no records and a throttle, as a broker
// under quota or a follower catching up does; n < 0 means every one from
// skip+1 on. It returns the count of fetches of topic seen.
func emptyFetches(c *kfake.Cluster, topic string, skip, n int) *atomic.Int64 {
	var seen atomic.Int64
	c.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.FetchRequest)
		if len(req.Topics) != 1 || req.Topics[0].Topic != topic {
			return nil, nil, false
		}
		i := int(seen.Add(1))
		if i <= skip || (n >= 0 && i > skip+n) {
			return nil, nil, false
		}
		res := kfaketest.FetchResponse(req, func(rp *kmsg.FetchRequestTopicPartition, p *kmsg.FetchResponseTopicPartition) {
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = rp.FetchOffset, rp.FetchOffset, 0
		})
		res.ThrottleMillis = 5
		return res, nil, true
	})
	return &seen
}

func newControlledCluster(t *testing.T, opts ...kfake.Opt) (*kfake.Cluster, []string) {
	t.Helper()
	c := testkit.NewCluster(t, append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	return c, c.ListenAddrs()
}

// TestScanOutputSurvivesEmptyFetches: empty answers at the first fetch of
// the scan, at the second partition's and at both are waited out; the
// scan finds everything.
func TestScanOutputSurvivesEmptyFetches(t *testing.T) {
	for _, tc := range []struct {
		name    string
		skip, n int
	}{{"first fetch", 0, 3}, {"second partition", 1, 4}, {"every fetch at first", 0, 8}} {
		t.Run(tc.name, func(t *testing.T) {
			c, brokers := newControlledCluster(t, kfake.SeedTopics(2, "out"))
			var recs []outRecord
			want := map[int64]struct{}{}
			for off := range int64(40) {
				recs = append(recs, forwarded(int(off%2), "in", 0, off))
				want[off] = struct{}{}
			}
			writeOutput(t, brokers, recs)
			seen := emptyFetches(c, "out", tc.skip, tc.n)
			got, err := ScanOutput(testContext(t), ScanOptions{
				Brokers: brokers, OutputTopic: "out", From: map[int]int64{0: 0, 1: 0},
				SourceTopic: "in", SourcePartition: 0,
				HeaderTopic: hTopic, HeaderPartition: hPartition, HeaderOffset: hOffset,
			})
			if err != nil {
				t.Fatalf("scan: %v", err)
			}
			if !maps.Equal(got.Forwarded, want) {
				t.Errorf("scan found %d offsets %v, want all %d", len(got.Forwarded), slices.Sorted(maps.Keys(got.Forwarded)), len(want))
			}
			if s := seen.Load(); s < int64(tc.skip+tc.n+1) {
				t.Errorf("%d fetches of out: the empty answers were not all given", s)
			}
		})
	}
}

// TestScanOutputFailsLoudly: a partition that answers nothing past the
// patience fails the scan with a *ReadError naming where it stopped.
func TestScanOutputFailsLoudly(t *testing.T) {
	c, brokers := newControlledCluster(t, kfake.SeedTopics(1, "out"))
	var recs []outRecord
	for off := range int64(10) {
		recs = append(recs, forwarded(0, "in", 0, off))
	}
	writeOutput(t, brokers, recs)
	emptyFetches(c, "out", 0, -1)
	got, err := ScanOutput(testContext(t), ScanOptions{
		Brokers: brokers, OutputTopic: "out", From: map[int]int64{0: 0},
		SourceTopic: "in", SourcePartition: 0, Patience: 200 * time.Millisecond,
		HeaderTopic: hTopic, HeaderPartition: hPartition, HeaderOffset: hOffset,
	})
	var rerr *ReadError
	if !errors.As(err, &rerr) {
		t.Fatalf("scan returned %d offsets and err %v, want a *ReadError", len(got.Forwarded), err)
	}
	if rerr.Topic != "out" || rerr.Partition != 0 || rerr.Reached != 0 || rerr.Target != 10 || !errors.Is(err, errEmptyFetch) {
		t.Errorf("read error %+v (%v), want out/0 stopped at 0 of 10 after empty fetches", *rerr, err)
	}
}

// TestKafkaLoadSurvivesEmptyFetches: empty answers while the index is read
// and while the chunks are read do not make Load miss the newest snapshot.
func TestKafkaLoadSurvivesEmptyFetches(t *testing.T) {
	for _, skip := range []int{0, 1, 2} {
		c, brokers := newControlledCluster(t)
		w := newKafkaStore(t, brokers, KafkaOptions{Topic: "state", ChunkBytes: 4 << 10})
		st := newState(7, 64<<10)
		mustSave(t, w, testMeta("in", 0, 10), newState(6, 64<<10))
		saved := mustSave(t, w, testMeta("in", 0, 20), st)
		r := newKafkaStore(t, brokers, KafkaOptions{Topic: "state"}) // a fresh index: reads everything
		emptyFetches(c, "state", skip, 3)
		var got []byte
		var meta Meta
		m, _, err := r.Load(testContext(t), "in", 0, collect(&got, &meta))
		if err != nil {
			t.Fatalf("skip %d: load: %v", skip, err)
		}
		if m.Seq != saved.Seq || string(got) != string(st) {
			t.Errorf("skip %d: loaded seq %d (%d bytes), want the newest, seq %d", skip, m.Seq, len(got), saved.Seq)
		}
	}
}

// TestKafkaLoadFailsLoudly: an index read that cannot reach the end fails
// Load with a *ReadError instead of answering from part of the index.
func TestKafkaLoadFailsLoudly(t *testing.T) {
	c, brokers := newControlledCluster(t)
	w := newKafkaStore(t, brokers, KafkaOptions{Topic: "state"})
	mustSave(t, w, testMeta("in", 0, 10), newState(6, 1000))
	r := newKafkaStore(t, brokers, KafkaOptions{Topic: "state", Patience: 200 * time.Millisecond})
	emptyFetches(c, "state", 0, -1)
	_, _, err := r.Load(testContext(t), "in", 0, func(Meta, io.Reader) error { return nil })
	var rerr *ReadError
	if !errors.As(err, &rerr) || rerr.Topic != "state" || rerr.Target == 0 {
		t.Fatalf("load: %v, want a *ReadError on state", err)
	}
	if errors.Is(err, ErrNotFound) {
		t.Errorf("load reported %v: a failed read is not an empty store", err)
	}
}
