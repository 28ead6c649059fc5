package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"dedup/bench/workload"
	"dedup/internal/testkit"
)

// contenderEnv makes the test binary act as a contender process: the harness
// re-executes the test binary with the spec as its only argument.
const contenderEnv = "DEDUP_BENCH_TEST_CONTENDER"

func TestMain(m *testing.M) {
	testkit.Main(m, contenderEnv, func() int {
		if err := RunContender(context.Background(), os.Args[len(os.Args)-1], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	})
}

// TestHarnessRunsEveryContender runs the whole harness on a tiny input: every
// contender as its own process, every output verified against the generator.
func TestHarnessRunsEveryContender(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	w := workload.Workload{Keys: 500, Records: 2000, KeySize: 24, ValueSize: 32, Partitions: 3, Seed: 7}
	var progress bytes.Buffer
	rep, err := Run(ctx, Options{
		Workload:   w,
		Contenders: AllContenders,
		// Sized so that a false drop among 500 keys is vanishingly unlikely
		// (expected about 5e-4): every deduplicating contender must then
		// forward exactly the first occurrences.
		FPRate:           1e-6,
		Exe:              os.Args[0],
		Env:              []string{contenderEnv + "=1"},
		Progress:         &progress,
		ContenderTimeout: 3 * time.Minute,
	})
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}
	if rep.Firsts != w.Keys {
		t.Fatalf("input has %d first occurrences, want %d", rep.Firsts, w.Keys)
	}
	if len(rep.Outcomes) != len(AllContenders) {
		t.Fatalf("%d outcomes, want %d", len(rep.Outcomes), len(AllContenders))
	}
	for _, o := range rep.Outcomes {
		t.Run(o.Name, func(t *testing.T) {
			v := o.Verify
			if o.In != w.Records {
				t.Errorf("read %d records, want %d", o.In, w.Records)
			}
			if o.Out != v.Forwarded {
				t.Errorf("reports %d forwarded, output holds %d", o.Out, v.Forwarded)
			}
			if v.Foreign != 0 || v.Repeated != 0 {
				t.Errorf("output has %d foreign and %d repeated records", v.Foreign, v.Repeated)
			}
			if o.PeakRSS <= 0 || o.Elapsed <= 0 || o.CPU <= 0 {
				t.Errorf("peak RSS %d, elapsed %v, CPU %v: want all positive", o.PeakRSS, o.Elapsed, o.CPU)
			}
			switch o.Name {
			case Copy:
				if v.Forwarded != w.Records || v.DupsDropped != 0 {
					t.Errorf("copy forwarded %d (dropped %d), want every one of %d", v.Forwarded, v.DupsDropped, w.Records)
				}
			case Cuckoo:
				// Fixed 8-bit fingerprints: false drops are expected; only
				// the accounting must add up.
				if v.FirstForwarded+v.FalseDrops != w.Keys {
					t.Errorf("first occurrences %d forwarded + %d dropped != %d", v.FirstForwarded, v.FalseDrops, w.Keys)
				}
			default:
				if v.FirstForwarded != w.Keys || v.FalseDrops != 0 || v.DupForwarded != 0 {
					t.Errorf("forwarded %d first occurrences (%d false drops) and %d duplicates; want %d, 0, 0",
						v.FirstForwarded, v.FalseDrops, v.DupForwarded, w.Keys)
				}
			}
		})
	}
	exact, _ := rep.Outcome(ExactSet)
	for _, name := range []string{StageCounting, StagePlain, BoomCounting} {
		if o, _ := rep.Outcome(name); o.Verify.Forwarded != exact.Verify.Forwarded {
			t.Errorf("%s forwarded %d, exact set %d", name, o.Verify.Forwarded, exact.Verify.Forwarded)
		}
	}

	var table bytes.Buffer
	if err := WriteTable(&table, rep); err != nil {
		t.Fatal(err)
	}
	for _, name := range AllContenders {
		if !strings.Contains(table.String(), "| "+name+" ") {
			t.Errorf("table lacks a row for %s:\n%s", name, table.String())
		}
	}
	// Every contender but the copy loop gets its ratios to it, wall and CPU.
	if n := len(regexp.MustCompile(`\|\s+\d+\.\d{3}, \d+\.\d{3} +\|`).FindAllString(table.String(), -1)); n != len(AllContenders)-1 {
		t.Errorf("%d rows with ratios to the copy loop, want %d:\n%s", n, len(AllContenders)-1, table.String())
	}
	files, err := Plot(t.TempDir(), []Report{rep})
	if err != nil || len(files) != 2 {
		t.Errorf("plot wrote %v: %v", files, err)
	}
}

// TestRoundsRatio: the median of per-round ratios, not the ratio of
// medians: a round where both ran slow counts as one ratio.
func TestRoundsRatio(t *testing.T) {
	for _, tc := range []struct {
		of, copies []float64
		want       string
	}{
		{[]float64{10}, []float64{20}, "0.500"},
		{[]float64{10, 100, 30}, []float64{10, 50, 40}, "1.000 (median of 3)"}, // 1, 2, 0.75
		{[]float64{3, 4}, []float64{2, 2}, "1.750 (median of 2)"},
		{[]float64{1, 2}, []float64{0, 0}, "—"},
	} {
		if got := roundsRatio(tc.of, tc.copies); got != tc.want {
			t.Errorf("roundsRatio(%v, %v) = %q, want %q", tc.of, tc.copies, got, tc.want)
		}
	}
}

// TestCPUSamplerBetween: the CPU time between two instants is interpolated
// from the samples around them.
func TestCPUSamplerBetween(t *testing.T) {
	t0 := time.Unix(100, 0)
	s := &cpuSampler{samples: []cpuSample{{t0, 0}, {t0.Add(time.Second), time.Second}, {t0.Add(2 * time.Second), 3 * time.Second}}}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tc := range []struct {
		at   time.Time
		want time.Duration
	}{
		{t0.Add(-time.Second), 0},
		{t0.Add(500 * time.Millisecond), 500 * time.Millisecond},
		{t0.Add(1500 * time.Millisecond), 2 * time.Second},
		{t0.Add(3 * time.Second), 3 * time.Second},
	} {
		if got := s.at(tc.at); got != tc.want {
			t.Errorf("at %v: %v, want %v", tc.at.Sub(t0), got, tc.want)
		}
	}
}
