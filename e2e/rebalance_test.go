package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/internal/testkit"
)

// produceRange writes w.recs[lo:hi] synchronously and records their input
// offsets: for tests that need the input to stop at a chosen point.
func produceRange(t *testing.T, brokers string, w *workload, lo, hi int) {
	t.Helper()
	cl := newProducerClient(t, brokers)
	defer cl.Close()
	input := namesOf(t).input
	const batch = 500
	for b := lo; b < hi; b += batch {
		rs := make([]*kgo.Record, 0, batch)
		index := map[*kgo.Record]int{}
		for i := b; i < min(b+batch, hi); i++ {
			r := &w.recs[i]
			kr := &kgo.Record{
				Topic: input, Partition: r.partition, Key: []byte(r.key), Value: []byte(r.value), Timestamp: r.ts,
				Headers: []kgo.RecordHeader{{Key: "e2e-seq", Value: []byte(strconv.Itoa(i))}},
			}
			index[kr] = i
			rs = append(rs, kr)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res := cl.ProduceSync(ctx, rs...)
		cancel()
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce records %d..%d: %v", b, min(b+batch, hi), err)
		}
		for _, r := range res {
			w.recs[index[r.Record]].offset = r.Record.Offset
		}
	}
}

// metric scrapes p and sums one family over the series matching match.
func metric(t *testing.T, p *proc, name string, match map[string]string) float64 {
	t.Helper()
	v, _ := sum(mustScrape(t, p), name, match)
	return v
}

// outputEnd is the sum of the output partitions' end offsets: every output
// record ever written.
func outputEnd(t *testing.T, brokers string) int64 {
	t.Helper()
	ends, err := endOffsets(brokers, namesOf(t).output)
	if err != nil {
		t.Fatalf("list output end offsets: %v", err)
	}
	var n int64
	for _, e := range ends {
		n += e
	}
	return n
}

// TestBoundedRestoreScan: after a crash, the restore reads only what was
// written to the output after the snapshots, not the long history before
// them (dedup_restore_scanned_records_total).
func TestBoundedRestoreScan(t *testing.T) {
	sc := newScenario(t, 30000)
	brokers, w, obs := sc.brokers, sc.w, sc.obs
	env := stageEnv(t, brokers, "file")

	// A long history, checkpointed at its end by a graceful stop.
	history := len(w.recs) - numPartitions - 1500
	a := startProc(t, "dedup-history", env)
	produceRange(t, brokers, w, 0, history)
	obs.waitProgress(t, 60*time.Second, int64(w.firstsBefore[history]), "the history forwarded", func() error { return alive(a) })
	a.termOK(t)
	historyOut := outputEnd(t, brokers)

	// A member without periodic checkpoints forwards the tail and is
	// SIGKILLed: its outputs are all the restore has to find.
	tailEnv := cloneEnv(env)
	tailEnv["CHECKPOINT_INTERVAL"] = "1h"
	b := startProc(t, "dedup-tail", tailEnv)
	waitReady(t, b, 30*time.Second)
	// A graceful stop leaves snapshots with exact end offsets.
	scannedByB := metric(t, b, "dedup_restore_scanned_records_total", nil)
	if scannedByB != 0 {
		t.Errorf("restore after a graceful stop scanned %v records, want 0", scannedByB)
	}
	produceRange(t, brokers, w, history, len(w.recs))
	obs.waitSentinels(t, 60*time.Second, func() error { return alive(b) })
	waitLagZero(t, b)
	b.kill(t)
	tailOut := outputEnd(t, brokers) - historyOut
	if tailOut == 0 || tailOut*5 > historyOut {
		t.Fatalf("%d outputs after the snapshots against a history of %d: the test needs a short tail", tailOut, historyOut)
	}

	c := startProc(t, "dedup-restored", env)
	waitReady(t, c, 30*time.Second)
	if n := metric(t, c, "dedup_restore_scanned_records_total", nil); n != float64(tailOut) {
		t.Errorf("dedup_restore_scanned_records_total = %v, want %d (the outputs written after the snapshots; the history holds %d)", n, tailOut, historyOut)
	}
	if n := metric(t, c, "dedup_restores_total", map[string]string{"source": "latest"}); n != numPartitions {
		t.Errorf("dedup_restores_total{source=latest} = %v, want %d", n, numPartitions)
	}
	t.Logf("history %d outputs, tail %d outputs, restores scanned %v and %v", historyOut, tailOut, scannedByB, metric(t, c, "dedup_restore_scanned_records_total", nil))
	c.termOK(t)
	verify(t, w, obs.drain(t, brokers))
}

// joined returns the partitions of p's latest generation, from its JSON log.
func joined(t *testing.T, p *proc) (gen int, parts []int) {
	t.Helper()
	f, err := os.Open(p.logPath)
	if err != nil {
		t.Fatalf("open log of %s: %v", p.name, err)
	}
	defer f.Close()
	gen = -1
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l struct {
			Msg        string `json:"msg"`
			Generation int    `json:"generation"`
			Partitions []int  `json:"partitions"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "generation joined" {
			gen, parts = l.Generation, l.Partitions
		}
	}
	return gen, parts
}

// waitOwners waits until the group is settled around ps and each member's
// log names the same, latest generation, and returns who owns what.
func waitOwners(t *testing.T, guard func() error, ps ...*proc) [][]int {
	t.Helper()
	var owned [][]int
	waitSettled(t, 30*time.Second, guard, ps...)
	waitFor(t, 30*time.Second, "every member's log to name the same generation", func() error {
		owned = owned[:0]
		first := -2
		for _, p := range ps {
			g, parts := joined(t, p)
			if first == -2 {
				first = g
			}
			if g != first {
				return fmt.Errorf("%w: generations %d and %d", errNotYet, first, g)
			}
			owned = append(owned, parts)
		}
		var all []int
		for _, o := range owned {
			all = append(all, o...)
		}
		if slices.Sort(all); !slices.Equal(all, []int{0, 1, 2}) {
			return fmt.Errorf("%w: owned %v", errNotYet, owned)
		}
		return nil
	})
	return owned
}

// TestStickyWarmRebalance: with the default sticky balancer, a third
// member joining takes partitions only from the others' surplus: each of
// the two keeps a subset of what it had, and resumes those from memory
// (dedup_restores_total{source="memory"}) without reading the store. When
// the third leaves again, its partition goes back to a member that
// released its pair when it gave the partition up; that one is restored
// from the store (the other member processed it in between). Records flow
// throughout; nothing is lost or forwarded twice.
func TestStickyWarmRebalance(t *testing.T) {
	sc := newScenario(t, 40000)
	brokers, w, obs := sc.brokers, sc.w, sc.obs
	var env [3]map[string]string
	for i := range env {
		env[i] = stageEnv(t, brokers, "kafka")
		env[i]["LOG_FORMAT"] = "json"
	}
	a := startProc(t, "dedup-A", env[0])
	b := startProc(t, "dedup-B", env[1])
	pr := startProducer(t, brokers, w, obs, 1500)
	guard := func() error { return errors.Join(pr.check(), alive(a, b)) }
	before := waitOwners(t, guard, a, b)
	obs.waitProgress(t, 60*time.Second, int64(w.nFirsts/4), "a quarter of the keys forwarded", guard)
	memA := metric(t, a, "dedup_restores_total", map[string]string{"source": "memory"})
	memB := metric(t, b, "dedup_restores_total", map[string]string{"source": "memory"})
	fromStore := func(p *proc) float64 {
		return metric(t, p, "dedup_restores_total", map[string]string{"source": "latest"}) +
			metric(t, p, "dedup_restores_total", map[string]string{"source": "fallback"})
	}
	storeA, storeB := fromStore(a), fromStore(b)

	c := startProc(t, "dedup-C", env[2])
	guard3 := func() error { return errors.Join(pr.check(), alive(a, b, c)) }
	after := waitOwners(t, guard3, a, b, c)
	t.Logf("owners before the join %v, after %v", before, after)
	for i, name := range []string{"A", "B"} {
		if !testkit.Subset(after[i], before[i]) {
			t.Errorf("%s held %v and now holds %v: not a subset", name, before[i], after[i])
		}
	}
	kept := func(p *proc, before float64) float64 {
		return metric(t, p, "dedup_restores_total", map[string]string{"source": "memory"}) - before
	}
	if n, want := kept(a, memA)+kept(b, memB), len(after[0])+len(after[1]); n < float64(want) {
		t.Errorf("A and B resumed %v partitions from memory, want at least the %d they kept", n, want)
	}
	if n := fromStore(a) - storeA + fromStore(b) - storeB; n != 0 {
		t.Errorf("A and B read %v partitions from the store after C joined; they only got their own back", n)
	}

	// C processes its partition, then leaves: whoever gets it back had
	// released its pair, so it comes from the store.
	obs.waitProgress(t, 60*time.Second, int64(w.nFirsts/2), "half of the keys forwarded", guard3)
	storeA, storeB = fromStore(a), fromStore(b)
	c.termOK(t)
	final := waitOwners(t, guard, a, b)
	if n := fromStore(a) - storeA + fromStore(b) - storeB; n < float64(len(after[2])) {
		t.Errorf("the partitions C gave back (%v) were restored from the store %v times, want at least %d", after[2], n, len(after[2]))
	}
	t.Logf("owners after C left %v", final)

	pr.waitDone(t, 90*time.Second, guard)
	obs.waitSentinels(t, 60*time.Second, guard)
	a.sigterm(t)
	b.sigterm(t)
	a.waitTermOK(t)
	b.waitTermOK(t)
	verify(t, w, obs.drain(t, brokers))
}

// TestInputPartitionAdded: a partition added to the input topic while the
// stage runs is consumed without a restart (within the partition watch
// interval), its records deduplicated and forwarded, while the others go
// on; nothing is lost or forwarded twice, neither on the old partitions
// nor on the new one.
func TestInputPartitionAdded(t *testing.T) {
	sc := newScenario(t, 20000)
	brokers, w, obs := sc.brokers, sc.w, sc.obs
	input := namesOf(t).input
	p := startProc(t, "dedup", stageEnv(t, brokers, "kafka"))
	pr := startProducer(t, brokers, w, obs, 1500)
	guard := func() error { return errors.Join(pr.check(), alive(p)) }
	obs.waitProgress(t, 60*time.Second, int64(w.nFirsts/3), "a third of the keys forwarded", guard)

	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = input, numPartitions+1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	var err error
	for _, r := range testkit.Request(t, brokers, "add a partition", req).(*kmsg.CreatePartitionsResponse).Topics {
		err = errors.Join(err, kerr.ErrorForCode(r.ErrorCode))
	}
	if err != nil {
		t.Fatalf("add a partition to %s: %v", input, err)
	}

	// Records on the new partition: keys of their own, each three times.
	const newPartition = numPartitions
	var added []*kgo.Record
	for i := range 300 {
		for d := range 3 {
			added = append(added, &kgo.Record{
				Topic: input, Partition: newPartition, Key: []byte(fmt.Sprintf("new-%04d", i)),
				Value: []byte(fmt.Sprintf("new-%04d-%d", i, d)), Timestamp: time.Now(),
			})
		}
	}
	prod, err := kgo.NewClient(seedBrokers(brokers), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	waitFor(t, 30*time.Second, "the producer to see the new partition", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := prod.ProduceSync(ctx, added[:3]...).FirstErr(); err != nil {
			prod.ForceMetadataRefresh()
			return fmt.Errorf("%w: %v", errNotYet, err)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err = prod.ProduceSync(ctx, added[3:]...).FirstErr()
	cancel()
	if err != nil {
		t.Fatalf("produce to the new partition: %v", err)
	}
	waitFor(t, 60*time.Second, "the new partition assigned", func() error {
		if err := guard(); err != nil {
			return err
		}
		if n := metric(t, p, "dedup_assigned_partitions", nil); n != numPartitions+1 {
			return fmt.Errorf("%w: %v partitions assigned", errNotYet, n)
		}
		return nil
	})

	pr.waitDone(t, 90*time.Second, guard)
	obs.waitSentinels(t, 60*time.Second, guard)
	waitFor(t, 60*time.Second, "the new partition's keys forwarded", func() error {
		if err := guard(); err != nil {
			return err
		}
		obs.mu.Lock()
		defer obs.mu.Unlock()
		n := 0
		for k := range obs.keys {
			if strings.HasPrefix(k, "new-") {
				n++
			}
		}
		if n < 300 {
			return fmt.Errorf("%w: %d of 300 keys", errNotYet, n)
		}
		return nil
	})
	p.termOK(t)
	out := obs.drain(t, brokers)
	var old []outRecord
	copies := map[string]int{}
	for _, o := range out {
		if !strings.HasPrefix(o.key, "new-") {
			old = append(old, o)
			continue
		}
		copies[o.key]++
		if want := o.key + "-0"; o.value != want || o.headers[hdrSourcePartition] != strconv.Itoa(newPartition) {
			t.Errorf("%s: want value %s from input partition %d", o, want, newPartition)
		}
	}
	for i := range 300 {
		if k := fmt.Sprintf("new-%04d", i); copies[k] != 1 {
			t.Errorf("key %s of the new partition in the output %d times, want once", k, copies[k])
		}
	}
	verify(t, w, old)
}
