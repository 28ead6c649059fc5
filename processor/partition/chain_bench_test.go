package partition

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"dedup/checkpoint"
	"dedup/rotation"
)

// BenchmarkChainBytesPerKey measures what incremental checkpoints write
// per new key at steady state, against a full snapshot per checkpoint:
// a fingerprint pair of N expected keys holds a full previous generation
// and a half-full current one; every checkpoint interval adds a modest
// number of new keys; increments follow the base until they reach it
// (DefaultChainRatio), then a new base is written. One op is one whole
// cycle, base to base, so the figures include the compaction's cost:
//
//   - bytes/key: everything written over the cycle, per new key;
//   - increment-bytes/key: the increments alone;
//   - full-bytes/key: a full snapshot every interval, per new key;
//   - restore-s: Load of the longest chain (the base and every increment
//     just before the next base), decoded into a pair.
//
// BENCH_CHAIN_SIZES (default 1000000) picks N, e.g. 1000000,4000000,16000000;
// BENCH_CHAIN_KEYS the new keys per interval (default 2000).
func BenchmarkChainBytesPerKey(b *testing.B) {
	sizes := []int{1_000_000}
	if v := os.Getenv("BENCH_CHAIN_SIZES"); v != "" {
		sizes = sizes[:0]
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n <= 0 {
				b.Fatalf("BENCH_CHAIN_SIZES: %q", v)
			}
			sizes = append(sizes, n)
		}
	}
	perInterval := 2000
	if v := os.Getenv("BENCH_CHAIN_KEYS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("BENCH_CHAIN_KEYS: %q", v)
		}
		perInterval = n
	}
	for _, kind := range []string{"file", "kafka"} {
		for _, n := range sizes {
			b.Run(fmt.Sprintf("%s/keys=%d", kind, n), func(b *testing.B) {
				chainCycle(b, benchStore(b, kind), n, perInterval)
			})
		}
	}
}

// loadStore is what the benchmark needs of a store.
type loadStore interface {
	Store
	Close() error
}

func benchStore(b *testing.B, kind string) loadStore {
	b.Helper()
	switch kind {
	case "file":
		s, err := checkpoint.NewFileStore(checkpoint.FileOptions{Dir: b.TempDir(), Keep: 2, Group: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	default:
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := checkpoint.NewKafkaStore(ctx, checkpoint.KafkaOptions{Brokers: c.ListenAddrs(), Topic: "bench-state", Group: "bench", Keep: 2})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}
}

// benchKey is the id-th key: distinct ids, distinct keys.
func benchKey(buf *[16]byte, id uint64) []byte {
	copy(buf[:8], "chainkey")
	for i := range 8 {
		buf[8+i] = byte(id >> (8 * i))
	}
	return buf[:]
}

func chainCycle(b *testing.B, store loadStore, n, perInterval int) {
	ctx := context.Background()
	o := rotation.Options{ExpectedKeys: uint64(n), FPRate: 1e-6, Window: time.Hour, Mode: rotation.Fingerprint}
	pair, err := rotation.New(o)
	if err != nil {
		b.Fatal(err)
	}
	var buf [16]byte
	t0 := time.Unix(0, 0).Add(1000 * time.Hour)
	id := uint64(0)
	for ; id < uint64(n); id++ {
		pair.TestAndAdd(benchKey(&buf, id), t0)
	}
	t1 := t0.Add(time.Hour)
	for ; id < uint64(n+n/2); id++ {
		pair.TestAndAdd(benchKey(&buf, id), t1)
	}
	meta := checkpoint.Meta{Group: "bench", Topic: "in", OutputTopic: "out", Generation: 1}
	save := func(m checkpoint.Meta, state io.WriterTo) checkpoint.Meta {
		m.Offset = int64(id)
		saved, err := store.Save(ctx, m, state)
		if err != nil {
			b.Fatal(err)
		}
		return saved
	}
	pair.ResetDelta()
	base := save(meta, pair)
	var (
		d                         rotation.Delta
		written, incBytes, fullBy int64
		keys, cycles              int64
		restore                   time.Duration
	)
	b.ResetTimer()
	for range b.N {
		var c chain
		c.base, c.head = base, base.Seq
		for c.extend(chainPolicy{ratio: checkpoint.DefaultChainRatio}, time.Now()) {
			for range perInterval {
				pair.TestAndAdd(benchKey(&buf, id), t1)
				id++
			}
			keys += int64(perInterval)
			fullBy += base.StoredBytes
			pair.TakeDelta(&d)
			m := meta
			m.Base, m.Prev = c.base.Seq, c.head
			saved := save(m, &d)
			c.head = saved.Seq
			c.bytes += saved.StoredBytes
			incBytes += saved.StoredBytes
			written += saved.StoredBytes
		}
		// The longest chain: restore it before the base that ends it.
		b.StopTimer()
		began := time.Now()
		var got rotation.Pair
		if _, _, err := store.Load(ctx, meta.Topic, meta.Partition, func(m checkpoint.Meta, r io.Reader) error {
			if m.Increment() {
				_, err := got.ApplyDelta(r)
				return err
			}
			_, err := got.ReadFrom(r)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		restore += time.Since(began)
		b.StartTimer()
		pair.ResetDelta()
		base = save(meta, pair)
		written += base.StoredBytes
		cycles++
	}
	b.StopTimer()
	b.ReportMetric(float64(written)/float64(keys), "bytes/key")
	b.ReportMetric(float64(incBytes)/float64(keys), "increment-bytes/key")
	b.ReportMetric(float64(fullBy)/float64(keys), "full-bytes/key")
	b.ReportMetric(restore.Seconds()/float64(cycles), "restore-s")
	b.ReportMetric(float64(base.StoredBytes), "base-bytes")
}
