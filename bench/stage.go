package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/bench/stagerun"
	"dedup/key"
	"dedup/processor"
	"dedup/rotation"
)

// runStage runs this project's processor, without checkpoints, timed by
// stagerun's rule until it has decided every input record and the output
// holds every record it forwarded.
func runStage(ctx context.Context, s Spec, rep *reporter) (Result, error) {
	filter := stageFilter(s)
	keys, err := key.Parse("key")
	if err != nil {
		return Result{}, err
	}
	p, err := processor.New(processor.Options{
		Brokers:       s.Brokers,
		GroupID:       s.Group,
		InputTopic:    s.InputTopic,
		OutputTopic:   s.OutputTopic,
		StartOffset:   kafka.FirstOffset,
		Key:           keys,
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

	pctx, stopProgress := context.WithCancel(ctx)
	defer stopProgress()
	go rep.reportProgress(pctx, progressInterval, func() uint64 { return p.Progress().In })
	go heapProfileAt(pctx, s.Records()/2, func() uint64 { return p.Progress().In })
	cpu := sampleCPU(pctx)

	out, closeOut := newClient(s.Brokers)
	defer closeOut()
	run, err := stagerun.Start(ctx, stagerun.Options{
		Stage: p,
		Counts: func() stagerun.Counts {
			pr := p.Progress()
			return stagerun.Counts{In: pr.In, Decided: pr.Decided(), Written: pr.Written()}
		},
		Output:  stagerun.Output{Client: out, Topic: s.OutputTopic, Partitions: len(s.Ends)},
		Records: s.Records(),
	})
	if err != nil {
		return Result{}, err
	}
	res, err := run.Finish(ctx)
	err = errors.Join(err, run.Stop()) // the processor's job is done: let Run flush and leave
	if err != nil {
		return Result{}, fmt.Errorf("run stage: %w", err)
	}
	// The harness fills in StateBytes (stageStateBytes): sizing a pair here
	// would allocate one and add it to this process's peak memory.
	return Result{In: res.In, Out: res.Written, Elapsed: res.Elapsed(), CPU: cpu.between(res.Began, res.Ended), StateHow: "filter size"}, nil
}

// heapProfileAt writes a heap profile to $DEDUP_BENCH_HEAPPROFILE, when
// set, once in records have been read: mid-run, with every partition's
// reader, ring and writer batches full, which a profile at exit misses.
func heapProfileAt(ctx context.Context, at uint64, in func() uint64) {
	path := os.Getenv("DEDUP_BENCH_HEAPPROFILE")
	if path == "" {
		return
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for in() < at {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "heap profile: %v\n", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		fmt.Fprintf(os.Stderr, "heap profile: %v\n", err)
	}
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
