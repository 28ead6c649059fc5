package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/errgroup"

	"dedup/offsets"
	"dedup/processor"
	"dedup/rotation"
)

// How often the stage contender looks for the processor to start consuming,
// and at the output's end offsets: they bound the error of the measured
// elapsed time.
const (
	stageStartPoll = 250 * time.Microsecond
	stageEndPoll   = 5 * time.Millisecond
)

// runStage runs this project's processor, without checkpoints, until it has
// read every input record and the output holds every record it forwarded.
func runStage(ctx context.Context, s Spec, rep *reporter) (Result, error) {
	filter := stageFilter(s)
	key, err := processor.ParseKeySource("key")
	if err != nil {
		return Result{}, err
	}
	p, err := processor.New(processor.Options{
		Brokers:       s.Brokers,
		GroupID:       s.Group,
		InputTopic:    s.InputTopic,
		OutputTopic:   s.OutputTopic,
		StartOffset:   kafka.FirstOffset,
		Key:           key,
		Filter:        filter,
		BatchSize:     batchSize,
		BatchBytes:    batchBytes,
		BatchTimeout:  batchTimeout,
		FetchMaxBytes: fetchMaxByte,
		FetchMaxWait:  fetchMaxWait,
		Logger:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return Result{}, err
	}

	var in atomic.Uint64
	pctx, stopProgress := context.WithCancel(ctx)
	defer stopProgress()
	go rep.reportProgress(pctx, progressInterval, in.Load)

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	g, gctx := errgroup.WithContext(runCtx)
	g.Go(func() error {
		err := p.Run(gctx)
		if err == nil && runCtx.Err() == nil {
			err = errors.New("processor returned before the input was consumed")
		}
		return err
	})

	var res Result
	g.Go(func() error {
		defer stopRun() // the processor's job is done: let Run flush and leave
		return watchStage(gctx, p, s, &in, &res)
	})
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return Result{}, err
	}
	if res.In == 0 {
		return Result{}, fmt.Errorf("stage stopped: %w", ctx.Err())
	}
	// The harness fills in StateBytes (stageStateBytes): sizing a pair here
	// would allocate one and add it to this process's peak memory.
	res.StateHow = "filter size"
	return res, nil
}

func stageFilter(s Spec) rotation.Options {
	mode := rotation.Counting
	switch s.Name {
	case StagePlain:
		mode = rotation.Plain
	case StageFP:
		mode = rotation.Fingerprint
	}
	return rotation.Options{ExpectedKeys: s.ExpectedKeys, FPRate: s.FPRate, Window: s.Window, Mode: mode}
}

// stageStateBytes is the memory of the stage's filter pairs, one per input
// partition: what rotation.Pair.SizeBytes reports for the spec's sizing.
func stageStateBytes(s Spec) (int64, error) {
	pair, err := rotation.New(stageFilter(s))
	if err != nil {
		return 0, fmt.Errorf("size filters: %w", err)
	}
	return int64(pair.SizeBytes()) * int64(len(s.Ends)), nil
}

// watchStage times the processor from outside, since it counts progress only
// every tick (100ms): the clock starts when the processor reports every
// assigned partition consuming (Ready; the input is already there, so this
// is when reading starts, one fetch earlier than the loop contenders' first
// record), and stops when the output's end offsets last moved, once the
// processor has decided every input record and the output holds everything
// it forwarded.
func watchStage(ctx context.Context, p *processor.Processor, s Spec, in *atomic.Uint64, res *Result) error {
	total := s.Records()
	start := time.NewTicker(stageStartPoll)
	defer start.Stop()
	for !p.Ready() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("stage never started consuming: %w", context.Cause(ctx))
		case <-start.C:
		}
	}
	first := time.Now()
	start.Stop()

	client := &kafka.Client{Addr: kafka.TCP(s.Brokers...)}
	t := time.NewTicker(stageEndPoll)
	defer t.Stop()
	var (
		ends       uint64
		lastChange time.Time
	)
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("stage stopped after %d of %d records: %w", in.Load(), total, context.Cause(ctx))
		case <-t.C:
		}
		sum, err := offsets.EndSum(ctx, client, s.OutputTopic, len(s.Ends))
		if err != nil {
			return err
		}
		if e := uint64(sum); e != ends || lastChange.IsZero() {
			ends, lastChange = e, time.Now()
		}
		pr := p.Progress()
		in.Store(pr.In)
		decided := pr.Forwarded + pr.Duplicates + pr.Unkeyed + pr.Retractions
		if pr.In >= total && decided >= total && ends >= pr.Forwarded {
			*res = Result{In: pr.In, Out: pr.Forwarded, Elapsed: lastChange.Sub(first)}
			return nil
		}
	}
}
