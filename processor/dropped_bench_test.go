package processor

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/bench/stagerun"
	benchload "dedup/bench/workload"
	"dedup/internal/testkit"
)

// droppedDupShare is the share of BenchmarkStageDropped's records that
// repeat a key seen before.
const droppedDupShare = 0.3

// BenchmarkStageDropped measures records/s through the whole stage at
// 30 % duplicates with DROPPED_TOPIC set (every duplicate written there
// as well, through the ack ring) and without it, on the same input, in
// one run, by BenchmarkStageVsCopyLoop's method (the same broker, rotating
// rounds, stagerun's timing, here also waiting for the drop topic to hold
// what was written there, and median per-round ratios), and reports
// dropped/plain. Each run checks that every repeat was dropped and, with
// the drop topic, written there.
//
//	go test ./processor -run '^$' -bench StageDropped -benchtime 1000000x -v
func BenchmarkStageDropped(b *testing.B) {
	n := b.N
	b.StopTimer()
	if n < 1000 {
		return // the framework's b.N = 1 probe
	}
	rounds := envPositive(b, "STAGE_ROUNDS", benchRounds)
	e := newBenchEnv(b)
	if err := e.cluster.CreateTopic(dropTopic, benchParts, nil); err != nil {
		b.Fatal(err)
	}
	w := benchload.Workload{Keys: uint64(float64(n) * (1 - droppedDupShare)), Records: uint64(n),
		KeySize: benchload.MinKeySize, ValueSize: envPositive(b, "STAGE_VALUE_BYTES", benchValueBytes), Partitions: benchParts, Seed: 1}
	seedWorkload(b, e, w)

	procs := map[string]*Processor{}
	run := func(dropped string) stageFunc {
		return func(b *testing.B, e *testEnv, group string, _ int) stagerun.Options {
			o := benchOptions(e, group)
			o.DroppedTopic = dropped
			p := mustNew(b, o)
			procs[group] = p
			so := stageRun(p)
			if dropped != "" {
				so.Also = []stagerun.Output{{Client: testkit.KafkaClient(b, e.brokers...), Topic: dropped, Partitions: benchParts}}
			}
			return so
		}
	}
	contenders := []contender{{"plain", run("")}, {"dropped", run(dropTopic)}}
	dups := w.Records - w.Keys
	runs := runRounds(b, e, n, rounds, contenders, func(round int, runs map[string][]rates) {
		for _, c := range contenders {
			pr := procs[fmt.Sprintf("%s-%d", c.group, round)].Progress()
			if wantDropped := map[string]uint64{"plain": 0, "dropped": pr.Duplicates}[c.group]; pr.Duplicates < dups || pr.Dropped != wantDropped {
				b.Fatalf("round %d, %s: %d duplicates of %d, %d written to the drop topic, want %d", round, c.group, pr.Duplicates, dups, pr.Dropped, wantDropped)
			}
		}
		pl, dr := runs["plain"][round], runs["dropped"][round]
		b.Logf("round %d: plain %8.0f rec/s %8.0f rec/cpu-s | dropped %8.0f %8.0f | dropped/plain %.3f wall %.3f cpu",
			round, pl.wall, pl.cpu, dr.wall, dr.cpu, dr.wall/pl.wall, dr.cpu/pl.cpu)
	})
	median := func(name string, f func(rates) float64) float64 {
		xs := make([]float64, len(runs[name]))
		for i, r := range runs[name] {
			xs[i] = f(r)
		}
		return medianOf(xs)
	}
	b.ReportMetric(median("plain", wallRate), "plain-rec/s")
	b.ReportMetric(median("dropped", wallRate), "dropped-rec/s")
	b.ReportMetric(medianRatio(runs, "dropped", "plain", wallRate), "dropped/plain")
	b.ReportMetric(medianRatio(runs, "dropped", "plain", cpuRate), "dropped/plain-cpu")
	b.ReportMetric(0, "ns/op") // the figures above are the result
}

// seedWorkload produces w's records to the input topic, each to the
// partition the generator chose, stamped in stream order.
func seedWorkload(b *testing.B, e *testEnv, w benchload.Workload) {
	const chunk = 10000
	recs := make([]*kgo.Record, 0, chunk)
	g := benchload.NewGenerator(w)
	for r := g.Next(); r != nil; r = g.Next() {
		recs = append(recs, &kgo.Record{Partition: int32(r.Partition), Key: append([]byte(nil), r.Key...),
			Value: append([]byte(nil), r.Value...), Timestamp: t0.Add(time.Duration(r.Index) * time.Microsecond)})
		if len(recs) == chunk || r.Index == w.Records-1 {
			e.produce(recs...)
			recs = recs[:0]
		}
	}
}
