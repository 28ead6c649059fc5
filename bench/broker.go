package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/bench/workload"
	"dedup/offsets"
)

// input is what the harness remembers of the generated input.
type input struct {
	records uint64
	firsts  uint64
	first   bitset // bit i: record i is the first occurrence of its key
	ends    []int64
	// maxNewPerWindow is the largest number of keys first seen in one
	// partition in one window: what the filters must hold.
	maxNewPerWindow uint64
}

type bitset []uint64

func newBitset(n uint64) bitset    { return make(bitset, (n+63)/64) }
func (b bitset) get(i uint64) bool { return b[i/64]&(1<<(i%64)) != 0 }
func (b bitset) set(i uint64)      { b[i/64] |= 1 << (i % 64) }
func (b bitset) clearAll()         { clear(b) }

// preload produces the workload's records into the input topic, each key's
// records to its partition, timestamps spread evenly over windows
// consecutive windows ending with the current one.
func preload(ctx context.Context, brokers []string, w workload.Workload, window time.Duration, windows int, bar *bar) (input, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(1<<20),
		kgo.MaxBufferedRecords(1<<16),
		kgo.ProducerLinger(time.Millisecond),
	)
	if err != nil {
		return input{}, fmt.Errorf("connect loader: %w", err)
	}
	defer cl.Close()

	in := input{records: w.Records, first: newBitset(w.Records), ends: make([]int64, w.Partitions)}
	base := time.Now().Truncate(window).Add(-time.Duration(windows-1) * window)
	step := time.Duration(windows) * window / time.Duration(w.Records+1)
	newKeys := make([]uint64, w.Partitions*windows) // [window*partitions + partition]
	var (
		acked   atomic.Uint64
		errOnce sync.Once
		prodErr error
	)
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			errOnce.Do(func() { prodErr = err })
			return
		}
		acked.Add(1)
	}
	stop := bar.follow(acked.Load)
	defer stop()
	g := workload.NewGenerator(w)
	for r := g.Next(); r != nil; r = g.Next() {
		ts := base.Add(time.Duration(r.Index) * step).Truncate(time.Millisecond) // Kafka keeps milliseconds
		if r.First {
			in.first.set(r.Index)
			in.firsts++
			i := int(ts.Sub(base)/window)*w.Partitions + r.Partition
			newKeys[i]++
			in.maxNewPerWindow = max(in.maxNewPerWindow, newKeys[i])
		}
		in.ends[r.Partition]++
		buf := make([]byte, len(r.Key)+len(r.Value))
		copy(buf, r.Key)
		copy(buf[len(r.Key):], r.Value)
		cl.Produce(ctx, &kgo.Record{
			Topic:     inputTopic,
			Partition: int32(r.Partition),
			Key:       buf[:len(r.Key):len(r.Key)],
			Value:     buf[len(r.Key):],
			Timestamp: ts,
		}, done)
	}
	if err := cl.Flush(ctx); err != nil {
		return input{}, fmt.Errorf("load input: %w", err)
	}
	if prodErr != nil {
		return input{}, fmt.Errorf("load input: %w", prodErr)
	}
	stop()
	bar.finish("")
	return in, nil
}

// newClient is a kafka-go client of brokers on a transport of its own;
// done closes its connections. Not kafka.DefaultTransport: its pools live
// as long as the process and go on dialing brokers long gone (a later
// run's broker may be given the same port).
func newClient(brokers []string) (client *kafka.Client, done func()) {
	tr := &kafka.Transport{}
	return &kafka.Client{Addr: kafka.TCP(brokers...), Transport: tr}, tr.CloseIdleConnections
}

// verify reads the whole output topic and compares it with the input.
func verify(ctx context.Context, brokers []string, topic string, partitions int, in input) (Verification, error) {
	client, done := newClient(brokers)
	defer done()
	sum, err := offsets.EndSum(ctx, client, topic, partitions)
	if err != nil {
		return Verification{}, err
	}
	total := uint64(sum)
	start := map[int32]kgo.Offset{}
	for p := range partitions {
		start[int32(p)] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}),
		kgo.FetchMaxBytes(64<<20),
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	if err != nil {
		return Verification{}, fmt.Errorf("connect verifier: %w", err)
	}
	defer cl.Close()

	var v Verification
	seen := newBitset(in.records)
	for v.Forwarded < total {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return v, err
		}
		var errs []error
		fs.EachError(func(t string, p int32, err error) {
			errs = append(errs, fmt.Errorf("fetch %s/%d: %w", t, p, err))
		})
		if err := errors.Join(errs...); err != nil {
			return v, err
		}
		fs.EachRecord(func(r *kgo.Record) {
			v.Forwarded++
			idx, ok := workload.RecordIndex(r.Value)
			switch {
			case !ok || idx >= in.records:
				v.Foreign++
			case seen.get(idx):
				v.Repeated++
			default:
				seen.set(idx)
				if in.first.get(idx) {
					v.FirstForwarded++
				} else {
					v.DupForwarded++
				}
			}
		})
	}
	v.FalseDrops = in.firsts - v.FirstForwarded
	v.DupsDropped = in.records - in.firsts - v.DupForwarded
	return v, nil
}
