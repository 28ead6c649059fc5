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

	"dedup/processor"
	"dedup/rotation"
)

// stagePoll is how often the stage contender looks at the processor's
// progress and the output's end offsets; it bounds the error of the measured
// elapsed time.
const stagePoll = 2 * time.Millisecond

// runStage runs this project's processor, without checkpoints, until it has
// read every input record and the output holds every record it forwarded.
func runStage(ctx context.Context, s Spec, rep *reporter) (Result, error) {
	mode := rotation.Counting
	if s.Name == StagePlain {
		mode = rotation.Plain
	}
	filter := rotation.Options{ExpectedKeys: s.ExpectedKeys, FPRate: s.FPRate, Window: s.Window, Mode: mode}
	pair, err := rotation.New(filter)
	if err != nil {
		return Result{}, fmt.Errorf("size filters: %w", err)
	}
	stateBytes := int64(pair.SizeBytes()) * int64(len(s.Ends))
	pair = nil // only its size was wanted; the processor makes its own

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

	total := s.Records()
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
		t := time.NewTicker(stagePoll)
		defer t.Stop()
		var first time.Time
		for first.IsZero() || in.Load() < total {
			select {
			case <-gctx.Done():
				return fmt.Errorf("stage stopped after %d of %d records: %w", in.Load(), total, context.Cause(gctx))
			case <-t.C:
			}
			pr := p.Progress()
			in.Store(pr.In)
			if first.IsZero() && pr.In > 0 {
				first = time.Now()
			}
		}
		client := &kafka.Client{Addr: kafka.TCP(s.Brokers...)}
		for {
			pr := p.Progress()
			if pr.Forwarded+pr.Duplicates+pr.Unkeyed+pr.Retractions >= total {
				ends, err := outputEnds(gctx, client, s.OutputTopic, len(s.Ends))
				if err != nil {
					return err
				}
				if ends >= pr.Forwarded {
					res = Result{In: pr.In, Out: pr.Forwarded, Elapsed: time.Since(first)}
					return nil
				}
			}
			select {
			case <-gctx.Done():
				return fmt.Errorf("stage stopped before its output was acknowledged: %w", context.Cause(gctx))
			case <-t.C:
			}
		}
	})
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return Result{}, err
	}
	if res.In == 0 {
		return Result{}, fmt.Errorf("stage stopped: %w", ctx.Err())
	}
	res.StateBytes, res.StateHow = stateBytes, "filter size"
	return res, nil
}

// outputEnds returns the sum of the end offsets of the topic's partitions.
func outputEnds(ctx context.Context, c *kafka.Client, topic string, partitions int) (uint64, error) {
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for p := range partitions {
		req.Topics[topic] = append(req.Topics[topic], kafka.LastOffsetOf(p))
	}
	resp, err := c.ListOffsets(ctx, req)
	if err != nil {
		return 0, fmt.Errorf("list output offsets: %w", err)
	}
	var sum uint64
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			return 0, fmt.Errorf("list output offsets of partition %d: %w", po.Partition, po.Error)
		}
		sum += uint64(po.LastOffset)
	}
	return sum, nil
}
