package processor

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/checkpoint"
	"dedup/rotation"
)

// The checkpoint issue's partition: 10,000,000 keys, fp 0.001, counting
// (≈ 221 MB per pair). The stage holds one pair per partition plus the
// instance's spare: 2 pairs (≈ 0.44 GB) with one partition, 5 (≈ 1.1 GB)
// with four.
func cpFilter() rotation.Options {
	return rotation.Options{ExpectedKeys: 10_000_000, FPRate: 0.001, Window: time.Hour, Mode: rotation.Counting}
}

var (
	cpPairOnce sync.Once
	cpPair     *rotation.Pair
)

// designLoadPair is a pair of cpFilter in steady state halfway through a
// window: the previous generation holds ExpectedKeys keys, the current one
// half as many, window [t0, t0+1h) current (the benchmark input's window).
// Built once per process (≈ 15 M insertions).
func designLoadPair(b *testing.B) *rotation.Pair {
	cpPairOnce.Do(func() {
		p, err := rotation.New(cpFilter())
		if err != nil {
			b.Fatal(err)
		}
		keys := cpFilter().ExpectedKeys
		key := make([]byte, 9) // 9 bytes: never one of seed's 16-byte keys
		for i := range keys {
			binary.BigEndian.PutUint64(key[1:], i)
			p.TestAndAdd(key, t0.Add(-time.Hour))
		}
		key[0] = 1
		for i := range keys / 2 {
			binary.BigEndian.PutUint64(key[1:], i)
			p.TestAndAdd(key, t0)
		}
		cpPair = p
	})
	return cpPair
}

// BenchmarkPairCopy is the pure copy behind a worker's checkpoint pause:
// Pair.CopyTo of a design-load pair of the partition into a spare
// built once (the stage's shared spare). It reports the mean (ns/op) and
// the longest copy.
//
//	go test ./processor -run '^$' -bench PairCopy -benchtime 20x
func BenchmarkPairCopy(b *testing.B) {
	src := designLoadPair(b)
	dst, err := rotation.New(cpFilter())
	if err != nil {
		b.Fatal(err)
	}
	if err := src.CopyTo(dst); err != nil { // first touch of dst's pages: the stage's spare is warm too
		b.Fatal(err)
	}
	b.SetBytes(int64(src.SizeBytes()))
	var longest time.Duration
	for b.Loop() {
		began := time.Now()
		if err := src.CopyTo(dst); err != nil {
			b.Fatal(err)
		}
		longest = max(longest, time.Since(began))
	}
	b.ReportMetric(float64(longest)/1e6, "max-ms")
	b.ReportMetric(float64(src.SizeBytes())/1e6, "pair-MB")
}

// BenchmarkStageCheckpoints measures the stage's records/s with periodic
// checkpoints to a FileStore every 10 s and every 1 s against checkpoints
// off, in one run, on the tests' broker setup (in-process kfake with its
// in-memory log, b.N seeded records with distinct keys round-robin over
// the input partitions, the cmd's batch and fetch defaults), with pairs of
// the partition size. The partition count is the sub-benchmark:
// parts=1 is the scenario (one partition of 10 M keys), parts=4
// the earlier four-partition setup. The contenders alternate for cpRounds
// rounds (CP_ROUNDS overrides it; the order rotates each round); per round
// it logs each contender's rate, its ratio to "off" in that round (wall
// and per CPU second), the checkpoints saved and the worker's pauses, and
// it reports the median ratios.
//
// Every contender restores each partition from the same snapshot of a
// design-load pair (designLoadPair) at input offset 0, so that the filters
// probed and the state compressed at each checkpoint are those of a full
// partition, not of a fresh one. "off" is the same stage with a checkpoint
// interval longer than the run: no checkpoint while it is timed. Because a
// full filter holds false positives, what the stage writes from that state
// is computed beforehand on a clone of the pair, and each run must write
// exactly that. Runs are timed by stagerun's rule, as the stage-versus-copy
// benchmark's are.
//
// Pauses come from the dedup_checkpoint_pause_seconds observations (the
// worker's flush and copy into the spare), recorded through the metric.
//
// Give b.N so that "off" runs for at least 30 s (several 10 s checkpoints
// inside the others' runs), e.g.
//
//	CP_ROUNDS=3 go test ./processor -run '^$' -bench 'StageCheckpoints/parts=1$' -benchtime 20000000x -timeout 90m
func BenchmarkStageCheckpoints(b *testing.B) {
	for _, parts := range []int{1, benchParts} {
		b.Run(fmt.Sprintf("parts=%d", parts), func(b *testing.B) { stageCheckpoints(b, parts) })
	}
}

func stageCheckpoints(b *testing.B, parts int) {
	n := b.N
	b.StopTimer()
	if n < 1000 {
		return // the framework's b.N = 1 probe: nothing to measure
	}
	if n > 40_000_000 {
		b.Skip("give the record count with -benchtime, e.g. -benchtime 20000000x")
	}
	rounds := envPositive(b, "CP_ROUNDS", cpRounds)
	e := newTestEnv(b, int32(parts), int32(parts))
	seed(b, e, n, parts)
	tmpl := saveDesignLoadSnapshots(b, parts)
	want := forwardedFrom(designLoadPair(b), n, parts)

	runs := map[string][]cpRun{}
	for round := range rounds {
		for i := range cpContenders {
			c := cpContenders[(i+round)%len(cpContenders)]
			runs[c.name] = append(runs[c.name], runCheckpointed(b, e, parts, n, tmpl, c, want, fmt.Sprintf("p%d-%s-%d", parts, c.name, round)))
		}
		off := runs["off"][round]
		for _, c := range cpContenders {
			r := runs[c.name][round]
			b.Logf("parts %d round %d %-3s: %8.0f rec/s (%.3f of off), %8.0f rec/cpu-s (%.3f of off), %2d checkpoints in %5.1fs, pauses %d (max %v, mean %v)",
				parts, round, c.name, r.wall, r.wall/off.wall, r.cpu, r.cpu/off.cpu, r.saves, r.elapsed.Seconds(),
				r.pauses, r.maxPause.Round(time.Microsecond), r.meanPause().Round(time.Microsecond))
		}
	}
	for _, c := range cpContenders {
		var wall, cpu []float64
		var pauses int
		var longest, total time.Duration
		for round, r := range runs[c.name] {
			off := runs["off"][round]
			wall, cpu = append(wall, r.wall/off.wall), append(cpu, r.cpu/off.cpu)
			pauses += r.pauses
			longest, total = max(longest, r.maxPause), total+r.sumPause
		}
		b.ReportMetric(median(runs[c.name], func(r cpRun) float64 { return r.wall }), c.name+"-rec/s")
		b.ReportMetric(median(runs[c.name], func(r cpRun) float64 { return r.elapsed.Seconds() }), c.name+"-s")
		if c.name == "off" {
			continue
		}
		b.ReportMetric(medianOf(wall), c.name+"/off")
		b.ReportMetric(medianOf(cpu), c.name+"/off-cpu")
		b.ReportMetric(float64(longest)/1e6, c.name+"-pause-max-ms")
		if pauses > 0 {
			b.ReportMetric(float64(total)/float64(pauses)/1e6, c.name+"-pause-mean-ms")
		}
	}
	b.ReportMetric(0, "ns/op") // the figures above are the result
}

const cpRounds = 3

type cpContender struct {
	name     string
	interval time.Duration // 0: none while timed
	ratio    float64       // Options.ChainRatio: 0 the default (increments), negative full snapshots
}

// cpContenders: checkpoints off, with increments every 10 s and every 1 s
// (the default chain ratio), and full snapshots every 1 s: what increments
// save.
var cpContenders = []cpContender{{"off", 0, 0}, {"10s", 10 * time.Second, 0}, {"1s", time.Second, 0}, {"1s-full", time.Second, -1}}

// cpRun is one timed run of one contender.
type cpRun struct {
	rates
	elapsed  time.Duration
	saves    int // checkpoints saved while timed
	pauses   int
	maxPause time.Duration
	sumPause time.Duration
}

func (r cpRun) meanPause() time.Duration {
	if r.pauses == 0 {
		return 0
	}
	return r.sumPause / time.Duration(r.pauses)
}

func median(rs []cpRun, f func(cpRun) float64) float64 {
	var xs []float64
	for _, r := range rs {
		xs = append(xs, f(r))
	}
	return medianOf(xs)
}

func medianOf(xs []float64) float64 {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// pauseRecorder passes dedup_checkpoint_pause_seconds observations through
// and keeps their count, sum and maximum, which the histogram cannot give.
type pauseRecorder struct {
	prometheus.Histogram
	mu           sync.Mutex
	n            int
	sum, longest time.Duration
}

func (p *pauseRecorder) Observe(seconds float64) {
	p.Histogram.Observe(seconds)
	d := time.Duration(seconds * 1e9)
	p.mu.Lock()
	p.n++
	p.sum += d
	p.longest = max(p.longest, d)
	p.mu.Unlock()
}

func (p *pauseRecorder) read() (n int, sum, longest time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n, p.sum, p.longest
}

// snapshotTemplate is a directory holding one snapshot of designLoadPair
// per input partition, at input offset 0, in FileStore's layout.
type snapshotTemplate struct{ dir string }

func saveDesignLoadSnapshots(b *testing.B, parts int) snapshotTemplate {
	dir := b.TempDir()
	s, err := checkpoint.NewFileStore(checkpoint.FileOptions{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	pair := designLoadPair(b)
	for p := range parts {
		// No OutputEnds: the replay scan reads each output partition from
		// its first offset, and the output is emptied before every run.
		m := checkpoint.Meta{Topic: inTopic, Partition: p, Offset: 0, OutputTopic: outTopic}
		if _, err := s.Save(context.Background(), m, pair); err != nil {
			b.Fatal(err)
		}
	}
	return snapshotTemplate{dir: dir}
}

// linkInto hard-links the template's snapshots into an empty store directory.
func (t snapshotTemplate) linkInto(b *testing.B, dir string) {
	err := filepath.WalkDir(t.dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(t.dir, path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(rel)), 0o755); err != nil {
			return err
		}
		return os.Link(path, filepath.Join(dir, rel))
	})
	if err != nil {
		b.Fatal(err)
	}
}

// forwardedFrom counts the records of seed's n that a stage restored to
// pair forwards (cpSeed's records over parts partitions): the decisions are the pair's, record by record, on a
// clone per partition.
func forwardedFrom(pair *rotation.Pair, n, parts int) int64 {
	var fwd int64
	for p := range parts {
		c := pair.Clone()
		for i := p; i < n; i += parts {
			if !c.TestAndAdd(fmt.Appendf(nil, "key-%012d", i), t0.Add(time.Duration(i)*time.Microsecond)) {
				fwd++
			}
		}
	}
	return fwd
}

// runCheckpointed runs the stage restored from the template with
// contender c's checkpoint interval over the n seeded records, timed by
// stagerun's rule, checks that it wrote exactly the want records the
// restored pair forwards, and empties the output.
func runCheckpointed(b *testing.B, e *testEnv, parts, n int, tmpl snapshotTemplate, c cpContender, want int64, group string) cpRun {
	dir := filepath.Join(b.TempDir(), "store")
	defer os.RemoveAll(dir)
	tmpl.linkInto(b, dir)
	store, err := checkpoint.NewFileStore(checkpoint.FileOptions{Dir: dir, Keep: 2})
	if err != nil {
		b.Fatal(err)
	}
	o := benchOptions(e, group)
	o.Filter = cpFilter()
	o.Store = store
	o.CheckpointInterval = c.interval
	o.ChainRatio = c.ratio
	if c.interval == 0 {
		o.CheckpointInterval = 24 * time.Hour
	}
	m := NewMetrics(prometheus.NewRegistry())
	pause := &pauseRecorder{Histogram: m.CheckpointPause}
	m.CheckpointPause = pause
	o.Metrics = m

	base := outputEnd(b, e, parts)
	p := mustNew(b, o)
	var saves int
	// Read while the partitions' series exist: the stop deletes them, and
	// its final checkpoint is not part of the timed run.
	t := timeRun(b, e, parts, n, group, stageRun(p), func() {
		for p := range parts {
			saves += int(metricValue(m.Checkpoints.WithLabelValues(inTopic, strconv.Itoa(p))))
		}
	})
	run := cpRun{rates: t.rates, elapsed: t.Elapsed(), saves: saves}
	run.pauses, run.sumPause, run.maxPause = pause.read()
	if t.Written != uint64(want) {
		b.Errorf("%s: the stage wrote %d records, want %d", group, t.Written, want)
	}
	if got := outputEnd(b, e, parts) - base; got != want {
		b.Errorf("%s: output grew by %d records, want %d", group, got, want)
	}
	emptyOutput(b, e, parts)
	return run
}

// emptyOutput deletes every output record (DeleteRecords to the high
// watermark), so that the broker's memory does not grow run after run.
func emptyOutput(b *testing.B, e *testEnv, parts int) {
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 10_000
	t := kmsg.NewDeleteRecordsRequestTopic()
	t.Topic = outTopic
	for p := range parts {
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition = int32(p)
		rp.Offset = -1 // the high watermark
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(context.Background(), e.prod)
	if err != nil {
		b.Fatal(err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				b.Fatalf("delete output records of partition %d: error code %d", p.Partition, p.ErrorCode)
			}
		}
	}
}
