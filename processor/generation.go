package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"dedup/checkpoint"
	"dedup/processor/cluster"
	"dedup/processor/lease"
	"dedup/processor/output"
	"dedup/processor/partition"
)

// generation is what the partitions of one consumer-group generation share.
type generation struct {
	gen   *kafka.Generation
	route partition.Router
	out   *output.Writer // the writer of this generation
	lease *lease.Lease   // the member's proof of membership: gates produces and saves
	limit partition.Limit
	dlq   partition.DeadLetter // nil without a dead-letter topic
	drops *partition.Drops     // nil without a drop topic; shared by the partitions, read only
	probe *output.Probe        // nil unless a partition writes outputs alone (isolate)
}

// runGeneration runs one generation to its end: a supervisor started with
// gen.Start reads the partition counts, starts one partition pipeline per
// assigned partition (each with gen.Start, so a pipeline that returns ends
// the generation), waits for the generation's context to end (rebalance,
// group closed) and then for every pipeline to flush, checkpoint and commit.
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
	p.failures.Forget(assigned)
	p.forgetSeries(ids)
	// Before any partition allocates or restores a pair: kept pairs that
	// do not resume here are released first.
	warm := p.takeKept(gen.ID, assigned, log)

	counts, err := p.generationCounts(ctx, log)
	if err != nil {
		return
	}
	in, out := counts.In, counts.Out
	p.out.ApplyLimits(ctx)
	// Nothing is produced or saved before the membership is confirmed.
	l := lease.New(p.client, gen, p.o.SessionTimeout, p.o.RebalanceTimeout, p.clock, log)
	cctx, cancel := context.WithTimeout(ctx, l.Window())
	err = l.Confirm(cctx)
	cancel()
	if err != nil {
		log.Warn("start generation: membership not confirmed", "err", err)
		cluster.Sleep(ctx, time.Second)
		return
	}
	p.lease.Store(l)
	defer p.lease.CompareAndSwap(l, nil)
	go l.Run(ctx)
	g := &generation{gen: gen, route: partition.NewRouter(in, out), out: p.out.Writer(), lease: l,
		limit: p.out.Limit(), dlq: p.out.DeadLetter()}
	if p.o.DroppedTopic != "" {
		g.drops = &partition.Drops{Topic: p.o.DroppedTopic, Writer: g.out.Dropped(), Route: partition.NewRouter(in, counts.Dropped),
			Limit: p.out.DroppedLimit(), SampleRate: p.o.DroppedSampleRate}
	}
	if p.failures.Isolating() {
		g.probe = p.out.NewProbe()
		defer g.probe.Close() // after every partition stopped (wg.Wait below)
	}

	p.mu.Lock()
	p.inGen, p.assigned, p.readyN = true, len(assigned), 0
	p.mu.Unlock()
	// The drop writer keeps a batch per drop partition, as the output's.
	p.predictMemory(len(assigned), out+counts.Dropped)
	defer func() {
		p.mu.Lock()
		p.inGen, p.assigned, p.readyN = false, 0, 0
		p.mu.Unlock()
		p.predictMemory(0, out+counts.Dropped) // revoked; the writer keeps its batches
	}()

	var wg sync.WaitGroup
	for _, a := range assigned {
		wg.Add(1)
		gen.Start(func(ctx context.Context) {
			defer wg.Done()
			p.runPartition(ctx, g, a, warm[a.ID])
		})
	}
	<-ctx.Done()
	wg.Wait()
	log.Info("generation ended", "partitions", ids)
}

// runPartition starts, runs and, at the generation's end, stops one
// partition's pipeline. Returning ends the generation (the group rejoins
// and the partition restarts from its last checkpoint or commit); a
// produce failure also has Run replace the writer first.
func (p *Processor) runPartition(ctx context.Context, g *generation, a kafka.PartitionAssignment, warm *partition.Kept) {
	d := p.partitionDeps(g, a)
	d.Warm = warm
	questions := make(chan partition.KeyQuestion, keyQuestionQueue)
	d.Questions = questions
	w, err := p.startPartition(ctx, d)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Error("start partition", "topic", p.o.InputTopic, "partition", a.ID, "err", err)
			cluster.Sleep(ctx, time.Second)
		}
		return
	}
	p.metrics.Assigned.Inc()
	defer p.metrics.Assigned.Dec()
	defer p.keyAsks.serve(a.ID, g.route.InputPartitions(), questions)()
	p.mu.Lock()
	p.readyN++
	p.mu.Unlock()

	err = w.Run(ctx)
	var perr *ProduceError
	var uerr *partition.UnknownRecordError
	switch {
	case errors.As(err, &uerr):
		// Stopped at a record of a newer re-key hop: the partition waits
		// at it, not ready, for the rest of the generation; the next one
		// meets it again until hop 2 is upgraded. A restart would not help.
		p.setUnknown(a.ID, uerr)
		defer p.setUnknown(a.ID, nil)
		p.mu.Lock()
		p.readyN--
		p.mu.Unlock()
		<-ctx.Done()
	case errors.As(err, &perr):
		if p.failures.Failed(g.out, perr) {
			// Stopped for good: the generation goes on for the other
			// partitions; this one no longer consumes.
			p.mu.Lock()
			p.readyN--
			p.mu.Unlock()
			<-ctx.Done()
		}
	case err != nil && p.stopRequested():
		p.mu.Lock()
		p.unfinished = append(p.unfinished, fmt.Errorf("partition %d: %w", a.ID, err))
		p.mu.Unlock()
		p.log.Error("stop: final checkpoint or commit failed: the position is not committed; the next start resumes from the last checkpoint saved or replays from the last committed offset (no loss, no duplicate output)",
			"topic", p.o.InputTopic, "partition", a.ID, "generation", g.gen.ID, "err", err)
	case err != nil:
		level := slog.LevelError
		if p.cluster.Err() != nil {
			// The cluster watch has named the cause, once.
			level = slog.LevelInfo
		}
		p.log.Log(ctx, level, "partition stopped", "topic", p.o.InputTopic, "partition", a.ID, "generation", g.gen.ID, "err", err)
	}
}

// stopRequested reports whether Run's own context has ended: the
// generation ends for the stop, not for a rebalance.
func (p *Processor) stopRequested() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopping != nil && p.stopping.Err() != nil
}

// partitionDeps is everything the pipeline of assignment a uses in
// generation g.
func (p *Processor) partitionDeps(g *generation, a kafka.PartitionAssignment) partition.Deps {
	topic, part := p.o.InputTopic, a.ID
	bufs := p.partitionBuffers(g.route.OutputPartitions())
	log := p.log.With("topic", topic, "partition", part, "generation", g.gen.ID)
	d := partition.Deps{
		GroupID:       p.o.GroupID,
		Generation:    g.gen.ID,
		Topic:         topic,
		Partition:     part,
		Committed:     a.Offset,
		OutputTopic:   p.o.OutputTopic,
		Repartitioned: p.o.Repartitioned,

		Keys:          p.o.Key,
		RetractHeader: p.o.RetractHeader,
		Writer:        g.out.Kafka(),
		Route:         g.route,
		FlushAt:       p.flushAt,
		Limit:         g.limit,
		DeadLetter:    g.dlq,
		Drops:         g.drops,
		IsolateCount:  p.o.BatchSize, // a refused batch held at most this many
		InflightCap:   bufs.InFlight,
		ReadQueue:     bufs.Queue,

		Reader: kafka.ReaderConfig{
			Brokers:  p.o.Brokers,
			Dialer:   p.readDialer,
			MinBytes: p.o.FetchMinBytes,
			MaxBytes: bufs.FetchBytes,
			MaxWait:  p.o.FetchMaxWait,
			// Logger and ErrorLogger are the partition's own (Start).
		},
		Filter:       p.filter,
		MaxClockSkew: p.skew,
		Clock:        clockFunc(p.o.Now),

		Store:              p.o.Store,
		Spares:             p.spares,
		CheckpointInterval: p.o.CheckpointInterval,
		ChainRatio:         p.o.ChainRatio,
		StopTimeout:        p.o.RebalanceTimeout,
		Scan:               p.scanOptions(),
		OnDamage:           p.o.OnDamage,

		Membership: g.lease,
		Group:      partitionGroup{p: p, g: g, topic: topic, part: part},
		Offsets:    partitionOffsets{p: p, g: g, topic: topic, part: part},
		Owner: partitionOwner{p: p, part: part, gen: g.gen.ID,
			refused: p.metrics.OutputErrors.WithLabelValues(OutputRefused)},
		RecoverAt: p.failures.FailedOffset(part),

		Metrics: p.partitionMetrics(part),
		Totals:  &p.progress,
		Log:     log,
	}
	if off := p.failures.IsolateFrom(part); off >= 0 && g.probe != nil {
		d.Probe, d.IsolateFrom = g.probe, off
	}
	return d
}

// partitionGroup is the partition.Group of one partition in generation g:
// its commits, fenced by g.
type partitionGroup struct {
	p     *Processor
	g     *generation
	topic string
	part  int
}

func (pg partitionGroup) Commit(ctx context.Context, offset int64, ends map[int]int64) error {
	return pg.p.commit(ctx, pg.g, pg.topic, pg.part, offset, ends)
}

func (pg partitionGroup) CommittedEnds(ctx context.Context) (int64, map[int]int64, error) {
	return pg.p.committed(ctx, pg.topic, pg.part)
}

// partitionOffsets is the partition.Offsets of one partition in generation
// g: the output end offsets under g's routing, the input's logical offsets.
type partitionOffsets struct {
	p     *Processor
	g     *generation
	topic string
	part  int
}

func (po partitionOffsets) OutputEnds(ctx context.Context) (map[int]int64, error) {
	return po.p.kadmin.OutputEnds(ctx, po.g.route.AllOutputs())
}

func (po partitionOffsets) DroppedEnds(ctx context.Context) (map[int]int64, error) {
	return po.p.kadmin.Ends(ctx, po.p.o.DroppedTopic, po.g.drops.Route.AllOutputs())
}

func (po partitionOffsets) Bounds(ctx context.Context) (first, end int64, err error) {
	return po.p.kadmin.Bounds(ctx, po.topic, po.part)
}

// partitionOwner is the partition.Owner of one partition in generation gen:
// the Processor's recovery, warm keep, crash switch and refusal count.
type partitionOwner struct {
	p       *Processor
	part    int
	gen     int32
	refused prometheus.Counter
}

func (po partitionOwner) Delivered(offset int64) { po.p.failures.Delivered(po.part, offset) }

func (po partitionOwner) Keep(k partition.Kept) {
	po.p.keep(po.part, keptPair{Kept: k, gen: po.gen})
}

func (po partitionOwner) Crashed() bool { return po.p.crashed.Load() }

func (po partitionOwner) OutputRefused() { po.refused.Inc() }

// clockFunc is Options.Now as a partition.Clock.
type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

// partitionMetrics returns the series of input partition part, noting
// that they exist.
func (p *Processor) partitionMetrics(part int) *partition.Metrics {
	p.mu.Lock()
	p.series[part] = struct{}{}
	p.mu.Unlock()
	pm := p.metrics.Partition(p.o.InputTopic, part, p.storeKind)
	if p.o.Repartitioned {
		p.metrics.Repartitioned(pm, p.o.InputTopic, part)
	}
	if p.o.DroppedTopic != "" {
		p.metrics.Dropped(pm, p.o.InputTopic, part)
	}
	return pm
}

// forgetSeries deletes the per-partition series of every input partition
// not in keep. With eager rebalancing every partition is revoked at each
// generation; called at the start of the next one with its assignment, it
// keeps the counters of a partition that stays and drops those of one that
// moved to another member (whose series that member now reports).
func (p *Processor) forgetSeries(keep []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for part := range p.series {
		if !slices.Contains(keep, part) {
			p.metrics.Forget(p.o.InputTopic, part)
			delete(p.series, part)
		}
	}
}

// generationCounts reads the partition counts at the start of a
// generation. While the cluster watch names a cause (a topic missing, the
// brokers lost) it waits in the generation for the cause to clear, so a
// member that cannot start does not drive the group through generations;
// another error ends the generation (the error is returned) after a pause.
func (p *Processor) generationCounts(ctx context.Context, log *slog.Logger) (cluster.Counts, error) {
	for {
		mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		counts, err := p.kadmin.PartitionCounts(mctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return counts, err
		}
		if p.cluster.Err() == nil {
			// The watch may not have seen it yet: look now.
			p.cluster.Update(p.cluster.Check(ctx))
		}
		if cause := p.cluster.Err(); cause != nil {
			log.Debug("start generation: waiting", "err", err, "cause", cause)
			if p.cluster.Wait(ctx) != nil {
				return cluster.Counts{}, ctx.Err()
			}
			continue
		}
		// Returning ends the generation; the group rejoins after a pause.
		log.Error("start generation", "err", err)
		cluster.Sleep(ctx, time.Second)
		return cluster.Counts{}, err
	}
}

// scanOptions is the replay scan's configuration, without the source
// partition and range: the admin connections when a transport is
// configured, else none (the scan then builds one from the Dialer, which
// carries TLS/SASL in that case).
func (p *Processor) scanOptions() checkpoint.ScanOptions {
	o := checkpoint.ScanOptions{
		Brokers:         p.o.Brokers,
		Dialer:          p.o.Dialer,
		OutputTopic:     p.o.OutputTopic,
		HeaderTopic:     HeaderSourceTopic,
		HeaderPartition: HeaderSourcePartition,
		HeaderOffset:    HeaderSourceOffset,
	}
	if p.o.Repartitioned {
		// The source headers name the input, not the repartition topic
		// this member reads: the repartition header names that.
		o.HeaderTopic, o.HeaderPartition, o.HeaderOffset = "", "", ""
		o.Header = partition.HeaderRepartition
	}
	if p.o.Transport != nil {
		o.Transport = p.adminRT
	}
	return o
}
