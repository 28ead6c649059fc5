package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/internal/testkit"
)

// inRecord is one input record the generator produces.
type inRecord struct {
	key       string
	value     string
	ts        time.Time
	partition int32
	offset    int64 // input offset, known once produced
	first     bool  // first occurrence of key: the only one the output may hold
}

// workload is a keyed input stream with duplicates whose expected output the
// generator knows: exactly one record (the first occurrence) per distinct
// key. All duplicates lie within seconds of their first occurrence, far
// inside DEDUP_WINDOW, so there is no "either" zone. The last
// numPartitions records are sentinels, one per partition: seeing them all in
// the output means the stage has read every input.
type workload struct {
	recs         []inRecord
	firstsBefore []int // firstsBefore[i]: first occurrences among recs[:i]
	nFirsts      int
}

const sentinelPrefix = "sentinel-"

// newWorkload builds n records plus the sentinels. About 60% of records carry
// a new key; the rest repeat a key drawn from the last 2,000 distinct ones
// (sometimes the very last, so that duplicates share a produce batch).
// Timestamps are base + i ms: monotonic event time.
func newWorkload(rng *rand.Rand, n int, base time.Time) *workload {
	w := &workload{recs: make([]inRecord, 0, n+numPartitions)}
	var keys []string
	add := func(key string, partition int32, first bool) {
		i := len(w.recs)
		w.recs = append(w.recs, inRecord{
			key:       key,
			value:     fmt.Sprintf("v%d", i),
			ts:        base.Add(time.Duration(i) * time.Millisecond),
			partition: partition,
			offset:    -1,
			first:     first,
		})
	}
	for i := 0; i < n; i++ {
		switch {
		case len(keys) == 0 || rng.Float64() < 0.6:
			k := fmt.Sprintf("k%07d", len(keys))
			keys = append(keys, k)
			add(k, partitionOf(k), true)
		case rng.IntN(10) == 0:
			k := keys[len(keys)-1]
			add(k, partitionOf(k), false)
		default:
			lo := max(0, len(keys)-2000)
			k := keys[lo+rng.IntN(len(keys)-lo)]
			add(k, partitionOf(k), false)
		}
	}
	for p := int32(0); p < numPartitions; p++ {
		add(fmt.Sprintf("%s%d", sentinelPrefix, p), p, true)
	}
	return w.counted()
}

// counted fills firstsBefore and nFirsts from w.recs.
func (w *workload) counted() *workload {
	w.firstsBefore = make([]int, len(w.recs)+1)
	for i, r := range w.recs {
		w.firstsBefore[i+1] = w.firstsBefore[i]
		if r.first {
			w.firstsBefore[i+1]++
		}
	}
	w.nFirsts = w.firstsBefore[len(w.recs)]
	return w
}

// partitionOf routes a key to an input partition. The test chooses the
// partition itself so that sentinels can be placed one per partition; every
// record of one key lands in one partition, as with any key partitioner.
func partitionOf(key string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int32(h.Sum32() % numPartitions)
}

func (w *workload) dups() int { return len(w.recs) - w.nFirsts }

// producer writes the workload with an idempotent kgo client, so the input
// itself holds no accidental duplicates. It stays at most maxAhead first
// occurrences ahead of the output the observer has seen: the input keeps
// flowing while the stage runs, and kills land in the middle of the stream
// rather than after it.
type producer struct {
	topic     string // the input topic
	w         *workload
	obs       *observer
	maxAhead  int
	perSecond int          // records released per second; 0: no pacing
	limit     atomic.Int64 // records beyond this index wait
	burst     atomic.Int64 // records up to this index ignore the pace
	produced  atomic.Int64
	done      chan struct{}
	err       error
}

func startProducer(t *testing.T, brokers string, w *workload, obs *observer, maxAhead int) *producer {
	t.Helper()
	return startPacedProducer(t, brokers, w, obs, maxAhead, 0)
}

// startPacedProducer is startProducer that also releases at most perSecond
// records per second (when positive), so that the input keeps arriving for a
// known while instead of as fast as the broker takes it, and never produces
// past pr.limit (all records until lowered; see nemesisRun.hold).
func startPacedProducer(t *testing.T, brokers string, w *workload, obs *observer, maxAhead, perSecond int) *producer {
	t.Helper()
	cl := newProducerClient(t, brokers)
	ctx, cancel := context.WithCancel(context.Background())
	pr := &producer{topic: namesOf(t).input, w: w, obs: obs, maxAhead: maxAhead, perSecond: perSecond, done: make(chan struct{})}
	pr.limit.Store(int64(len(w.recs)))
	go func() {
		defer close(pr.done)
		pr.err = pr.run(ctx, cl)
	}()
	t.Cleanup(func() {
		cancel()
		<-pr.done
		cl.Close()
	})
	return pr
}

// held reports whether the batch ending at record hi must wait: too far
// ahead of the output, of the pace, or of the limit.
func (pr *producer) held(hi int, start time.Time) bool {
	if pr.w.firstsBefore[hi]-int(pr.obs.progress()) > pr.maxAhead || int64(hi) > pr.limit.Load() {
		return true
	}
	return pr.perSecond > 0 && int64(hi) > pr.burst.Load() &&
		time.Since(start) < time.Duration(hi)*time.Second/time.Duration(pr.perSecond)
}

func (pr *producer) run(ctx context.Context, cl *kgo.Client) error {
	const batch = 100
	tick := time.NewTicker(testkit.PollEvery)
	defer tick.Stop()
	start := time.Now()
	for lo := 0; lo < len(pr.w.recs); {
		var hi int
		for {
			// A batch ends at the limit when the limit falls inside it:
			// a whole batch past it would wait for a limit that may
			// never reach its end.
			hi = min(lo+batch, len(pr.w.recs))
			if l := int(pr.limit.Load()); l > lo {
				hi = min(hi, l)
			}
			if !pr.held(hi, start) {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
		}
		rs := make([]*kgo.Record, 0, hi-lo)
		index := make(map[*kgo.Record]int, hi-lo)
		for i := lo; i < hi; i++ {
			r := &pr.w.recs[i]
			kr := &kgo.Record{
				Topic:     pr.topic,
				Partition: r.partition,
				Key:       []byte(r.key),
				Value:     []byte(r.value),
				Timestamp: r.ts,
				Headers:   []kgo.RecordHeader{{Key: "e2e-seq", Value: []byte(strconv.Itoa(i))}},
			}
			index[kr] = i
			rs = append(rs, kr)
		}
		// Results come back in completion order, not in the order given.
		res := cl.ProduceSync(ctx, rs...)
		if err := res.FirstErr(); err != nil {
			return fmt.Errorf("produce records %d..%d: %w", lo, hi, err)
		}
		for _, r := range res {
			pr.w.recs[index[r.Record]].offset = r.Record.Offset
		}
		pr.produced.Store(int64(hi))
		lo = hi
	}
	return nil
}

// check is a poll guard: a producer that gave up is a failure to report,
// not something to wait out.
func (pr *producer) check() error {
	if pr.finished() && pr.err != nil {
		return fmt.Errorf("producer: %w", pr.err)
	}
	return nil
}

func (pr *producer) finished() bool {
	select {
	case <-pr.done:
		return true
	default:
		return false
	}
}

// waitDone waits for the producer to have written every record.
func (pr *producer) waitDone(t *testing.T, timeout time.Duration, guard func() error) {
	t.Helper()
	waitFor(t, timeout, "the producer to write every input record", func() error {
		if pr.finished() {
			if pr.err != nil {
				return pr.err
			}
			return nil
		}
		if err := guard(); err != nil {
			return err
		}
		return fmt.Errorf("%w: produced %d of %d", errNotYet, pr.produced.Load(), len(pr.w.recs))
	})
}

// outRecord is one record read back from the output topic.
type outRecord struct {
	key, value string
	ts         time.Time
	partition  int32
	offset     int64
	headers    map[string]string
}

func (o outRecord) String() string {
	return fmt.Sprintf("out %d@%d key=%s value=%s src=%s/%s@%s", o.partition, o.offset, o.key, o.value,
		o.headers[hdrSourceTopic], o.headers[hdrSourcePartition], o.headers[hdrSourceOffset])
}

// observer reads the output topic from the start for the whole test with a
// plain (group-less) kgo consumer, so its counts are the observable that
// kills and waits are keyed on.
type observer struct {
	topic     string // the output topic
	mu        sync.Mutex
	recs      []outRecord
	next      map[int32]int64 // next output offset per partition
	sentinels map[string]bool
	keys      map[string]int // copies per key
	n         atomic.Int64   // output records
	distinct  atomic.Int64   // distinct keys among them
	fetchErrs atomic.Int64
	cl        *kgo.Client
	done      chan struct{}
}

func startObserver(t *testing.T, brokers string) *observer {
	t.Helper()
	output := namesOf(t).output
	cl, err := kgo.NewClient(
		seedBrokers(brokers),
		kgo.ConsumeTopics(output),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
		// Marked as the test's own, sessionless fetches: the nemesis
		// fetch fault spares them (see testFetchMaxBytes).
		kgo.FetchMaxBytes(testFetchMaxBytes),
		kgo.DisableFetchSessions(),
	)
	if err != nil {
		t.Fatalf("create output consumer: %v", err)
	}
	o := &observer{
		topic:     output,
		next:      map[int32]int64{},
		sentinels: map[string]bool{},
		keys:      map[string]int{},
		cl:        cl,
		done:      make(chan struct{}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(o.done)
		o.run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-o.done
		cl.Close()
	})
	return o
}

func (o *observer) run(ctx context.Context) {
	for ctx.Err() == nil {
		fs := o.cl.PollFetches(ctx)
		if fs.IsClientClosed() || ctx.Err() != nil {
			return
		}
		// Fetch errors (say, while the broker restarts) are retried by
		// the client; they are counted, not fatal.
		o.fetchErrs.Add(int64(len(fs.Errors())))
		o.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			h := make(map[string]string, len(r.Headers))
			for _, hd := range r.Headers {
				h[hd.Key] = string(hd.Value)
			}
			rec := outRecord{
				key:       string(r.Key),
				value:     string(r.Value),
				ts:        r.Timestamp,
				partition: r.Partition,
				offset:    r.Offset,
				headers:   h,
			}
			o.recs = append(o.recs, rec)
			o.next[r.Partition] = r.Offset + 1
			o.keys[rec.key]++
			if strings.HasPrefix(rec.key, sentinelPrefix) {
				o.sentinels[rec.key] = true
			}
		})
		o.n.Store(int64(len(o.recs)))
		o.distinct.Store(int64(len(o.keys)))
		o.mu.Unlock()
	}
}

// count is the number of output records seen so far.
func (o *observer) count() int64 { return o.n.Load() }

// progress is the number of distinct keys seen in the output so far: how
// many first occurrences the stage has forwarded. Unlike count it does not
// grow with records forwarded twice, so kill points and the producer's pace
// stay tied to real progress even when the stage misbehaves.
func (o *observer) progress() int64 { return o.distinct.Load() }

func (o *observer) sentinelsSeen() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.sentinels)
}

// waitSentinels waits until every partition's sentinel is in the output:
// the stage has read all of its input.
func (o *observer) waitSentinels(t *testing.T, timeout time.Duration, guard func() error) {
	t.Helper()
	waitFor(t, timeout, "every partition's sentinel in the output", func() error {
		if err := guard(); err != nil {
			return err
		}
		if n := o.sentinelsSeen(); n < numPartitions {
			return fmt.Errorf("%w: %d of %d sentinels, %d output records", errNotYet, n, numPartitions, o.count())
		}
		return nil
	})
}

// waitProgress waits until at least n distinct keys were seen in the output.
func (o *observer) waitProgress(t *testing.T, timeout time.Duration, n int64, what string, guard func() error) {
	t.Helper()
	waitFor(t, timeout, what, func() error {
		if err := guard(); err != nil {
			return err
		}
		if c := o.progress(); c < n {
			return fmt.Errorf("%w: %d of %d distinct keys in the output", errNotYet, c, n)
		}
		return nil
	})
}

// drain waits until the observer has read the output topic up to its
// current end offsets. Called once every stage process has exited, it
// yields the complete output.
func (o *observer) drain(t *testing.T, brokers string) []outRecord {
	t.Helper()
	ends, err := endOffsets(brokers, o.topic)
	if err != nil {
		t.Fatalf("list output end offsets: %v", err)
	}
	waitFor(t, 30*time.Second, fmt.Sprintf("the output consumer to reach end offsets %v", ends), func() error {
		o.mu.Lock()
		defer o.mu.Unlock()
		for p, end := range ends {
			if o.next[p] < end {
				return fmt.Errorf("%w: partition %d at %d of %d", errNotYet, p, o.next[p], end)
			}
		}
		return nil
	})
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]outRecord(nil), o.recs...)
}

func endOffsets(brokers, topic string) (map[int32]int64, error) {
	cl, err := kgo.NewClient(seedBrokers(brokers))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < numPartitions; p++ {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p
		rp.Timestamp = -1 // latest
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	ends := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("partition %d: %w", p.Partition, err)
			}
			ends[p.Partition] = p.Offset
		}
	}
	if len(ends) != numPartitions {
		return nil, errors.New("list offsets: partitions missing from the answer")
	}
	return ends, nil
}

// verify asserts the contract's exactly-once promise: every first occurrence
// is in the output exactly once, unchanged and carrying the source headers of
// its input record; no other record is there.
func verify(t *testing.T, w *workload, out []outRecord) {
	t.Helper()
	input := namesOf(t).input
	byKey := make(map[string][]outRecord, w.nFirsts)
	for _, o := range out {
		byKey[o.key] = append(byKey[o.key], o)
	}
	firsts := make(map[string]*inRecord, w.nFirsts)
	for i := range w.recs {
		r := &w.recs[i]
		if r.first {
			firsts[r.key] = r
		}
	}

	var lost, twice, wrong, unexpected []string
	replays, forwardedDups := 0, 0
	for key, in := range firsts {
		got := byKey[key]
		switch {
		case len(got) == 0:
			lost = append(lost, fmt.Sprintf("%s (input %d@%d value=%s)", key, in.partition, in.offset, in.value))
			continue
		case len(got) > 1:
			desc := make([]string, 0, len(got))
			srcs := map[string]int{}
			for _, o := range got {
				desc = append(desc, o.String())
				srcs[o.headers[hdrSourcePartition]+"@"+o.headers[hdrSourceOffset]]++
			}
			kind := "a later duplicate input was forwarded (dedup failure)"
			if len(srcs) < len(got) {
				// The same input forwarded twice: a replay after a
				// crash not suppressed, or a producer retry whose ack
				// was lost; adjacent output offsets in one partition
				// point at the latter.
				kind = "the same input record forwarded twice (replay or producer retry)"
				replays++
			} else {
				forwardedDups++
			}
			twice = append(twice, fmt.Sprintf("%s x%d: %s: %s", key, len(got), kind, strings.Join(desc, "; ")))
		}
		o := got[0]
		var problems []string
		if o.value != in.value {
			problems = append(problems, fmt.Sprintf("value %q, want %q", o.value, in.value))
		}
		if !o.ts.Equal(in.ts) {
			problems = append(problems, fmt.Sprintf("timestamp %s, want %s", o.ts.Format(time.RFC3339Nano), in.ts.Format(time.RFC3339Nano)))
		}
		if want := strings.TrimPrefix(in.value, "v"); o.headers["e2e-seq"] != want {
			problems = append(problems, fmt.Sprintf("input header e2e-seq=%q, want %q", o.headers["e2e-seq"], want))
		}
		if o.headers[hdrSourceTopic] != input ||
			o.headers[hdrSourcePartition] != strconv.Itoa(int(in.partition)) ||
			o.headers[hdrSourceOffset] != strconv.FormatInt(in.offset, 10) {
			problems = append(problems, fmt.Sprintf("source headers %s/%s@%s, want %s/%d@%d",
				o.headers[hdrSourceTopic], o.headers[hdrSourcePartition], o.headers[hdrSourceOffset],
				input, in.partition, in.offset))
		}
		if len(problems) > 0 {
			wrong = append(wrong, fmt.Sprintf("%s: %s", o, strings.Join(problems, ", ")))
		}
	}
	for key, got := range byKey {
		if firsts[key] == nil {
			for _, o := range got {
				unexpected = append(unexpected, o.String())
			}
		}
	}

	t.Logf("verify: %d input records (%d first occurrences, %d duplicates), %d output records, %d distinct output keys",
		len(w.recs), w.nFirsts, w.dups(), len(out), len(byKey))
	report := func(what string, list []string) {
		if len(list) == 0 {
			return
		}
		sort.Strings(list)
		shown := list[:min(len(list), 15)]
		t.Errorf("%d %s; first %d:\n  %s", len(list), what, len(shown), strings.Join(shown, "\n  "))
	}
	report("first occurrences lost", lost)
	report(fmt.Sprintf("keys in the output more than once (%d same-input copies, %d later duplicates forwarded)", replays, forwardedDups), twice)
	report("output records that differ from their input", wrong)
	report("output records whose key is no first occurrence", unexpected)
}

// newProducerClient is the client the tests produce the workload with:
// records go to the partition the workload chose, acknowledged by all
// in-sync replicas.
func newProducerClient(t *testing.T, brokers string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(
		seedBrokers(brokers),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)
	if err != nil {
		t.Fatalf("create producer: %v", err)
	}
	return cl
}
