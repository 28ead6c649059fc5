package processor

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/bench/stagerun"
	"dedup/processor/cluster"
)

// BenchmarkOutputCompression measures what PRODUCE_COMPRESSION costs and
// saves: the whole stage over the same seeded input with the output
// writer's batches uncompressed and with each codec Kafka knows, on the
// same broker, in one run, alternating for STAGE_ROUNDS rounds (default 5)
// as BenchmarkStageVsCopyLoop does. Per codec it reports the bytes the
// stage sent to the broker per input record (produce requests, plus the
// few metadata requests of the run) and the medians of the per-round
// ratios of records per CPU second and per wall-clock second against
// "none". The CPU is the whole process's, the in-process broker included.
//
// Values are JSON events of about 150 bytes with random ids and amounts,
// closer to a real stream than the repeated alphabet of the other
// benchmarks, whose values every codec shrinks to almost nothing.
//
//	go test ./processor -run '^$' -bench OutputCompression -benchtime 300000x -v
func BenchmarkOutputCompression(b *testing.B) {
	n := b.N
	b.StopTimer()
	if n < 1000 {
		return
	}
	rounds := envPositive(b, "STAGE_ROUNDS", benchRounds)
	e := newBenchEnv(b)
	seedEvents(b, e, n, benchParts)

	codecs := []struct {
		name  string
		codec kafka.Compression
	}{{"none", 0}, {"snappy", kafka.Snappy}, {"lz4", kafka.Lz4}, {"zstd", kafka.Zstd}, {"gzip", kafka.Gzip}}
	sent := map[string]*atomic.Int64{}
	var contenders []contender
	for _, c := range codecs {
		counter := &atomic.Int64{}
		sent[c.name] = counter
		contenders = append(contenders, contender{c.name, func(b *testing.B, e *testEnv, group string, _ int) stagerun.Options {
			o := benchOptions(e, group)
			o.Compression = c.codec
			o.Transport = &kafka.Transport{Dial: countingDial(counter)}
			b.Cleanup(o.Transport.CloseIdleConnections) // the processor does not close a transport it is given
			p := mustNew(b, o)
			return stageRun(p)
		}})
	}
	runs := runRounds(b, e, n, rounds, contenders, func(round int, runs map[string][]rates) {
		line := fmt.Sprintf("round %d:", round)
		for _, c := range codecs {
			r := runs[c.name][round]
			line += fmt.Sprintf(" %s %.0f rec/s %.0f rec/cpu-s |", c.name, r.wall, r.cpu)
		}
		b.Log(line)
	})
	for _, c := range codecs {
		perRecord := float64(sent[c.name].Load()) / float64(rounds*n)
		b.ReportMetric(perRecord, c.name+"-B/rec")
		if c.name != "none" {
			b.ReportMetric(medianRatio(runs, c.name, "none", cpuRate), c.name+"/none-cpu")
			b.ReportMetric(medianRatio(runs, c.name, "none", wallRate), c.name+"/none-wall")
		}
	}
	b.ReportMetric(0, "ns/op") // the figures above are the result
}

// seedEvents produces n records with distinct keys and JSON event values,
// round-robin over parts input partitions. The generator is seeded, so
// every run writes the same input.
func seedEvents(b *testing.B, e *testEnv, n, parts int) {
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := []string{"page_view", "click", "add_to_cart", "checkout", "search", "login", "logout", "purchase"}
	const chunk = 10000
	recs := make([]*kgo.Record, 0, chunk)
	for i := range n {
		ts := t0.Add(time.Duration(i) * time.Microsecond)
		value := fmt.Appendf(nil, `{"event_id":"%016x","user":"user-%d","type":%q,"amount":%d.%02d,"page":"/products/%d","at":%q}`,
			rng.Uint64(), rng.IntN(100000), kinds[rng.IntN(len(kinds))], rng.IntN(500), rng.IntN(100), rng.IntN(20000), ts.Format(time.RFC3339Nano))
		recs = append(recs, &kgo.Record{
			Partition: int32(i % parts),
			Key:       fmt.Appendf(nil, "key-%012d", i),
			Value:     value,
			Timestamp: ts,
		})
		if len(recs) == chunk || i == n-1 {
			e.produce(recs...)
			recs = recs[:0]
		}
	}
}

// countingDial dials as the stage's transport does and adds every byte
// written on the connection to sent.
func countingDial(sent *atomic.Int64) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := cluster.DefaultDial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, sent: sent}, nil
	}
}

type countingConn struct {
	net.Conn
	sent *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.sent.Add(int64(n))
	return n, err
}
