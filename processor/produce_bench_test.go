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
	runRatio(b, [2]contender{
		{"classified", stage(func(*Processor) {})},
		{"blind", stage(func(p *Processor) { p.plainProduce = true })},
	}, "classified", "blind", "classified/blind")
}
