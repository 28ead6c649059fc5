package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/internal/testkit"
)

const (
	// The repartition topic on kfake; against an external cluster each
	// test has its own (namesOf).
	repartitionTopic = "events-by-id"
	retractHeader    = "dedup-retract"
)

// repartitionInput is input whose record keys are random or absent, the
// dedup id in a JSON field: copies of each id on different input
// partitions, records without the field (unkeyed), and retraction cycles
// (an id, its retraction, the id again) on one input partition each.
type repartitionInput struct {
	recs     []*kgo.Record       // Topic set by produce: the test's input topic
	ids      map[string]bool     // ids with copies: forwarded once
	unkeyed  map[string]bool     // values: forwarded once each
	cycles   map[string][]string // id -> the values of its cycle, in order: all forwarded, in order
	produced int
}

func newRepartitionInput(rng *rand.Rand, ids, unkeyed, cycles int, base time.Time) *repartitionInput {
	in := &repartitionInput{ids: map[string]bool{}, unkeyed: map[string]bool{}, cycles: map[string][]string{}}
	var recs []*kgo.Record
	key := func() []byte {
		if rng.IntN(3) == 0 {
			return nil
		}
		return fmt.Appendf(nil, "user-%d", rng.IntN(500))
	}
	for i := range ids {
		id := fmt.Sprintf("id-%d", i)
		in.ids[id] = true
		copies := 2 + rng.IntN(2)
		first := rng.IntN(numPartitions)
		for c := range copies {
			recs = append(recs, &kgo.Record{Partition: int32((first + c) % numPartitions), Key: key(),
				Value: fmt.Appendf(nil, `{"id":%q,"copy":%d}`, id, c)})
		}
	}
	for i := range unkeyed {
		v := fmt.Sprintf(`{"unkeyed":%d}`, i)
		in.unkeyed[v] = true
		recs = append(recs, &kgo.Record{Partition: int32(rng.IntN(numPartitions)), Key: key(), Value: []byte(v)})
	}
	rng.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
	// Retraction cycles go in at random places, each step after the one
	// before, on one input partition: their order holds across the hops.
	for i := range cycles {
		id := fmt.Sprintf("cycle-%d", i)
		p := int32(rng.IntN(numPartitions))
		at := rng.IntN(len(recs) + 1)
		for step, name := range []string{"first", "retract", "again"} {
			v := fmt.Sprintf(`{"id":%q,"step":%q}`, id, name)
			in.cycles[id] = append(in.cycles[id], v)
			r := &kgo.Record{Partition: p, Key: key(), Value: []byte(v)}
			if name == "retract" {
				r.Headers = []kgo.RecordHeader{{Key: retractHeader, Value: []byte("1")}}
			}
			at = min(len(recs), at+step*rng.IntN(50))
			recs = append(recs[:at], append([]*kgo.Record{r}, recs[at:]...)...)
			at++
		}
	}
	for i, r := range recs {
		r.Timestamp = base.Add(time.Duration(i) * time.Millisecond)
	}
	in.recs = recs
	return in
}

// produce writes the next n records (all that are left when fewer) to t's
// input topic.
func (in *repartitionInput) produce(t *testing.T, cl *kgo.Client, n int) {
	t.Helper()
	end := min(len(in.recs), in.produced+n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	input := namesOf(t).input
	for _, r := range in.recs[in.produced:end] {
		r.Topic = input
	}
	for i := in.produced; i < end; i += 200 {
		if err := cl.ProduceSync(ctx, in.recs[i:min(i+200, end)]...).FirstErr(); err != nil {
			t.Fatalf("produce input: %v", err)
		}
	}
	in.produced = end
}

// verify checks the output: every id with copies once, every unkeyed
// record once, every retraction cycle whole and in order, source headers
// naming the input record and the input key kept.
func (in *repartitionInput) verify(t *testing.T, out []outRecord) {
	t.Helper()
	where := map[string]*kgo.Record{}
	for _, r := range in.recs {
		where[string(r.Value)] = r
	}
	ids, unkeyed := map[string]int{}, map[string]int{}
	cycles := map[string][]outRecord{}
	for _, o := range out {
		if strings.HasPrefix(o.key, sentinelPrefix) {
			continue
		}
		r, ok := where[o.value]
		if !ok {
			t.Errorf("%v was never input", o)
			continue
		}
		if o.headers[hdrSourceTopic] != r.Topic || o.headers[hdrSourcePartition] != strconv.Itoa(int(r.Partition)) ||
			o.headers[hdrSourceOffset] != strconv.FormatInt(r.Offset, 10) {
			t.Errorf("%v: want source %s/%d@%d", o, r.Topic, r.Partition, r.Offset)
		}
		if o.key != string(r.Key) {
			t.Errorf("%v: want the input key %q", o, r.Key)
		}
		switch {
		case in.unkeyed[o.value]:
			unkeyed[o.value]++
		case strings.Contains(o.value, `"step"`):
			id := o.value[7 : strings.IndexByte(o.value[7:], '"')+7]
			cycles[id] = append(cycles[id], o)
		default:
			id := o.value[7 : strings.IndexByte(o.value[7:], '"')+7]
			ids[id]++
		}
	}
	testkit.ForwardedOnce(t, "", in.ids, ids)
	testkit.ForwardedOnce(t, "unkeyed ", in.unkeyed, unkeyed)
	for id, want := range in.cycles {
		got := cycles[id]
		var vs []string
		for i, o := range got {
			vs = append(vs, o.value)
			if i > 0 && (o.partition != got[i-1].partition || o.offset < got[i-1].offset) {
				t.Errorf("%s: %v out of order after %v", id, o, got[i-1])
			}
		}
		if strings.Join(vs, " ") != strings.Join(want, " ") {
			t.Errorf("retraction cycle %s: output %v, want %v", id, vs, want)
		}
	}
	t.Logf("verified %d ids with copies, %d unkeyed records, %d retraction cycles in %d output records",
		len(in.ids), len(in.unkeyed), len(in.cycles), len(out))
}

// hop1Settled waits until the live processes' first hops hold every input
// partition and have sent something in their generation (a kill then
// never lands while a JoinGroup of hop 1 is in flight, see waitSettled),
// and their second hops hold every repartition partition.
func hop1Settled(t *testing.T, guard func() error, ps ...*proc) {
	t.Helper()
	waitSettled(t, 60*time.Second, guard, ps...)
	waitFor(t, 60*time.Second, "hop 1 to own every input partition", func() error {
		if err := guard(); err != nil {
			return err
		}
		_, series, err := sumAcross(ps, "dedup_repartition_input_lag", map[string]string{"topic": namesOf(t).input})
		if err != nil {
			return err
		}
		if series != numPartitions {
			return fmt.Errorf("%w: hop 1 shows %d of %d input partitions", errNotYet, series, numPartitions)
		}
		return nil
	})
}

// TestRepartitionCrash: the built binary with REPARTITION_TOPIC, input keyed
// at random or not at all and the dedup id in a JSON field. Three SIGKILLs
// while it works, and a second member that joins and leaves (SIGTERM): every
// id is forwarded exactly once, every unkeyed record once, every retraction
// cycle whole and in order, with source headers naming the input. Both
// checkpoint stores.
func TestRepartitionCrash(t *testing.T) {
	for _, store := range []string{"file", "kafka"} {
		t.Run(store, func(t *testing.T) { testRepartitionCrash(t, store) })
	}
}

func testRepartitionCrash(t *testing.T, store string) {
	rng := newRand(testSeed(t))
	_, brokers := newCluster(t)
	n := namesOf(t)
	obs := startObserver(t, brokers)
	in := newRepartitionInput(rng, 2000, 300, 40, time.Now().Truncate(time.Millisecond))
	cl, err := kgo.NewClient(seedBrokers(brokers), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)

	env := stageEnv(t, brokers, store)
	env["REPARTITION_TOPIC"] = n.repartition
	env["DEDUP_KEY"] = "json:id"
	env["DEDUP_RETRACT_HEADER"] = retractHeader
	var names procSet
	p := startProc(t, names.next("dedup"), env)
	var q *proc
	guard := func() error {
		if q != nil && !q.stopped {
			return alive(p, q)
		}
		return alive(p)
	}
	step := len(in.recs) / 6
	// kill SIGKILLs p while it works on the chunk just produced and starts
	// its successor.
	kill := func(i int, others ...*proc) {
		before := obs.count()
		waitFor(t, 60*time.Second, "output progress before the kill", func() error {
			if err := guard(); err != nil {
				return err
			}
			if obs.count() <= before {
				return errNotYet
			}
			return nil
		})
		p.kill(t)
		t.Logf("SIGKILL %d: %s; %d output records, %d of %d input records produced", i, p.name, obs.count(), in.produced, len(in.recs))
		p = startProc(t, names.next("dedup"), env)
		hop1Settled(t, guard, append([]*proc{p}, others...)...)
	}

	hop1Settled(t, guard, p)
	in.produce(t, cl, step)
	in.produce(t, cl, step)
	kill(1)
	q = startProc(t, names.next("dedup"), env) // a member joins
	hop1Settled(t, guard, p, q)
	in.produce(t, cl, step)
	kill(2, q)
	in.produce(t, cl, step)
	hop1Settled(t, guard, p, q)
	q.termOK(t) // and leaves
	hop1Settled(t, guard, p)
	in.produce(t, cl, step)
	kill(3)
	in.produce(t, cl, len(in.recs))

	// Hop 1 has everything acknowledged once its group committed the
	// input's end; sentinels written straight to each repartition
	// partition then come after every record of the input there.
	ends, err := endOffsets(brokers, n.input)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, "hop 1 to commit the end of the input", func() error {
		if err := guard(); err != nil {
			return err
		}
		c := committed(t, brokers, n.group+"-repartition")
		for part, end := range ends {
			if c[part] < end {
				return fmt.Errorf("%w: partition %d committed %d of %d", errNotYet, part, c[part], end)
			}
		}
		return nil
	})
	for part := range int32(numPartitions) {
		s := &kgo.Record{Topic: n.repartition, Partition: part, Key: fmt.Appendf(nil, "%s%d", sentinelPrefix, part),
			Value: fmt.Appendf(nil, `{"id":"sentinel-%d"}`, part)}
		if err := cl.ProduceSync(context.Background(), s).FirstErr(); err != nil {
			t.Fatalf("produce sentinel: %v", err)
		}
	}
	obs.waitSentinels(t, 60*time.Second, guard)
	p.termOK(t)
	out := obs.drain(t, brokers)
	in.verify(t, out)
}
