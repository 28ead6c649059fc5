package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"dedup/processor/cluster"
)

// Contender names, in the order a run uses them.
const (
	Copy          = "copy"
	ExactSet      = "exact-set"
	StageCounting = "stage-counting"
	StagePlain    = "stage-plain"
	StageFP       = "stage-fingerprint"
	BoomCounting  = "boom-counting"
	Cuckoo        = "cuckoo"
)

// AllContenders lists every contender a run knows, in run order.
var AllContenders = []string{Copy, ExactSet, StageCounting, StagePlain, StageFP, BoomCounting, Cuckoo}

// DefaultContenders is what a run uses unless told otherwise: every contender
// except the cuckoo filter, whose false-positive rate cannot be configured.
var DefaultContenders = []string{Copy, ExactSet, StageCounting, StagePlain, StageFP, BoomCounting}

// ParseContenders parses a comma-separated list of contender names.
func ParseContenders(s string) ([]string, error) {
	var out, bad []string
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		switch {
		case n == "":
		case slices.Contains(AllContenders, n):
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		default:
			bad = append(bad, n)
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("parse contenders: unknown %q (known: %s)", bad, strings.Join(AllContenders, ","))
	}
	if len(out) == 0 {
		return nil, errors.New("parse contenders: none given")
	}
	return out, nil
}

// Spec tells one contender process what to do. It travels as JSON on the
// command line of the contender process.
type Spec struct {
	Name        string   `json:"name"`
	Brokers     []string `json:"brokers"`
	InputTopic  string   `json:"input_topic"`
	OutputTopic string   `json:"output_topic"`
	Group       string   `json:"group"`
	// Ends are the input partitions' end offsets: the contender is done when
	// it has read every partition up to its end and every forwarded record
	// is acknowledged.
	Ends []int64 `json:"ends"`
	// ExpectedKeys and FPRate size the filters (distinct keys per partition).
	ExpectedKeys uint64        `json:"expected_keys"`
	FPRate       float64       `json:"fp_rate"`
	Window       time.Duration `json:"window"`
}

// Records is the number of input records the spec covers.
func (s Spec) Records() uint64 {
	var n int64
	for _, e := range s.Ends {
		n += e
	}
	return uint64(n)
}

// Result is what a contender reports about its own run.
type Result struct {
	Name string `json:"name"`
	// In is the number of input records processed, Out the number of
	// records forwarded and acknowledged.
	In  uint64 `json:"in"`
	Out uint64 `json:"out"`
	// Elapsed runs from the first input record read to the last output
	// record acknowledged.
	Elapsed time.Duration `json:"elapsed_ns"`
	// StateBytes is the memory the contender's deduplication state takes,
	// and StateHow says how that figure was obtained.
	StateBytes int64  `json:"state_bytes"`
	StateHow   string `json:"state_how"`
	// PeakRSS is the contender process's peak resident set size in bytes
	// (VmHWM), read when it is done.
	PeakRSS int64 `json:"peak_rss"`
	// CPU is the process's CPU time (user and system, every goroutine)
	// within Elapsed.
	CPU time.Duration `json:"cpu_ns"`
}

// RecordsPerCPUSecond is In divided by CPU.
func (r Result) RecordsPerCPUSecond() float64 {
	if r.CPU <= 0 {
		return 0
	}
	return float64(r.In) / r.CPU.Seconds()
}

// RecordsPerSecond is In divided by Elapsed.
func (r Result) RecordsPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.In) / r.Elapsed.Seconds()
}

// message is one line a contender process writes on its standard output.
type message struct {
	Progress *uint64 `json:"progress,omitempty"`
	Result   *Result `json:"result,omitempty"`
}

// reporter writes a contender's progress and result lines.
type reporter struct {
	mu sync.Mutex
	w  io.Writer
}

func (r *reporter) write(m message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// reportProgress writes the value of in every interval until ctx is done.
func (r *reporter) reportProgress(ctx context.Context, interval time.Duration, in func() uint64) {
	cluster.Every(ctx, interval, func() bool {
		n := in()
		return r.write(message{Progress: &n}) == nil
	})
}

// readReports parses a contender's standard output, calling progress for
// every progress line, and returns its result line.
func readReports(r io.Reader, progress func(uint64)) (Result, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var res *Result
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return Result{}, fmt.Errorf("parse contender report %q: %w", sc.Text(), err)
		}
		if m.Progress != nil {
			progress(*m.Progress)
		}
		if m.Result != nil {
			res = m.Result
		}
	}
	if err := sc.Err(); err != nil {
		return Result{}, fmt.Errorf("read contender reports: %w", err)
	}
	if res == nil {
		return Result{}, errors.New("read contender reports: no result line")
	}
	return *res, nil
}

// progressInterval is how often a contender reports progress.
const progressInterval = 100 * time.Millisecond

// RunContender is the body of a contender process: it decodes the spec,
// runs the named contender, and writes progress and result lines to out.
func RunContender(ctx context.Context, specJSON string, out io.Writer) error {
	var s Spec
	if err := json.Unmarshal([]byte(specJSON), &s); err != nil {
		return fmt.Errorf("decode contender spec: %w", err)
	}
	rep := &reporter{w: out}
	var (
		res Result
		err error
	)
	switch s.Name {
	case Copy:
		res, err = runLoop(ctx, s, rep, newCopy)
	case ExactSet:
		res, err = runLoop(ctx, s, rep, newExactSet)
	case BoomCounting:
		res, err = runLoop(ctx, s, rep, newBoomCounting)
	case Cuckoo:
		res, err = runLoop(ctx, s, rep, newCuckoo)
	case StageCounting, StagePlain, StageFP:
		res, err = runStage(ctx, s, rep)
	default:
		err = fmt.Errorf("unknown contender %q", s.Name)
	}
	if err != nil {
		return fmt.Errorf("run contender %s: %w", s.Name, err)
	}
	res.Name = s.Name
	if res.PeakRSS, err = peakRSS(); err != nil {
		return err
	}
	return rep.write(message{Result: &res})
}
