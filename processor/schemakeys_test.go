package processor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"dedup/internal/testkit"
	"dedup/key"
	"dedup/offsets"
	"dedup/registry"
	"dedup/registry/registrytest"
)

// Two versions of one Avro record: v2 adds a field before id and moves id
// after n, so that the same id sits at another place in the bytes.
const (
	avroEventV1 = `{"type":"record","name":"Event","namespace":"test","fields":[{"name":"id","type":"string"},{"name":"n","type":"long"}]}`
	avroEventV2 = `{"type":"record","name":"Event","namespace":"test","fields":[{"name":"source","type":"string","default":""},{"name":"n","type":"long"},{"name":"id","type":"string"}]}`
)

type eventV1 struct {
	ID string `avro:"id"`
	N  int64  `avro:"n"`
}

type eventV2 struct {
	Source string `avro:"source"`
	N      int64  `avro:"n"`
	ID     string `avro:"id"`
}

// avroSerde registers both versions in reg under subject and returns the
// serializer that frames records of each Go type with its schema id, as
// Confluent's serializers do.
func avroSerde(t *testing.T, reg *registrytest.Server, subject string) *sr.Serde {
	t.Helper()
	var serde sr.Serde
	for _, v := range []struct {
		text string
		typ  any
	}{{avroEventV1, eventV1{}}, {avroEventV2, eventV2{}}} {
		s := avro.MustParse(v.text)
		id := reg.Register(subject, sr.Schema{Schema: v.text, Type: sr.TypeAvro})
		serde.Register(id, v.typ, sr.EncodeFn(func(x any) ([]byte, error) { return avro.Marshal(s, x) }))
	}
	return &serde
}

// schemaKeys starts a test registry and a client of it with a short
// request timeout, and parses spec bound to that client.
func schemaKeys(t *testing.T, spec string) (*registrytest.Server, *registry.Client, key.Source) {
	t.Helper()
	reg := registrytest.New()
	t.Cleanup(reg.Close)
	client, err := registry.New(registry.Options{URLs: []string{reg.URL()}, Timeout: 300 * time.Millisecond, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	ks, err := key.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return reg, client, ks.WithRegistry(client)
}

// TestSchemaKeysWaitForRegistry: with DEDUP_KEY=avro:id, a partition whose
// next record's schema is not cached waits through a registry outage
// (nothing of it is forwarded, nothing counted unkeyed) while a partition
// whose schemas are cached goes on; once the registry answers, the waiting
// records are decided in order, the same id under two schema versions is
// one key.
func TestSchemaKeysWaitForRegistry(t *testing.T) {
	e := newTestEnv(t, 2, 2)
	out := e.collect()
	reg, client, ks := schemaKeys(t, "avro:id")
	serde := avroSerde(t, reg, inTopic+"-value")
	o := e.options("schema-wait")
	o.Key = ks
	base := time.Now().Add(-time.Minute)
	n := 0
	r := func(p int32, v any) *kgo.Record {
		n++
		return &kgo.Record{Partition: p, Value: serde.MustEncode(v), Timestamp: base.Add(time.Duration(n) * time.Millisecond)}
	}
	value := func(v any) string { return string(serde.MustEncode(v)) }

	// Partition 1 learns v1's schema before the outage.
	e.produce(r(1, eventV1{ID: "a", N: 1}))
	run := start(t, o)
	out.untilValue(value(eventV1{ID: "a", N: 1}))

	for _, mode := range []registrytest.Mode{registrytest.Unavailable, registrytest.Hang, registrytest.Drop, registrytest.Stopped} {
		t.Run(mode.String(), func(t *testing.T) {
			// A version of the schema registered now: no client has it.
			text := strings.Replace(avroEventV2, `"name":"Event"`, `"name":"Event","doc":"`+mode.String()+`"`, 1)
			sid := reg.Register(inTopic+"-value", sr.Schema{Schema: text, Type: sr.TypeAvro})
			var h sr.ConfluentHeader
			framed, err := h.AppendEncode(nil, sid, nil)
			if err != nil {
				t.Fatal(err)
			}
			id := "x-" + mode.String()
			enc, err := avro.Marshal(avro.MustParse(text), eventV2{Source: "s", ID: id, N: 2})
			if err != nil {
				t.Fatal(err)
			}
			firstValue := append(framed, enc...)
			seen := len(out.recs)
			reg.SetDown(mode)
			n++
			e.produce(
				&kgo.Record{Partition: 0, Value: firstValue, Timestamp: base.Add(time.Duration(n) * time.Millisecond)}, // waits for its schema
				r(0, eventV1{ID: id, N: 3}), // the same id under v1: a duplicate
				r(0, eventV1{ID: "b-" + mode.String(), N: 4}),
				r(1, eventV1{ID: "c-" + mode.String(), N: 5}), // partition 1: its schema is cached
			)
			out.untilValue(value(eventV1{ID: "c-" + mode.String(), N: 5}))
			eventually(t, 10*time.Second, "partition 0 reported waiting", func() bool {
				return testutil.ToFloat64(o.Metrics.KeyWaiting.WithLabelValues(inTopic, "0")) == 1
			})
			for _, rec := range out.recs[seen:] {
				if rec.SrcPart == 0 {
					t.Fatalf("partition 0 forwarded %q during the outage", rec.Value)
				}
			}
			if u := testutil.ToFloat64(o.Metrics.Messages.WithLabelValues(inTopic, "0", "unkeyed")); u != 0 {
				t.Fatalf("%v records counted unkeyed during the outage", u)
			}
			eventually(t, 10*time.Second, "the client to report the registry failing", func() bool { return client.Health() != nil })
			reg.SetDown(registrytest.Up)
			got := out.untilValue(value(eventV1{ID: "b-" + mode.String(), N: 4}))
			var p0 []string
			for _, rec := range got {
				if rec.SrcPart == 0 {
					p0 = append(p0, rec.Value)
				}
			}
			want := []string{string(firstValue), value(eventV1{ID: "b-" + mode.String(), N: 4})}
			if !slices.Equal(p0[len(p0)-2:], want) {
				t.Errorf("partition 0 forwarded %q, want the v2 record and b (the v1 copy of its id dropped)", p0)
			}
			eventually(t, 10*time.Second, "partition 0 no longer waiting", func() bool {
				return testutil.ToFloat64(o.Metrics.KeyWaiting.WithLabelValues(inTopic, "0")) == 0
			})
		})
	}
	if err := run.stop(t); err != nil {
		t.Fatal(err)
	}
	if u := testutil.ToFloat64(o.Metrics.Messages.WithLabelValues(inTopic, "0", "unkeyed")); u != 0 {
		t.Errorf("%v records counted unkeyed", u)
	}
}

// TestSchemaKeysTwoHops: with REPARTITION_TOPIC and a composite key of the
// record key (a tenant) and an Avro field, hop 1 waits through a registry
// outage (nothing reaches the repartition topic or the output), then every
// (tenant, id) is forwarded once, whichever input partition and schema
// version its copies came through; the same id under two tenants is two
// keys.
func TestSchemaKeysTwoHops(t *testing.T) {
	e, _ := twoHopEnv(t, 3, 2)
	reg, client, ks := schemaKeys(t, "key,avro:id")
	serde := avroSerde(t, reg, inTopic+"-value")
	o := e.options("schema-two-hops")
	o.InputTopic, o.Repartitioned, o.Key = reTopic, true, ks
	out := e.collect()
	b := start(t, o)
	b.waitReady(t)
	reg.SetDown(registrytest.Unavailable)
	h := startHop1(t, e, "schema-two-hops", ks, smallBatches)

	type identity struct{ tenant, id string }
	first := map[identity]string{}
	var recs []*kgo.Record
	for i := range 90 {
		who := identity{tenant: fmt.Sprintf("t%d", i%2), id: fmt.Sprintf("id-%d", i%30)}
		var v []byte
		if i%3 == 0 {
			v = serde.MustEncode(eventV2{Source: "s", ID: who.id, N: int64(i)})
		} else {
			v = serde.MustEncode(eventV1{ID: who.id, N: int64(i)})
		}
		if _, ok := first[who]; !ok {
			first[who] = string(v)
		}
		recs = append(recs, &kgo.Record{Partition: int32(i % 3), Key: []byte(who.tenant), Value: v, Timestamp: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	e.produce(recs...)
	eventually(t, 10*time.Second, "hop 1 waiting for the registry", func() bool { return client.Stats().Waiting > 0 })
	if end := endOffsetSum(t, e, reTopic); end != 0 {
		t.Fatalf("%d records reached the repartition topic while the registry was down", end)
	}
	reg.SetDown(registrytest.Up)
	ends := map[int32]int64{}
	for _, r := range recs {
		ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
	}
	eventually(t, 30*time.Second, "hop 1 caught up", func() bool { return h.caughtUp(3, ends) })
	repartitionSentinels(e, 2)
	got := map[string]int{}
	for _, r := range withoutSentinels(out.untilSentinels(2)) {
		got[r.Value]++
	}
	for who, v := range first {
		if got[v] != 1 {
			t.Errorf("%v: its first record forwarded %d times, want once", who, got[v])
		}
	}
	if n := len(withoutSentinels(out.recs)); n != len(first) {
		t.Errorf("%d records forwarded, want %d (one per tenant and id)", n, len(first))
	}
}

// endOffsetSum is the sum of topic's partitions' end offsets.
// (two partitions: the repartition topic of the test).
func endOffsetSum(t *testing.T, e *testEnv, topic string) int64 {
	t.Helper()
	n, err := offsets.EndSum(context.Background(), testkit.KafkaClient(t, e.brokers...), topic, 2)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
