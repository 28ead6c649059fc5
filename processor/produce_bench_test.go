package processor

import (
	"context"
	"testing"
	"time"
)

// BenchmarkProducePath measures records/s of the whole stage with its
// produce path (the writer's transport classifies every produce outcome,
// outcomes) against the same stage whose transport hands outcomes to
// kafka.Writer unclassified (its blind retries, the previous path), on the
// no-fault path: same broker, same seeded input, in one run. The two
// alternate for STAGE_ROUNDS rounds (default 5), the order rotating; the
// reported ratios are medians of per-round ratios, per wall-clock second
// and per CPU second (see BenchmarkStageVsCopyLoop for the method).
//
//	go test ./processor -run '^$' -bench ProducePath -benchtime 1000000x -v
func BenchmarkProducePath(b *testing.B) {
	e, n, rounds := seededBench(b)
	if e == nil {
		return
	}
	outputs := stageOutputs(b, n)
	contenders := []contender{
		{"classified", outputs, runStageWith(func(*Processor) {})},
		{"blind", outputs, runStageWith(func(p *Processor) { p.blindRetries = true })},
	}
	runs := runRounds(b, e, n, rounds, contenders, func(round int, runs map[string][]rates) {
		cl, bl := runs["classified"][round], runs["blind"][round]
		b.Logf("round %d: classified %8.0f rec/s %8.0f rec/cpu-s | blind %8.0f %8.0f | classified/blind %.3f wall %.3f cpu",
			round, cl.wall, cl.cpu, bl.wall, bl.cpu, cl.wall/bl.wall, cl.cpu/bl.cpu)
	})
	b.ReportMetric(medianRatio(runs, "classified", "blind", wallRate), "classified/blind")
	b.ReportMetric(medianRatio(runs, "classified", "blind", cpuRate), "classified/blind-cpu")
	b.ReportMetric(0, "ns/op") // the figures above are the result
}

// runStageWith starts the stage as runStage does, after configure has set
// what the contender changes.
func runStageWith(configure func(*Processor)) runFunc {
	return func(b *testing.B, e *testEnv, group string, _ int, consuming chan<- struct{}) func() {
		p, err := New(benchOptions(e, group))
		if err != nil {
			b.Fatalf("New: %v", err)
		}
		configure(p)
		ctx, cancel := context.WithCancel(context.Background())
		r := &running{p: p, cancel: cancel, done: make(chan error, 1)}
		go func() { r.done <- p.Run(ctx) }()
		go func() {
			for !p.Ready() {
				time.Sleep(time.Millisecond)
			}
			close(consuming)
		}()
		return func() {
			if err := r.stop(b); err != nil {
				b.Error(err)
			}
		}
	}
}
