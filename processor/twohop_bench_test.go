package processor

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"dedup/bench/stagerun"
	"dedup/processor/repartition"
)

// BenchmarkTwoHopsVsOneHop measures records/s through the stage with
// REPARTITION_TOPIC (hop 1 re-keying the input into a repartition topic of
// benchParts partitions, hop 2 deduplicating from it, in one process) and
// through the stage alone, on the same pre-keyed input (the record key is
// the dedup key), the same in-process broker, in one run, and reports
// two-hops/one-hop, the median of the per-round ratios (as
// BenchmarkStageVsCopyLoop, whose seeding, rounds and timing it shares).
// The second hop pays for a second produce and fetch of every record, its
// origin headers, and hop 1's batches waiting for their acknowledgements.
//
//	go test ./processor -run '^$' -bench TwoHopsVsOneHop -benchtime 1000000x -v
func BenchmarkTwoHopsVsOneHop(b *testing.B) {
	runRatio(b, [2]contender{
		{"one-hop", stage(func(*Processor) {})},
		{"two-hops", twoHops},
	}, "two-hops", "one-hop", "two/one")
}

// twoHops is the stage with the repartition hop: hop 2 is a Processor
// with benchOptions reading a repartition topic of its own run, hop 1 its
// re-key hop with the same batch and fetch settings.
func twoHops(b *testing.B, e *testEnv, group string, _ int) stagerun.Options {
	topic := "repartition-" + group
	if _, err := repartition.EnsureTopic(context.Background(), e.brokers, nil, topic, inTopic, benchParts, testLogger()); err != nil {
		b.Fatal(err)
	}
	o := benchOptions(e, group)
	o.InputTopic, o.Repartitioned = topic, true
	p, err := New(o)
	if err != nil {
		b.Fatalf("New: %v", err)
	}
	lag := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lag"}, []string{"topic", "partition"})
	s := &twoHopStage{p: p, lag: lag, hop1: repartition.Options{
		Brokers: e.brokers, GroupID: group + "-repartition", InputTopic: inTopic, Topic: topic, Key: o.Key,
		SessionTimeout: o.SessionTimeout, RebalanceTimeout: o.RebalanceTimeout, HeartbeatInterval: o.HeartbeatInterval,
		BatchSize: o.BatchSize, BatchBytes: int(o.BatchBytes), Compression: o.Compression, FetchMaxBytes: 1 << 20, FetchMaxWait: o.FetchMaxWait, // as dedup run sets them
		Metrics: repartition.Metrics{Lag: lag}, Logger: testLogger(),
	}}
	run := stageRun(p)
	run.Stage = s
	return run
}

// twoHopStage runs both hops; it is ready once hop 2 consumes every
// repartition partition and hop 1 holds every input partition.
type twoHopStage struct {
	p    *Processor
	hop1 repartition.Options
	lag  *prometheus.GaugeVec
}

func (s *twoHopStage) Run(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- repartition.Run(ctx, s.hop1) }()
	err := s.p.Run(ctx)
	if herr := <-done; herr != nil && !errors.Is(herr, context.Canceled) {
		err = errors.Join(err, herr)
	}
	return err
}

func (s *twoHopStage) Ready() bool {
	ch := make(chan prometheus.Metric, 4*benchParts)
	s.lag.Collect(ch) // a series per input partition hop 1 holds
	return s.p.Ready() && len(ch) == benchParts
}
