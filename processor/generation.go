package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// generation is what the workers of one consumer-group generation share.
type generation struct {
	gen   *kafka.Generation
	route partitioner
	out   *output // the writer of this generation
}

// runGeneration runs one generation to its end: a supervisor started with
// gen.Start reads the partition counts, starts one worker per assigned
// partition (each with gen.Start, so a worker that returns ends the
// generation), waits for the generation's context to end (rebalance,
// group closed) and then for every worker to flush, checkpoint and commit.
func (p *Processor) runGeneration(gen *kafka.Generation) {
	done := make(chan struct{})
	gen.Start(func(ctx context.Context) {
		defer close(done)
		p.superviseGeneration(ctx, gen)
	})
	<-done
}

func (p *Processor) superviseGeneration(ctx context.Context, gen *kafka.Generation) {
	assigned := gen.Assignments[p.o.InputTopic]
	ids := make([]int, len(assigned))
	for i, a := range assigned {
		ids[i] = a.ID
	}
	sort.Ints(ids)
	log := p.log.With("group", p.o.GroupID, "generation", gen.ID)
	log.Info("generation joined", "member", gen.MemberID, "partitions", ids)
	p.forgetUnassigned(assigned)

	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	in, out, err := p.partitionCounts(mctx)
	cancel()
	if err != nil {
		// Returning ends the generation; the group rejoins after a pause.
		log.Error("start generation", "err", err)
		sleep(ctx, time.Second)
		return
	}
	g := &generation{gen: gen, route: newPartitioner(in, out), out: p.out}

	p.mu.Lock()
	p.inGen, p.assigned, p.readyN = true, len(assigned), 0
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inGen, p.assigned, p.readyN = false, 0, 0
		p.mu.Unlock()
	}()

	var wg sync.WaitGroup
	for _, a := range assigned {
		wg.Add(1)
		gen.Start(func(ctx context.Context) {
			defer wg.Done()
			p.runPartition(ctx, g, a)
		})
	}
	<-ctx.Done()
	wg.Wait()
	log.Info("generation ended", "partitions", ids)
}

// runPartition restores, consumes and, at the generation's end, stops one
// partition. Returning ends the generation (the group rejoins and the
// partition restarts from its last checkpoint or commit); a produce failure
// also has Run replace the writer first.
func (p *Processor) runPartition(ctx context.Context, g *generation, a kafka.PartitionAssignment) {
	w, err := p.startWorker(ctx, g, a)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Error("start partition", "topic", p.o.InputTopic, "partition", a.ID, "err", err)
			sleep(ctx, time.Second)
		}
		return
	}
	p.metrics.assigned.Inc()
	defer p.metrics.assigned.Dec()
	p.mu.Lock()
	p.readyN++
	p.mu.Unlock()

	err = w.run(ctx)
	var perr *ProduceError
	switch {
	case errors.As(err, &perr) && refused(perr):
		// Stopped, not retried: the refusal would repeat. The generation
		// goes on for the other partitions; this one no longer consumes.
		p.stall(perr)
		p.mu.Lock()
		p.readyN--
		p.mu.Unlock()
		<-ctx.Done()
	case errors.As(err, &perr):
		p.produceFailed(g.out, perr)
	case err != nil:
		w.log.Error("partition stopped", "err", err)
	}
}

// stop ends a worker: flush, let a running checkpoint finish, then
// checkpoint and commit everything acknowledged, close the reader. Bounded
// by the rebalance timeout, which is how long the group waits for us.
func (w *worker) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), w.p.o.RebalanceTimeout)
	defer cancel()
	began := time.Now()
	errs := []error{w.flush()}
	w.cp.stopSaver()
	w.publishCounts()
	w.updateGauges()
	if w.position != w.cp.last && w.acks.failed() == nil && !w.p.crashed.Load() {
		// The worker has stopped, so no output of an input >= position will
		// follow: end offsets read after the acknowledgements are complete.
		err := w.acks.waitAcknowledged(ctx, w.position)
		var ends map[int]int64
		if err == nil && w.cp.store != nil {
			ends, err = w.p.outputEnds(ctx, w.route, w.partition)
		}
		if err == nil {
			err = w.finishCheckpoint(ctx, w.position, ends, w.pair, began)
		}
		if err == nil {
			w.cp.last = w.position
		}
		errs = append(errs, err)
	}
	errs = append(errs, w.reader.Close())
	w.log.Info("partition revoked", "position", w.position, "committed", w.cp.last)
	return errors.Join(errs...)
}

// completion is the writer's Completion callback: it settles each record's
// ack slot. Write errors are checked record by record (kafka.WriteErrors)
// when the writer reports them so, else the batch error applies to all.
func (p *Processor) completion(out *output, msgs []kafka.Message, err error) {
	now := time.Now()
	var werrs kafka.WriteErrors
	errors.As(err, &werrs)
	var (
		t      *ackTracker
		failed int
	)
	for i := range msgs {
		s, ok := msgs[i].WriterData.(*ackSlot)
		if !ok {
			continue
		}
		e := err
		if werrs != nil {
			e = nil
			if i < len(werrs) {
				e = werrs[i]
			}
		}
		if s.t != t {
			if t != nil {
				t.retireLocked()
				t.mu.Unlock()
			}
			t = s.t
			t.mu.Lock()
		}
		switch {
		case errors.Is(e, errAborted):
			// Never sent, by design: not a produce error of its own (the
			// one that broke the writer was counted).
		case e != nil:
			failed++
		case !s.ts.IsZero():
			p.metrics.latency.Observe(now.Sub(s.ts).Seconds())
		}
		t.completeLocked(s, e)
	}
	if t != nil {
		t.retireLocked()
		t.mu.Unlock()
	}
	if failed > 0 {
		out.broken.Store(true)
		p.metrics.produceErrors.WithLabelValues(p.o.OutputTopic).Add(float64(failed))
		p.log.Error("produce failed", "topic", p.o.OutputTopic, "records", failed, "err", err)
	}
}

// commit commits offset (the next to read) of one input partition.
func (p *Processor) commit(g *generation, topic string, partition int, offset int64) error {
	p.commitMu.Lock()
	defer p.commitMu.Unlock()
	return g.gen.CommitOffsets(map[string]map[int]int64{topic: {partition: offset}})
}

// outputEnds reads the end offsets of the output partitions an input
// partition can write to: its own when routing keeps partitions, else all.
func (p *Processor) outputEnds(ctx context.Context, route partitioner, inputPartition int) (map[int]int64, error) {
	var reqs []kafka.OffsetRequest
	if route.same {
		reqs = []kafka.OffsetRequest{kafka.LastOffsetOf(inputPartition)}
	} else {
		for _, part := range route.parts {
			reqs = append(reqs, kafka.LastOffsetOf(part))
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := p.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{p.o.OutputTopic: reqs}})
	if err != nil {
		return nil, fmt.Errorf("list offsets of %s: %w", p.o.OutputTopic, err)
	}
	ends := make(map[int]int64, len(reqs))
	for _, po := range res.Topics[p.o.OutputTopic] {
		if po.Error != nil {
			return nil, fmt.Errorf("list offsets of %s/%d: %w", p.o.OutputTopic, po.Partition, po.Error)
		}
		ends[po.Partition] = po.LastOffset
	}
	if len(ends) != len(reqs) {
		return nil, fmt.Errorf("list offsets of %s: %d of %d partitions answered", p.o.OutputTopic, len(ends), len(reqs))
	}
	return ends, nil
}

// partitionCounts reads how many partitions the input and output topics
// have; routing depends on whether they match.
func (p *Processor) partitionCounts(ctx context.Context) (in, out int, err error) {
	res, err := p.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{p.o.InputTopic, p.o.OutputTopic}})
	if err != nil {
		return 0, 0, fmt.Errorf("read metadata: %w", err)
	}
	for _, t := range res.Topics {
		if t.Error != nil {
			return 0, 0, fmt.Errorf("read metadata of %s: %w", t.Name, t.Error)
		}
		switch t.Name {
		case p.o.InputTopic:
			in = len(t.Partitions)
		case p.o.OutputTopic:
			out = len(t.Partitions)
		}
	}
	if in == 0 || out == 0 {
		return 0, 0, fmt.Errorf("read metadata: %s has %d partitions, %s has %d", p.o.InputTopic, in, p.o.OutputTopic, out)
	}
	return in, out, nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// kafkaLogger adapts kafka-go's Printf logger to slog. kafka-go reports
// retried, transient conditions through its error logger too, so they go
// to Debug; what matters surfaces as errors returned to the processor.
type kafkaLogger struct{ log *slog.Logger }

func (l kafkaLogger) Printf(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...))
}
