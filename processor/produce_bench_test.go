package processor

import "testing"

// BenchmarkProducePath measures records/s of the whole stage with its
// produce path (the writer's transport classifies every produce outcome,
// outcomes, and asks the lease before each request and before each write
// of one to the socket, fencedConn) against the same stage on kafka-go's
// own path (outcomes unclassified, so its blind retries; no lease asked),
// on the no-fault path: same broker, same seeded input, in one run. The two
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
	contenders := []contender{
		{"classified", stage(func(*Processor) {})},
		{"blind", stage(func(p *Processor) { p.plainProduce = true })},
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
