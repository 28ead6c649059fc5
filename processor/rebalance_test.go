package processor

import (
	"context"
	"dedup/processor/partition"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/checkpoint"
	"dedup/internal/testkit"
	"dedup/rotation"
)

// TestGroupBalancerOption: the balancer is named in any case; an unknown
// name is a validation error naming it.
func TestGroupBalancerOption(t *testing.T) {
	e := newTestEnv(t, 1, 1)
	for _, name := range []string{"", "sticky", "RANGE", "RoundRobin"} {
		o := e.options("balancer")
		o.GroupBalancer = name
		if _, err := New(o); err != nil {
			t.Errorf("GroupBalancer %q: %v", name, err)
		}
	}
	o := e.options("balancer")
	o.GroupBalancer = "cooperative-sticky"
	if _, err := New(o); err == nil || !strings.Contains(err.Error(), "cooperative-sticky") {
		t.Errorf("GroupBalancer cooperative-sticky: got %v, want an error naming it", err)
	}
}

// restoresFrom reads dedup_restores_total{source}.
func restoresFrom(r *running, source string) float64 {
	return metricValue(r.p.metrics.Restores.WithLabelValues(source))
}

// TestRestoreScanBounded: after a crash, a restore scans each output
// partition only from the end its snapshot recorded, and only the output
// partitions its input partition routes to: with as many output as input
// partitions and the snapshots of a graceful stop, exactly the outputs the
// crashed member wrote after them, never the history before them nor the
// other partitions'.
func TestRestoreScanBounded(t *testing.T) {
	const parts = 3
	e := newTestEnv(t, parts, parts)
	o := e.storedOptions(t, "bounded")
	out := e.collect()

	// A long history, checkpointed at its end by a graceful stop.
	history := newWorkload(parts, 3000, 1, 11)
	e.checkpointAfter(t, o, history, "history read")

	// A few more records, forwarded by a member that then crashes without
	// a checkpoint.
	recent := newWorkload(parts, 3050, 1, 11) // the same keys first, then 50 new ones
	e.produce(recent.recs...)
	o.Metrics = NewMetrics(newRegistry())
	o.CheckpointInterval = time.Hour
	b := start(t, o)
	b.waitRead(t, "recent read", len(recent.recs))
	forwardedByB := b.p.Progress().Forwarded
	if forwardedByB == 0 || forwardedByB >= uint64(len(history.recs))/10 {
		t.Fatalf("crashed member forwarded %d records; the test needs a few, far fewer than the history", forwardedByB)
	}
	out.until("crashed member's outputs", func(rs []outRec) bool { return uint64(len(rs)) == uint64(len(history.keys))+forwardedByB })
	// A graceful stop leaves snapshots with exact end offsets.
	if n := metricValue(b.p.metrics.RestoreScanned); n != 0 {
		t.Errorf("restore after a graceful stop scanned %v records, want 0", n)
	}
	b.crash(t)

	c := startFresh(t, o)
	c.waitReady(t)
	e.produce(sentinels(parts, t0.Add(time.Hour/2))...)
	all := &workload{parts: parts, keys: recent.keys}
	checkExactlyOnce(t, all, out.untilSentinels(parts))
	if n := metricValue(c.p.metrics.RestoreScanned); n != float64(forwardedByB) {
		t.Errorf("dedup_restore_scanned_records_total = %v, want %d (the outputs written after the snapshots)", n, forwardedByB)
	}
	if err := c.stop(t); err != nil {
		t.Fatal(err)
	}
	if s := c.p.Progress().Suppressed; s != forwardedByB {
		t.Errorf("suppressed %d replayed records, want the %d the crashed member forwarded", s, forwardedByB)
	}
	if n := restoresFrom(c, "latest"); n != parts {
		t.Errorf("dedup_restores_total{source=latest} = %v, want %d", n, parts)
	}
}

// TestTakeKept: a kept pair resumes only in the generation right after the
// one it was kept in and at the committed offset it was kept at; every
// other kept pair is released.
func TestTakeKept(t *testing.T) {
	e := newTestEnv(t, 1, 1)
	p := mustNew(t, e.options("kept"))
	pairs := make([]*rotation.Pair, 4)
	for i := range pairs {
		pairs[i] = &rotation.Pair{}
	}
	p.keep(0, keptPair{Kept: partition.Kept{Pair: pairs[0], Offset: 100}, gen: 7}) // back next generation at its offset: resumes
	p.keep(1, keptPair{Kept: partition.Kept{Pair: pairs[1], Offset: 100}, gen: 6}) // a generation went by: someone else may have owned it
	p.keep(2, keptPair{Kept: partition.Kept{Pair: pairs[2], Offset: 100}, gen: 7}) // committed offset moved
	p.keep(3, keptPair{Kept: partition.Kept{Pair: pairs[3], Offset: 100}, gen: 7}) // not assigned again
	warm := p.takeKept(8, []kafka.PartitionAssignment{{ID: 0, Offset: 100}, {ID: 1, Offset: 100}, {ID: 2, Offset: 120}, {ID: 5, Offset: 0}}, testLogger())
	if len(warm) != 1 || warm[0] == nil || warm[0].Pair != pairs[0] {
		t.Errorf("resumed %v, want only partition 0 with its pair", warm)
	}
	if len(p.kept) != 0 {
		t.Errorf("%d kept pairs still held after the generation started, want none", len(p.kept))
	}
}

// TestWarmKeep: a member's partitions that come straight back after a
// rebalance resume from memory (no store read, no scan); those another
// member processed in between are restored from the store and its replay
// scan. Records flow throughout; every key is forwarded exactly once.
func TestWarmKeep(t *testing.T) {
	const parts = 4
	e := newTestEnv(t, parts, parts)
	o := e.storedOptions(t, "warm")
	out := e.collect()
	a := start(t, o)
	a.waitReady(t)
	if n := restoresFrom(a, "empty"); n != parts {
		t.Fatalf("first member: %v partitions started empty, want %d", n, parts)
	}

	w := newWorkload(parts, 3000, 3, 21)
	third := len(w.recs) / 3
	e.produce(w.recs[:third]...)
	eventually(t, 20*time.Second, "first third read", func() bool { return a.p.Progress().In == uint64(third) })

	// B joins while records flow: with the sticky balancer A keeps half of
	// its partitions, in memory; B restores the other half from the store.
	produced := produceInBackground(t, e, w.recs[third:2*third], 50)
	bo := o
	bo.Metrics = NewMetrics(newRegistry())
	b := start(t, bo)
	eventually(t, 20*time.Second, "both members assigned", func() bool {
		return a.p.Ready() && b.p.Ready() && assignedTo(a) == parts/2 && assignedTo(b) == parts/2
	})
	<-produced
	if n := restoresFrom(a, "memory"); n < parts/2 {
		t.Errorf("A resumed %v partitions from memory after B joined, want at least %d", n, parts/2)
	}
	if n := restoresFrom(a, "latest") + restoresFrom(a, "fallback"); n != 0 {
		t.Errorf("A read %v partitions from the store; it kept each of its partitions", n)
	}
	if n := restoresFrom(b, "latest"); n < parts/2 {
		t.Errorf("B restored %v partitions from the store, want at least %d", n, parts/2)
	}
	eventually(t, 20*time.Second, "second third read", func() bool {
		return a.p.Progress().In+b.p.Progress().In >= uint64(2*third)
	})

	// B leaves: A gets B's partitions back, which B processed in between,
	// so they come from the store (A released their pairs when B took
	// them); A's own resume from memory again.
	memoryBefore := restoresFrom(a, "memory")
	produced = produceInBackground(t, e, w.recs[2*third:], 50)
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "A holds every partition", func() bool { return a.p.Ready() && assignedTo(a) == parts })
	<-produced
	if n := restoresFrom(a, "memory") - memoryBefore; n < parts/2 {
		t.Errorf("A resumed %v partitions from memory after B left, want at least %d", n, parts/2)
	}
	if n := restoresFrom(a, "latest"); n < parts/2 {
		t.Errorf("A restored %v of B's partitions from the store, want %d", n, parts/2)
	}
	e.produce(sentinels(parts, t0.Add(time.Hour/2))...)
	checkExactlyOnce(t, w, out.untilSentinels(parts))
	if n := metricValue(a.p.metrics.RestoreScanned); n != 0 {
		t.Errorf("restores after clean hand-overs scanned %v output records, want 0", n)
	}
}

// prefixed returns w with every key prefixed, so that two workloads can
// share a stream without sharing keys.
func (w *workload) prefixed(prefix string) *workload {
	out := &workload{parts: w.parts, keys: map[string]int32{}}
	for k, p := range w.keys {
		out.keys[prefix+k] = p
	}
	for _, r := range w.recs {
		c := *r
		c.Key = append([]byte(prefix), r.Key...)
		out.recs = append(out.recs, &c)
	}
	return out
}

// addPartitions grows topic to n partitions.
func (e *testEnv) addPartitions(topic string, n int) {
	e.t.Helper()
	c := testkit.KafkaClient(e.t, e.brokers...)
	res, err := c.CreatePartitions(context.Background(), &kafka.CreatePartitionsRequest{
		Topics: []kafka.TopicPartitionsConfig{{Name: topic, Count: int32(n)}},
	})
	if err == nil {
		err = res.Errors[topic]
	}
	if err != nil {
		e.t.Fatalf("add partitions to %s: %v", topic, err)
	}
}

// addInputPartitions grows the input topic to n partitions.
func (e *testEnv) addInputPartitions(n int) {
	e.t.Helper()
	e.addPartitions(inTopic, n)
	// A new producer: the old one's metadata knows the old count.
	prod, err := kgo.NewClient(
		kgo.SeedBrokers(e.brokers...),
		kgo.DefaultProduceTopic(inTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
	)
	if err != nil {
		e.t.Fatalf("producer: %v", err)
	}
	e.t.Cleanup(prod.Close)
	e.prod = prod
}

// TestNewInputPartition: a partition added to the input topic while the
// stage runs is assigned without a restart, checkpointed like the others,
// and its records deduplicated and forwarded; the routing moves from
// keeping partitions to hashing keys (the counts now differ). After a
// crash, restores under the new routing lose and repeat nothing.
func TestNewInputPartition(t *testing.T) {
	e := newTestEnv(t, 2, 2)
	o := e.storedOptions(t, "grow")
	o.PartitionWatchInterval = 100 * time.Millisecond
	out := e.collect()
	a := start(t, o)
	eventually(t, 20*time.Second, "two partitions assigned", func() bool { return a.p.Ready() && assignedTo(a) == 2 })

	before := newWorkload(2, 500, 2, 31).prefixed("before-")
	e.produce(before.recs...)
	a.waitRead(t, "records before the change read", len(before.recs))

	e.addInputPartitions(3)
	eventually(t, 20*time.Second, "the new partition assigned", func() bool { return a.p.Ready() && assignedTo(a) == 3 })
	after := newWorkload(3, 1500, 2, 32).prefixed("after-")
	half := len(after.recs) / 2
	e.produce(after.recs[:half]...)
	eventually(t, 20*time.Second, "first half read", func() bool {
		return a.p.Progress().In == uint64(len(before.recs)+half)
	})
	_, _, err := o.Store.Load(context.Background(), inTopic, 2, func(checkpoint.Meta, io.Reader) error { return nil })
	if err != nil {
		t.Errorf("no checkpoint of the new partition: %v", err)
	}

	// Crash after forwarding the second half, with no checkpoint after it.
	o.CheckpointInterval = time.Hour
	a.crash(t)
	b := startFresh(t, o)
	e.produce(after.recs[half:]...)
	eventually(t, 20*time.Second, "second half read", func() bool { return b.p.Progress().In >= uint64(len(after.recs)-half) })
	b.crash(t)
	c := startFresh(t, o)
	c.waitReady(t)
	e.produce(sentinels(3, t0.Add(time.Hour/2))...)
	all := union(3, before, after)
	got := out.untilSentinels(3)
	checkExactlyOnce(t, all, got)
	if n := metricValue(c.p.metrics.RestoreScanned); n == 0 {
		t.Errorf("the restore after the crash scanned nothing; the test needs outputs to find")
	}
}

// TestWarmKeepMissedGeneration: a member that misses a generation does not
// resume its kept pair, even at the same committed offset. A is kept out
// of the group (its JoinGroup requests refused) while B takes the
// partition, forwards records and dies before committing anything; when A
// gets the partition back, its pair would not know B's keys, so it
// restores from the store instead, whose replay scan finds B's outputs.
// Resuming from memory here would forward them twice.
func TestWarmKeepMissedGeneration(t *testing.T) {
	e := newTestEnv(t, 1, 1)
	o := e.storedOptions(t, "missed")
	out := e.collect()

	ao := o
	ao.SessionTimeout = 1500 * time.Millisecond // tells A's JoinGroup requests apart
	a := start(t, ao)
	a.waitReady(t)
	first := newWorkload(1, 300, 2, 41)
	e.produce(first.recs...)
	a.waitRead(t, "A read the first batch", len(first.recs))

	var refuse atomic.Bool
	refuse.Store(true)
	e.cluster.ControlKey(kmsg.JoinGroup.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		e.cluster.KeepControl()
		req := r.(*kmsg.JoinGroupRequest)
		if !refuse.Load() || req.SessionTimeoutMillis != int32(ao.SessionTimeout/time.Millisecond) {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.Version = req.Version
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp, nil, true
	})

	bo := o
	bo.Metrics = NewMetrics(newRegistry())
	bo.CheckpointInterval = time.Hour // B commits nothing
	b := start(t, bo)
	eventually(t, 20*time.Second, "B alone with the partition", func() bool {
		return b.p.Ready() && assignedTo(b) == 1 && assignedTo(a) == 0
	})
	second := newWorkload(1, 350, 2, 41) // the first batch's keys, then 50 new ones
	e.produce(second.recs...)
	b.waitRead(t, "B read the second batch", len(second.recs))
	forwardedByB := b.p.Progress().Forwarded
	if forwardedByB == 0 {
		t.Fatal("B forwarded nothing; the test would prove nothing")
	}
	out.until("B's outputs", func(rs []outRec) bool { return uint64(len(rs)) == uint64(len(first.keys))+forwardedByB })
	b.crash(t)

	memory := restoresFrom(a, "memory")
	refuse.Store(false)
	eventually(t, 20*time.Second, "A back with the partition", func() bool { return a.p.Ready() && assignedTo(a) == 1 })
	if n := restoresFrom(a, "memory") - memory; n != 0 {
		t.Errorf("A resumed its kept pair %v times after missing a generation", n)
	}
	if n := restoresFrom(a, "latest"); n != 1 {
		t.Errorf("A restored %v times from the store, want 1", n)
	}
	e.produce(sentinels(1, t0.Add(time.Hour/2))...)
	checkExactlyOnce(t, second, out.untilSentinels(1))
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	if s := a.p.Progress().Suppressed; s != forwardedByB {
		t.Errorf("A suppressed %d replayed records, want the %d B forwarded", s, forwardedByB)
	}
}
