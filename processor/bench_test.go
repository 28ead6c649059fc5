package processor

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/bench/copyloop"
	"dedup/bench/stagerun"
	"dedup/internal/config"
	"dedup/internal/testkit"
	"dedup/offsets"
	"dedup/processor/cluster"
	"dedup/processor/output"
	"dedup/rotation"
)

const benchParts = 4

// BenchmarkStageVsCopyLoop measures records/s through the whole stage and
// through a plain kafka-go consume→produce copy loop with the same reader
// and writer settings, on the same in-process kfake broker and the same
// input, in one run, and reports stage/copy. A third contender, the copy
// loop with the stage's three source headers, writer transport and reader
// dialer ("stage without deduplication", stageCopy), splits the gap: what
// the contract's headers cost (larger outputs to encode and store) and
// what deduplication costs.
// b.N is the number of input records (all distinct keys: every record is
// tested, added and forwarded, the stage's worst case); the counting pair
// is sized for 1,000,000 keys per partition.
//
// The contenders alternate for benchRounds rounds (STAGE_ROUNDS overrides
// it), the order rotating each round. Each round's ratios compare runs
// made seconds apart, so the reported ratios are the medians of the
// per-round ratios; the best round of each contender is reported too, but
// a ratio of two maxima favours the contender whose rate scatters more. Every round is logged (-v).
//
// Besides records per wall-clock second it reports records per CPU second
// of this process (user + system, getrusage), the broker included: with an
// in-process broker the run is CPU-bound, and CPU time is far less
// disturbed by other processes on a shared machine than wall time.
//
// The broker keeps its log in a data directory, as the embedded broker of
// cmd/dedup does (kfake.DataDir): without one kfake keeps segments in an
// in-memory file system whose files grow by copying, a per-byte cost the
// shipped broker does not have and that weighs on the contender writing
// the larger records. Before each contender starts, the previous one's
// garbage is collected and the log it wrote is synced to disk (settle), so
// that neither is paid for in the next contender's window: without that, a
// contender's median rate depends on which one ran before it.
//
// Records have 16-byte keys and 100-byte values; STAGE_VALUE_BYTES sets
// another value size.
//
//	go test ./processor -run '^$' -bench StageVsCopyLoop -benchtime 2000000x -count 3 -v
func BenchmarkStageVsCopyLoop(b *testing.B) {
	e, n, rounds := seededBench(b)
	if e == nil {
		return
	}
	contenders := []contender{
		{"copy", copyLoop(plainCopy)},
		{"copy+headers", copyLoop(stageCopy())},
		{"stage", stage(func(*Processor) {})},
	}
	runs := runRounds(b, e, n, rounds, contenders, func(round int, runs map[string][]rates) {
		cp, hdr, st := runs["copy"][round], runs["copy+headers"][round], runs["stage"][round]
		b.Logf("round %d: copy %8.0f rec/s %8.0f rec/cpu-s | copy+headers %8.0f %8.0f | stage %8.0f %8.0f | stage/copy %.3f wall %.3f cpu | stage/copy+headers %.3f wall %.3f cpu",
			round, cp.wall, cp.cpu, hdr.wall, hdr.cpu, st.wall, st.cpu, st.wall/cp.wall, st.cpu/cp.cpu, st.wall/hdr.wall, st.cpu/hdr.cpu)
	})
	best := map[string]rates{}
	for name, rs := range runs {
		for _, r := range rs {
			best[name] = best[name].best(r)
		}
	}
	b.ReportMetric(best["copy"].wall, "copy-rec/s")
	b.ReportMetric(best["copy+headers"].wall, "copy+headers-rec/s")
	b.ReportMetric(best["stage"].wall, "stage-rec/s")
	b.ReportMetric(best["stage"].wall/best["copy"].wall, "stage/copy-best")
	b.ReportMetric(best["stage"].cpu/best["copy"].cpu, "stage/copy-cpu-best")
	b.ReportMetric(medianRatio(runs, "stage", "copy", wallRate), "stage/copy")
	b.ReportMetric(medianRatio(runs, "stage", "copy", cpuRate), "stage/copy-cpu")
	b.ReportMetric(medianRatio(runs, "stage", "copy+headers", wallRate), "stage/copy+headers")
	b.ReportMetric(medianRatio(runs, "stage", "copy+headers", cpuRate), "stage/copy+headers-cpu")
	b.ReportMetric(0, "ns/op") // the figures above are the result
}

const benchRounds = 5

// seededBench sets up a round-based throughput benchmark: b.N records of
// distinct keys seeded on newBenchEnv's broker, and the round count
// (STAGE_ROUNDS). The env is nil for the framework's b.N = 1 probe, which
// has nothing to measure.
func seededBench(b *testing.B) (e *testEnv, n, rounds int) {
	n = b.N
	b.StopTimer()
	if n < 1000 {
		return nil, n, 0
	}
	rounds = envPositive(b, "STAGE_ROUNDS", benchRounds)
	e = newBenchEnv(b)
	seed(b, e, n, benchParts)
	return e, n, rounds
}

// envPositive is the positive integer (a round count, a size) the
// environment variable name gives, or def when it is unset.
func envPositive(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// newBenchEnv is the throughput benchmarks' broker: benchParts input and
// output partitions, its log in a data directory like cmd/dedup's
// embedded broker. STAGE_BROKER_LOG=memory keeps the log in kfake's
// in-memory file system instead (the tests' broker), for comparison.
func newBenchEnv(b *testing.B) *testEnv {
	switch v := os.Getenv("STAGE_BROKER_LOG"); v {
	case "", "dir":
		return newTestEnv(b, benchParts, benchParts, kfake.DataDir(b.TempDir()))
	case "memory":
		return newTestEnv(b, benchParts, benchParts)
	default:
		b.Fatalf("STAGE_BROKER_LOG=%q: want dir or memory", v)
		return nil
	}
}

// rates are records per wall-clock second and per CPU second.
type rates struct{ wall, cpu float64 }

func (r rates) best(o rates) rates { return rates{wall: max(r.wall, o.wall), cpu: max(r.cpu, o.cpu)} }

func wallRate(r rates) float64 { return r.wall }
func cpuRate(r rates) float64  { return r.cpu }

// runRounds measures the contenders over the n seeded records for rounds
// rounds, the order rotating each round, each run under its own group
// ("<name>-<round>"), and returns every contender's rates by round;
// logRound is called after each round.
func runRounds(b *testing.B, e *testEnv, n, rounds int, contenders []contender, logRound func(round int, runs map[string][]rates)) map[string][]rates {
	runs := map[string][]rates{}
	for round := range rounds {
		for i := range contenders {
			c := contenders[(i+round)%len(contenders)]
			group := fmt.Sprintf("%s-%d", c.group, round)
			runs[c.group] = append(runs[c.group], measure(b, e, n, contender{group, c.stage}))
		}
		logRound(round, runs)
	}
	return runs
}

// runRatio is a benchmark of two contenders compared as num/den: it
// seeds (seededBench), runs the rounds (runRounds), logs each round's
// rates and ratio and reports the median ratios per wall-clock second (as
// ratio) and per CPU second (ratio-cpu).
func runRatio(b *testing.B, contenders [2]contender, num, den, ratio string) {
	e, n, rounds := seededBench(b)
	if e == nil {
		return
	}
	first, second := contenders[0].group, contenders[1].group
	runs := runRounds(b, e, n, rounds, contenders[:], func(round int, runs map[string][]rates) {
		r1, r2, nr, dr := runs[first][round], runs[second][round], runs[num][round], runs[den][round]
		b.Logf("round %d: %s %8.0f rec/s %8.0f rec/cpu-s | %s %8.0f %8.0f | %s %.3f wall %.3f cpu",
			round, first, r1.wall, r1.cpu, second, r2.wall, r2.cpu, ratio, nr.wall/dr.wall, nr.cpu/dr.cpu)
	})
	b.ReportMetric(medianRatio(runs, num, den, wallRate), ratio)
	b.ReportMetric(medianRatio(runs, num, den, cpuRate), ratio+"-cpu")
	b.ReportMetric(0, "ns/op") // the figures above are the result
}

// medianRatio is the median over rounds of num's figure over den's: each
// round's ratio compares runs made seconds apart.
func medianRatio(runs map[string][]rates, num, den string, f func(rates) float64) float64 {
	xs := make([]float64, len(runs[num]))
	for round := range xs {
		xs[round] = f(runs[num][round]) / f(runs[den][round])
	}
	return medianOf(xs)
}

// contender is one side of a comparison: its consumer group and how to
// build its stage (and, for the processor, how to read its decisions) on
// the benchmark's broker.
type contender struct {
	group string
	stage stageFunc
}

// stageFunc builds one contender's stage for a run over the n seeded
// records under group.
type stageFunc func(b *testing.B, e *testEnv, group string, n int) stagerun.Options

// benchTimeout bounds one contender's run.
const benchTimeout = 10 * time.Minute

// measure returns c's rates over the n seeded records, timed by stagerun's
// rule: from when the stage is seen consuming to when the output's end
// offsets last moved, once it has decided every record and written what
// it forwarded. CPU time is taken over the same wait.
func measure(b *testing.B, e *testEnv, n int, c contender) rates {
	return timeRun(b, e, benchParts, n, c.group, c.stage(b, e, c.group, n)).rates
}

// timedRun is one contender's run as stagerun timed it.
type timedRun struct {
	rates
	stagerun.Result
}

// timeRun runs the stage o describes (Output and Records filled in here)
// over n input records, after settle, and stops it. finished, if given,
// runs when the timing ends, before the stop (whose final checkpoint and
// series cleanup it must not see).
func timeRun(b *testing.B, e *testEnv, parts, n int, group string, o stagerun.Options, finished ...func()) timedRun {
	settle()
	o.Output = stagerun.Output{Client: testkit.KafkaClient(b, e.brokers...), Topic: outTopic, Partitions: parts}
	o.Records = uint64(n)
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	r, err := stagerun.Start(ctx, o)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := r.Stop(); err != nil {
			b.Errorf("%s: %v", group, err)
		}
	}()
	if _, err := r.Ready(ctx); err != nil {
		b.Fatalf("%s: %v", group, err)
	}
	stopProfile := profileWindow(b, group)
	b.StartTimer()
	cpu := cpuTime(b)
	res, err := r.Finish(ctx)
	cpuUsed := cpuTime(b) - cpu
	b.StopTimer()
	stopProfile()
	for _, f := range finished {
		f()
	}
	if err != nil {
		b.Fatalf("%s: %v", group, err)
	}
	return timedRun{
		rates:  rates{wall: float64(n) / res.Elapsed().Seconds(), cpu: float64(n) / cpuUsed.Seconds()},
		Result: res,
	}
}

// settle leaves nothing of the previous contender to be paid for during the
// next one's window: its garbage is collected, and the broker's log it
// wrote (hundreds of MB per contender) is written back to disk now, not by
// the kernel's flusher threads while the next contender runs.
func settle() {
	runtime.GC()
	syscall.Sync()
}

// profileWindow writes a CPU profile of the measured window alone to
// $DEDUP_BENCH_PROFILE/<group>.prof when that variable names a directory.
// -cpuprofile also covers seeding the input, starting and stopping, and
// (for the stage) deciding the seed on a new pair to count its outputs.
func profileWindow(b *testing.B, group string) (stop func()) {
	dir := os.Getenv("DEDUP_BENCH_PROFILE")
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, group+".prof"))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

// cpuTime is the user + system CPU time of this process so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchCompression is PRODUCE_COMPRESSION for every contender's outputs
// (the copy loops' and hop 1's requests too): STAGE_COMPRESSION, none by
// default as the stage's own.
func benchCompression(t testing.TB) kafka.Compression {
	v := cmp.Or(os.Getenv("STAGE_COMPRESSION"), "none")
	c, ok := config.ParseCompression(v)
	if !ok {
		t.Fatalf("STAGE_COMPRESSION=%q: want none, gzip, snappy, lz4 or zstd", v)
	}
	return c
}

// benchValueBytes is the seeded records' value size; STAGE_VALUE_BYTES
// overrides it. The source headers add the same ≈ 80 bytes to every
// output whatever its size, so their share of the work falls as records
// grow.
const benchValueBytes = 100

// seed produces n records with distinct keys (16 bytes) and values of
// STAGE_VALUE_BYTES (default benchValueBytes), round-robin over parts input
// partitions.
func seed(b *testing.B, e *testEnv, n, parts int) {
	value := make([]byte, envPositive(b, "STAGE_VALUE_BYTES", benchValueBytes))
	for i := range value {
		value[i] = 'a' + byte(i%26)
	}
	const chunk = 10000
	recs := make([]*kgo.Record, 0, chunk)
	for i := range n {
		recs = append(recs, &kgo.Record{
			Partition: int32(i % parts),
			Key:       fmt.Appendf(nil, "key-%012d", i),
			Value:     value,
			Timestamp: t0.Add(time.Duration(i) * time.Microsecond),
		})
		if len(recs) == chunk || i == n-1 {
			e.produce(recs...)
			recs = recs[:0]
		}
	}
}

// outputEnd returns the sum of the output partitions' end offsets.
func outputEnd(b *testing.B, e *testEnv, parts int) int64 {
	sum, err := offsets.EndSum(context.Background(), testkit.KafkaClient(b, e.brokers...), outTopic, parts)
	if err != nil {
		b.Fatal(err)
	}
	return sum
}

// benchFilter is the stage's pair in the throughput benchmarks: the
// issue's 1,000,000 keys per partition, counting unless STAGE_MODE
// (fingerprint, counting, plain) names another mode; the documented
// figures say which they used.
func benchFilter(tb testing.TB) rotation.Options {
	o := rotation.Options{ExpectedKeys: 1_000_000, FPRate: 0.001, Window: time.Hour, Mode: rotation.Counting}
	if v := os.Getenv("STAGE_MODE"); v != "" {
		m, err := rotation.ParseMode(v)
		if err != nil {
			tb.Fatalf("STAGE_MODE: %v", err)
		}
		o.Mode = m
	}
	return o
}

func benchOptions(e *testEnv, group string) Options {
	o := e.options(group)
	o.Filter = benchFilter(e.t)
	// The cmd defaults (PRODUCE_BATCH_*, FETCH_*), not the tests' short ones.
	o.BatchSize, o.BatchBytes, o.BatchTimeout = 1000, 1<<20, 5*time.Millisecond
	o.FetchMinBytes, o.FetchMaxBytes, o.FetchMaxWait = 1, 10<<20, 250*time.Millisecond
	o.CheckpointInterval = 10 * time.Second
	o.Compression = benchCompression(e.t)
	// A production session, not the tests' 1 s: on a loaded machine a
	// benchmark must measure the stage, not fence it for late heartbeats.
	o.SessionTimeout, o.RebalanceTimeout, o.HeartbeatInterval = 10*time.Second, 10*time.Second, time.Second
	return o
}

// stage is the whole stage with benchOptions, after configure has set what
// the contender changes.
func stage(configure func(*Processor)) stageFunc {
	return func(b *testing.B, e *testEnv, group string, _ int) stagerun.Options {
		p := mustNew(b, benchOptions(e, group))
		configure(p)
		return stageRun(p)
	}
}

// stageRun is p as a stagerun stage that counts its decisions.
func stageRun(p *Processor) stagerun.Options {
	return stagerun.Options{Stage: p, Counts: func() stagerun.Counts {
		pr := p.Progress()
		return stagerun.Counts{In: pr.In, Decided: pr.Decided(), Written: pr.Written() + pr.Dropped}
	}}
}

// copyLoop is the reference: copyloop, the plain kafka-go copy loop
// dedup-bench's loop contenders also run, with the stage's reader and
// writer settings, keeping key, value, headers and timestamp. No keys, no
// filters, no ack tracking.
//
// As plainCopy it is plain kafka-go. As stageCopy, with the stage's writer
// transport (metadataCache), its readers' dialer (deadlineConn) and the
// source headers, it is the stage without deduplication.
func copyLoop(v copyVariant) stageFunc {
	return func(b *testing.B, e *testEnv, _ string, n int) stagerun.Options {
		return stagerun.Options{Stage: stagerun.CopyLoop(copyOptions(e, n, v))}
	}
}

// copyVariant is what a copy loop takes over from the stage; its zero
// value, plainCopy, takes nothing.
type copyVariant struct {
	transport     func(testing.TB) kafka.RoundTripper // nil: copyloop's own plain kafka.Transport
	dialer        func(Options) *kafka.Dialer         // nil: kafka.DefaultDialer
	sourceHeaders bool
}

var plainCopy = copyVariant{}

func stageCopy() copyVariant {
	return copyVariant{
		// The writer's transport as newWriter makes it: a metadata cache
		// over connections of its own, closed when the benchmark ends.
		transport: func(tb testing.TB) kafka.RoundTripper {
			tr := cluster.NewTransport(nil)
			tb.Cleanup(tr.CloseIdleConnections)
			return output.NewMetadataCache(tr)
		},
		// The partition readers' dialer, as Processor.New makes it.
		dialer: func(o Options) *kafka.Dialer {
			return cluster.CoalescingDialer(o.Dialer, cluster.ReadDeadlineSlack(o.FetchMaxWait))
		},
		sourceHeaders: true,
	}
}

// copyOptions is the loop over the n seeded records (seed spreads them
// round-robin, which gives each partition's end).
func copyOptions(e *testEnv, n int, v copyVariant) copyloop.Options {
	o := benchOptions(e, "copy")
	ends := make([]int64, benchParts)
	for p := range ends {
		ends[p] = int64((n + benchParts - 1 - p) / benchParts)
	}
	// The stage's reader sizes for benchParts partitions.
	bufs := (&Processor{o: withDefaults(o)}).bufferSizes(benchParts, benchParts)
	lo := copyloop.Options{
		Brokers: e.brokers, InputTopic: inTopic, OutputTopic: outTopic, Ends: ends,
		FetchMinBytes: o.FetchMinBytes, FetchMaxBytes: bufs.FetchBytes, FetchMaxWait: o.FetchMaxWait,
		QueueCapacity: bufs.Queue,
		BatchSize:     o.BatchSize, BatchBytes: o.BatchBytes, BatchTimeout: o.BatchTimeout, MaxAttempts: 3,
		Compression: o.Compression,
	}
	if v.transport != nil {
		lo.Transport = v.transport(e.t)
	}
	if v.dialer != nil {
		lo.Dialer = v.dialer(o)
	}
	if v.sourceHeaders {
		lo.SourceHeaders = &copyloop.SourceHeaders{Topic: HeaderSourceTopic, Partition: HeaderSourcePartition, Offset: HeaderSourceOffset}
	}
	return lo
}

// BenchmarkStageAlone and BenchmarkCopyLoopAlone run one contender of
// BenchmarkStageVsCopyLoop each, for CPU profiles of one side:
//
//	go test ./processor -run '^$' -bench StageAlone -benchtime 200000x -cpuprofile stage.prof
func BenchmarkStageAlone(b *testing.B) { benchAlone(b, stage(func(*Processor) {})) }

func BenchmarkCopyLoopAlone(b *testing.B) { benchAlone(b, copyLoop(plainCopy)) }

func BenchmarkCopyHeadersAlone(b *testing.B) { benchAlone(b, copyLoop(stageCopy())) }

func benchAlone(b *testing.B, stage stageFunc) {
	n := b.N
	b.StopTimer()
	e := newBenchEnv(b)
	seed(b, e, n, benchParts)
	r := measure(b, e, n, contender{"alone", stage})
	b.ReportMetric(r.wall, "rec/s")
	b.ReportMetric(r.cpu, "rec/cpu-s")
	b.ReportMetric(0, "ns/op")
}
