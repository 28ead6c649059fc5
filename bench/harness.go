package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Options configure one harness run.
type Options struct {
	Workload   Workload
	Contenders []string // default DefaultContenders
	// FPRate and ExpectedKeys size every filter contender; ExpectedKeys is
	// per partition and defaults to the largest number of distinct keys any
	// partition receives.
	FPRate       float64
	ExpectedKeys uint64
	// Window is the filters' window; every input record is timestamped
	// within one window (default 1h).
	Window time.Duration
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
}

// Outcome is one contender's measured and verified run.
type Outcome struct {
	Result
	Verify Verification
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
	Workload     Workload
	FPRate       float64
	ExpectedKeys uint64
	Firsts       uint64 // first occurrences in the input (= Workload.Keys)
	Preload      time.Duration
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

func outputTopic(contender string) string { return "bench-output-" + contender }

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
	if o.ExpectedKeys == 0 {
		o.ExpectedKeys = o.Workload.KeysPerPartition()
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
	topics := []string{inputTopic}
	for _, c := range o.Contenders {
		topics = append(topics, outputTopic(c))
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(w.Partitions), topics...))
	if err != nil {
		return Report{}, fmt.Errorf("start embedded broker: %w", err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	rep := Report{Workload: w, FPRate: o.FPRate, ExpectedKeys: o.ExpectedKeys}
	fmt.Fprintf(o.Progress, "input: %d records, %d distinct keys (%.0f%% duplicates), %d partitions, key %d B, value %d B\n",
		w.Records, w.Keys, 100*float64(w.Records-w.Keys)/float64(w.Records), w.Partitions, w.KeySize, w.ValueSize)
	start := time.Now()
	in, err := preload(ctx, brokers, w, o.Window, newBar(o.Progress, "load input", w.Records))
	if err != nil {
		return Report{}, err
	}
	rep.Preload = time.Since(start)
	rep.Firsts = in.firsts

	admin := &kafka.Client{Addr: kafka.TCP(brokers...)}
	for _, name := range o.Contenders {
		// Leave the harness's garbage from the last phase collected, so its
		// collector does not compete with the contender for the CPU.
		runtime.GC()
		spec := Spec{
			Name:         name,
			Brokers:      brokers,
			InputTopic:   inputTopic,
			OutputTopic:  outputTopic(name),
			Group:        "bench-" + name,
			Ends:         in.ends,
			ExpectedKeys: o.ExpectedKeys,
			FPRate:       o.FPRate,
			Window:       o.Window,
		}
		out, err := runProcess(ctx, o, spec, newBar(o.Progress, name, w.Records))
		if err != nil {
			return rep, err
		}
		if name == StageCounting || name == StagePlain {
			if out.StateBytes, err = stageStateBytes(spec); err != nil {
				return rep, err
			}
		}
		out.Verify, err = verify(ctx, brokers, spec.OutputTopic, w.Partitions, in)
		if err != nil {
			return rep, fmt.Errorf("verify %s: %w", name, err)
		}
		if _, err := admin.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{spec.OutputTopic}}); err != nil {
			return rep, fmt.Errorf("delete output of %s: %w", name, err)
		}
		rep.Outcomes = append(rep.Outcomes, out)
	}
	return rep, nil
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
