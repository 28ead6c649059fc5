package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"dedup/bench/workload"
)

// Options configure one harness run.
type Options struct {
	Workload   workload.Workload
	Contenders []string // default DefaultContenders
	// FPRate and ExpectedKeys size every filter contender; ExpectedKeys is
	// per partition per window and defaults to the largest number of new
	// keys any partition receives in one window.
	FPRate       float64
	ExpectedKeys uint64
	// Window is the filters' window (default 1h); the input's timestamps
	// are spread evenly over Windows consecutive windows (default 2), so
	// that with 2 the filters rotate once and both generations hold keys at
	// the end, as in steady state.
	Window  time.Duration
	Windows int
	// Exe and Args start a contender process: the contender's JSON spec is
	// appended as the last argument. Env is added to the process's
	// environment.
	Exe  string
	Args []string
	Env  []string
	// Progress receives progress bars and phase lines (nil: none).
	Progress io.Writer
	// ContenderTimeout bounds each contender process (default 1h).
	ContenderTimeout time.Duration
	// Repeat runs every contender this many times, interleaved, and keeps
	// the run with the median throughput (default 1).
	Repeat int
}

// Outcome is one contender's measured and verified run.
type Outcome struct {
	Result
	Verify Verification
	// Rates and CPURates hold the records/s and records per CPU second of
	// every repeated run, in run order: run i of every contender is one
	// round.
	Rates    []float64 `json:"rates,omitempty"`
	CPURates []float64 `json:"cpu_rates,omitempty"`
}

// Verification is what the harness found in a contender's output.
type Verification struct {
	Forwarded      uint64 // records in the output
	FirstForwarded uint64 // first occurrences in the output
	DupForwarded   uint64 // repeats of a key forwarded (missed duplicates)
	Repeated       uint64 // input records that appear more than once in the output
	DupsDropped    uint64 // repeats of a key not forwarded
	FalseDrops     uint64 // first occurrences not forwarded (false positives)
	Foreign        uint64 // output records that name no input record
}

// Report is a whole run: the input and every contender's outcome.
type Report struct {
	Workload     workload.Workload
	FPRate       float64
	ExpectedKeys uint64
	Firsts       uint64 // first occurrences in the input (= Workload.Keys)
	Preload      time.Duration
	Repeat       int // runs per contender; Outcomes hold the median
	Windows      int // windows the input's timestamps span
	Outcomes     []Outcome
}

// Outcome returns the named contender's outcome.
func (r Report) Outcome(name string) (Outcome, bool) {
	for _, o := range r.Outcomes {
		if o.Name == name {
			return o, true
		}
	}
	return Outcome{}, false
}

const inputTopic = "bench-input"

func (o *Options) normalize() error {
	o.Workload = o.Workload.Resolved()
	var errs []error
	if err := o.Workload.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(o.Contenders) == 0 {
		o.Contenders = DefaultContenders
	}
	if o.FPRate <= 0 || o.FPRate >= 1 {
		errs = append(errs, fmt.Errorf("fp-rate: %v is not in (0, 1)", o.FPRate))
	}
	if o.Window == 0 {
		o.Window = time.Hour
	}
	if o.Windows == 0 {
		o.Windows = 2
	}
	if o.Windows < 0 {
		errs = append(errs, fmt.Errorf("windows: %d is negative", o.Windows))
	}
	if o.Repeat == 0 {
		o.Repeat = 1
	}
	if o.Repeat < 0 {
		errs = append(errs, fmt.Errorf("repeat: %d is negative", o.Repeat))
	}
	if o.ContenderTimeout == 0 {
		o.ContenderTimeout = time.Hour
	}
	if o.Exe == "" {
		errs = append(errs, errors.New("no contender executable"))
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("validate bench options: %w", err)
	}
	return nil
}

// Run generates the input once on an embedded broker and runs every contender
// over it, one process at a time, verifying each one's output.
func Run(ctx context.Context, o Options) (Report, error) {
	if err := o.normalize(); err != nil {
		return Report{}, err
	}
	w := o.Workload
	if need, avail := o.memoryNeeded(), memAvailable(); avail > 0 && need > avail*9/10 {
		return Report{}, fmt.Errorf("run %d distinct keys: needs about %.1f GiB of memory, %.1f GiB available: lower --keys, --dup-ratio or --value-size",
			w.Keys, float64(need)/(1<<30), float64(avail)/(1<<30))
	}
	// The broker keeps every record in this process's heap; the default
	// GOGC would let the heap grow to twice that before collecting.
	defer debug.SetGCPercent(debug.SetGCPercent(harnessGCPercent))
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(w.Partitions), inputTopic))
	if err != nil {
		return Report{}, fmt.Errorf("start embedded broker: %w", err)
	}
	defer func() {
		cluster.Close()
		debug.FreeOSMemory() // give the broker's records back before a sweep's next run
	}()
	brokers := cluster.ListenAddrs()

	rep := Report{Workload: w, FPRate: o.FPRate, ExpectedKeys: o.ExpectedKeys, Repeat: o.Repeat}
	fmt.Fprintf(o.Progress, "input: %d records, %d distinct keys (%.0f%% duplicates), %d partitions, key %d B, value %d B\n",
		w.Records, w.Keys, 100*float64(w.Records-w.Keys)/float64(w.Records), w.Partitions, w.KeySize, w.ValueSize)
	start := time.Now()
	in, err := preload(ctx, brokers, w, o.Window, o.Windows, newBar(o.Progress, "load input", w.Records))
	if err != nil {
		return Report{}, err
	}
	if o.ExpectedKeys == 0 {
		o.ExpectedKeys = in.maxNewPerWindow
	}
	rep.ExpectedKeys, rep.Windows = o.ExpectedKeys, o.Windows
	rep.Preload = time.Since(start)
	rep.Firsts = in.firsts

	admin, closeAdmin := newClient(brokers)
	defer closeAdmin()
	r := runner{o: o, admin: admin, brokers: brokers, in: in}
	runs := make(map[string][]Outcome)
	for i := range o.Repeat {
		// Each round starts with the next contender: none always runs
		// first (on a fresh broker) or last.
		for j := range o.Contenders {
			name := o.Contenders[(i+j)%len(o.Contenders)]
			out, err := r.runOne(ctx, name, i)
			if err != nil {
				return rep, err
			}
			runs[name] = append(runs[name], out)
		}
	}
	for _, name := range o.Contenders {
		rep.Outcomes = append(rep.Outcomes, median(runs[name]))
	}
	return rep, nil
}

// runner runs contenders against one loaded broker.
type runner struct {
	o       Options
	admin   *kafka.Client
	brokers []string
	in      input
}

// runOne runs contender name once (its run-th time) with its own output
// topic and group, verifies its output and deletes the output topic.
func (r runner) runOne(ctx context.Context, name string, run int) (Outcome, error) {
	o, admin, brokers, in := r.o, r.admin, r.brokers, r.in
	// Leave the harness's garbage from the last phase collected, so its
	// collector does not compete with the contender for the CPU.
	runtime.GC()
	suffix := fmt.Sprintf("%s-%d", name, run)
	spec := Spec{
		Name:         name,
		Brokers:      brokers,
		InputTopic:   inputTopic,
		OutputTopic:  "bench-output-" + suffix,
		Group:        "bench-" + suffix,
		Ends:         in.ends,
		ExpectedKeys: o.ExpectedKeys,
		FPRate:       o.FPRate,
		Window:       o.Window,
	}
	if err := createTopic(ctx, admin, spec.OutputTopic, len(in.ends)); err != nil {
		return Outcome{}, err
	}
	label := name
	if o.Repeat > 1 {
		label = fmt.Sprintf("%s #%d", name, run+1)
	}
	out, err := runProcess(ctx, o, spec, newBar(o.Progress, label, in.records))
	if err != nil {
		return Outcome{}, err
	}
	if name == StageCounting || name == StagePlain || name == StageFP {
		if out.StateBytes, err = stageStateBytes(spec); err != nil {
			return Outcome{}, err
		}
	}
	out.Verify, err = verify(ctx, brokers, spec.OutputTopic, len(in.ends), in)
	if err != nil {
		return Outcome{}, fmt.Errorf("verify %s: %w", name, err)
	}
	if _, err := admin.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{spec.OutputTopic}}); err != nil {
		return Outcome{}, fmt.Errorf("delete output of %s: %w", name, err)
	}
	out.Rates, out.CPURates = []float64{out.RecordsPerSecond()}, []float64{out.RecordsPerCPUSecond()}
	return out, nil
}

// median returns the run with the median throughput, carrying every run's
// throughput in Rates and the largest peak memory of all runs.
func median(runs []Outcome) Outcome {
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(a, b Outcome) int { return cmp.Compare(a.Elapsed, b.Elapsed) })
	m := sorted[len(sorted)/2]
	m.Rates, m.CPURates = nil, nil
	for _, r := range runs {
		m.Rates = append(m.Rates, r.RecordsPerSecond())
		m.CPURates = append(m.CPURates, r.RecordsPerCPUSecond())
		m.PeakRSS = max(m.PeakRSS, r.PeakRSS)
	}
	return m
}

func createTopic(ctx context.Context, admin *kafka.Client, topic string, partitions int) error {
	resp, err := admin.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1},
	}})
	if err == nil {
		err = resp.Errors[topic]
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// runProcess runs one contender process and returns its result and peak
// resident memory.
func runProcess(ctx context.Context, o Options, s Spec, bar *bar) (Outcome, error) {
	specJSON, err := json.Marshal(s)
	if err != nil {
		return Outcome{}, fmt.Errorf("encode spec: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.ContenderTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.Exe, append(append([]string(nil), o.Args...), string(specJSON))...)
	cmd.Env = append(cmd.Environ(), o.Env...)
	var stderr bytes.Buffer
	cmd.Stderr = &limitedWriter{w: &stderr, n: 64 << 10}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return Outcome{}, fmt.Errorf("start contender %s: %w", s.Name, err)
	}
	if err := cmd.Start(); err != nil {
		return Outcome{}, fmt.Errorf("start contender %s: %w", s.Name, err)
	}
	res, readErr := readReports(stdout, bar.update)
	waitErr := cmd.Wait()
	if err := errors.Join(waitErr, readErr); err != nil {
		bar.fail()
		return Outcome{}, fmt.Errorf("contender %s: %w\n%s", s.Name, err, stderr.Bytes())
	}
	bar.done(res)
	return Outcome{Result: res}, nil
}

// limitedWriter keeps the first n bytes written to it and drops the rest.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.n -= k
		if _, err := l.w.Write(p[:k]); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// harnessGCPercent is the harness's GOGC while the broker holds the input.
const harnessGCPercent = 20

// Per-record memory of the embedded broker with harnessGCPercent: the
// record as encoded plus about 30% (batch structures, collector slack). An
// output record carries the three source headers (about 80 bytes).
const (
	brokerOverhead    = 1.3
	recordFraming     = 12
	outputHeaderBytes = 80
	// exactSetBytesPerKey bounds the exact set's peak memory per key beyond
	// the key itself, for the memory guard's estimate; the sweep in
	// docs/benchmarks.md measures what it really costs.
	exactSetBytesPerKey = 130
	// harnessBaseline and contenderBaseline cover the processes' fixed
	// memory (client buffers, runtime).
	harnessBaseline   = 512 << 20
	contenderBaseline = 300 << 20
)

// memoryNeeded estimates the peak memory of a run: the input in the broker,
// plus the larger of the copy loop's phase (every record forwarded) and the
// exact set's (its map, and the first occurrences forwarded). Contenders run
// one at a time and each output is deleted once verified.
func (o Options) memoryNeeded() uint64 {
	w := o.Workload
	rec := float64(w.KeySize + w.ValueSize + recordFraming)
	out := (rec + outputHeaderBytes) * brokerOverhead
	input := float64(w.Records) * rec * brokerOverhead
	copyPhase := float64(w.Records) * out
	exactPhase := float64(w.Keys) * (out + float64(exactSetBytesPerKey+w.KeySize))
	return uint64(input+max(copyPhase, exactPhase)) + harnessBaseline + contenderBaseline
}

// memAvailable reads MemAvailable from /proc/meminfo (0 when unknown).
func memAvailable() uint64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemAvailable:" {
			kib, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return 0
			}
			return kib * 1024
		}
	}
	return 0
}
