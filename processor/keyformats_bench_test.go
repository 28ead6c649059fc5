package processor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/bench/keyformats"
	"dedup/bench/stagerun"
	benchload "dedup/bench/workload"
	"dedup/key"
	"dedup/registry"
	"dedup/registry/registrytest"
)

// avroInTopic holds BenchmarkStageKeyFormats's Avro records; inTopic its
// JSON ones.
const avroInTopic = "events-avro"

// formatsDupShare is the share of BenchmarkStageKeyFormats's records that
// repeat an id seen before.
const formatsDupShare = 0.5

// BenchmarkStageKeyFormats measures records/s through the whole stage with
// DEDUP_KEY=json:id and with DEDUP_KEY=avro:id, on equivalent inputs, in
// one run, by BenchmarkStageVsCopyLoop's method (the same broker, seeding
// sizes, rotating rounds, stagerun's timing and median per-round ratios),
// and reports avro/json. The two inputs hold the same b.N events
// (keyformats: ten fields, the id a UUID's text, the fifth) with the same
// ids in the same order and partitions, half of them repeats of an id
// seen before: inTopic as plain JSON values, avroInTopic as Avro values
// framed by a registry (registrytest) whose schema the stage's client has
// cached and whose plan the Source has compiled before the first round,
// as in a stage that has run a while. Each run checks that no record went
// unkeyed and every repeat was dropped.
//
//	STAGE_MODE=fingerprint go test ./processor -run '^$' -bench StageKeyFormats -benchtime 1000000x -v
func BenchmarkStageKeyFormats(b *testing.B) {
	n := b.N
	b.StopTimer()
	if n < 1000 {
		return // the framework's b.N = 1 probe
	}
	rounds := envPositive(b, "STAGE_ROUNDS", benchRounds)
	e := newBenchEnv(b)
	if err := e.cluster.CreateTopic(avroInTopic, benchParts, nil); err != nil {
		b.Fatal(err)
	}
	reg := registrytest.New()
	b.Cleanup(reg.Close)
	enc, err := keyformats.Register(reg, avroInTopic)
	if err != nil {
		b.Fatal(err)
	}
	client, err := registry.New(registry.Options{URLs: []string{reg.URL()}, Logger: testLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(client.Close)
	w := benchload.Workload{Keys: uint64(float64(n) * (1 - formatsDupShare)), Records: uint64(n),
		KeySize: benchload.MinKeySize, ValueSize: benchload.MinValueSize, Partitions: benchParts, Seed: 1}
	firstAvro := seedFormats(b, e, w, enc)

	jsonKey := mustParseKey(b, keyformats.JSON+":"+keyformats.Path)
	avroKey := mustParseKey(b, keyformats.Avro+":"+keyformats.Path).WithRegistry(client)
	warmKey(b, avroKey, firstAvro)

	procs := map[string]*Processor{}
	keyed := func(topic string, k key.Source) stageFunc {
		return func(b *testing.B, e *testEnv, group string, _ int) stagerun.Options {
			o := benchOptions(e, group)
			o.InputTopic, o.Key = topic, k
			p := mustNew(b, o)
			procs[group] = p
			return stageRun(p)
		}
	}
	contenders := []contender{{"json", keyed(inTopic, jsonKey)}, {"avro", keyed(avroInTopic, avroKey)}}
	runs := runRounds(b, e, n, rounds, contenders, func(round int, runs map[string][]rates) {
		for _, c := range contenders {
			pr := procs[fmt.Sprintf("%s-%d", c.group, round)].Progress()
			if pr.Unkeyed != 0 || pr.Duplicates < w.Records-w.Keys {
				b.Fatalf("round %d, %s: %d unkeyed, %d duplicates dropped of %d", round, c.group, pr.Unkeyed, pr.Duplicates, w.Records-w.Keys)
			}
		}
		js, av := runs["json"][round], runs["avro"][round]
		b.Logf("round %d: json %8.0f rec/s %8.0f rec/cpu-s | avro %8.0f %8.0f | avro/json %.3f wall %.3f cpu",
			round, js.wall, js.cpu, av.wall, av.cpu, av.wall/js.wall, av.cpu/js.cpu)
	})
	median := func(name string, f func(rates) float64) float64 {
		xs := make([]float64, len(runs[name]))
		for i, r := range runs[name] {
			xs[i] = f(r)
		}
		return medianOf(xs)
	}
	b.ReportMetric(median("json", wallRate), "json-rec/s")
	b.ReportMetric(median("avro", wallRate), "avro-rec/s")
	b.ReportMetric(median("json", cpuRate), "json-rec/cpu-s")
	b.ReportMetric(median("avro", cpuRate), "avro-rec/cpu-s")
	b.ReportMetric(medianRatio(runs, "avro", "json", wallRate), "avro/json")
	b.ReportMetric(medianRatio(runs, "avro", "json", cpuRate), "avro/json-cpu")
	b.ReportMetric(0, "ns/op") // the figures above are the result
}

// seedFormats produces w's records twice: as JSON events to inTopic and
// as framed Avro events to avroInTopic, record for record the same event
// (keyformats.New of its index and distinct key), key, partition and
// timestamp. It returns the first Avro value.
func seedFormats(b *testing.B, e *testEnv, w benchload.Workload, enc *keyformats.Encoder) []byte {
	const chunk = 10000
	var first []byte
	recs := make([]*kgo.Record, 0, 2*chunk)
	g := benchload.NewGenerator(w)
	for r := g.Next(); r != nil; r = g.Next() {
		ev := keyformats.New(r.Index, r.KeyID)
		for _, f := range []struct{ format, topic string }{{keyformats.JSON, inTopic}, {keyformats.Avro, avroInTopic}} {
			v, err := enc.Value(f.format, &ev)
			if err != nil {
				b.Fatal(err)
			}
			if first == nil && f.format == keyformats.Avro {
				first = v
			}
			recs = append(recs, &kgo.Record{Topic: f.topic, Partition: int32(r.Partition), Key: append([]byte(nil), r.Key...),
				Value: v, Timestamp: t0.Add(time.Duration(r.Index) * time.Microsecond)})
		}
		if len(recs) == cap(recs) || r.Index == w.Records-1 {
			e.produce(recs...)
			recs = recs[:0]
		}
	}
	return first
}

func mustParseKey(b *testing.B, spec string) key.Source {
	k, err := key.Parse(spec)
	if err != nil {
		b.Fatal(err)
	}
	return k
}

// warmKey has k fetch value's schema and compile its plan, and checks that
// it then keys value.
func warmKey(b *testing.B, k key.Source, value []byte) {
	var a key.Arena
	msg := &kafka.Message{Value: value}
	k.Extract(msg, &a) // starts the schema's fetch
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := k.Await(ctx, msg); err != nil {
		b.Fatal(err)
	}
	if _, st := k.Extract(msg, &a); st != key.Keyed {
		b.Fatalf("%s: %v after its schema was fetched", k, st)
	}
}
