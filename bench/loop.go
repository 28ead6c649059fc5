package bench

import (
	"context"
	"sync/atomic"
	"time"

	"dedup/bench/copyloop"
	"dedup/processor"
	"dedup/sizing"
)

// decider is one partition's deduplication state in a kafka-go loop
// contender. Owned by one goroutine.
type decider interface {
	// seen reports whether key, in a record of time ts, was seen before,
	// and records it.
	seen(key []byte, ts time.Time) bool
}

// state describes a contender's deciders once the input is consumed.
type state interface {
	decider(partition int) decider
	// bytes returns the memory the state takes and how that was found.
	bytes() (int64, string)
}

// Writer settings shared by every kafka-go contender (the stage's defaults
// from the configuration table).
const (
	batchSize    = 1000
	batchBytes   = 1 << 20
	batchTimeout = 5 * time.Millisecond
	fetchMaxByte = 10 << 20
	fetchMaxWait = 250 * time.Millisecond
)

// loopBuffers sizes the loop's reader and outputs in flight as the stage
// sizes them for partitions input and output partitions at the default
// FETCH_BUFFER_BYTES (sizing.PartitionBuffers, the ring bounded by the
// processor's inflightCap), so that a fast reader cannot buffer the input in
// memory and every contender holds as much in flight.
func loopBuffers(partitions int) sizing.Buffers {
	return sizing.PartitionBuffers(sizing.DefaultFetchBufferBytes, partitions, 1, fetchMaxByte,
		min(1<<18, max(8192, 2*batchSize*max(1, partitions))))
}

// runLoop runs a loop contender: the copy loop (copyloop), with newState's
// deciders dropping what they have seen, and the stage's settings and
// source headers, so that what differs between contenders is the
// deduplication itself.
func runLoop(ctx context.Context, s Spec, rep *reporter, newState func(Spec) state) (Result, error) {
	st := newState(s)
	var in atomic.Uint64
	pctx, stopProgress := context.WithCancel(ctx)
	defer stopProgress()
	go rep.reportProgress(pctx, progressInterval, in.Load)
	cpu := sampleCPU(pctx)

	bufs := loopBuffers(len(s.Ends))
	r, err := copyloop.Run(ctx, copyloop.Options{
		Brokers:       s.Brokers,
		InputTopic:    s.InputTopic,
		OutputTopic:   s.OutputTopic,
		Ends:          s.Ends,
		FetchMinBytes: 1,
		FetchMaxBytes: bufs.FetchBytes,
		FetchMaxWait:  fetchMaxWait,
		QueueCapacity: bufs.Queue,
		BatchSize:     batchSize,
		BatchBytes:    batchBytes,
		BatchTimeout:  batchTimeout,
		MaxInFlight:   bufs.InFlight * len(s.Ends),
		SourceHeaders: &copyloop.SourceHeaders{
			Topic:     processor.HeaderSourceTopic,
			Partition: processor.HeaderSourcePartition,
			Offset:    processor.HeaderSourceOffset,
		},
		Seen: func(p int) func([]byte, time.Time) bool { return st.decider(p).seen },
		Read: func() { in.Add(1) },
	})
	if err != nil {
		return Result{}, err
	}
	stopProgress()
	res := Result{In: r.In, Out: r.Out}
	if r.LastAck.After(r.FirstRead) && !r.FirstRead.IsZero() {
		res.Elapsed = r.LastAck.Sub(r.FirstRead)
		res.CPU = cpu.between(r.FirstRead, r.LastAck)
	}
	res.StateBytes, res.StateHow = st.bytes()
	return res, nil
}
