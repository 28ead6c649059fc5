package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"dedup/registry/registrytest"
)

// schemaFormat makes records of one schema format the way its serializer
// does: the registry's framing (magic byte, schema id, for Protobuf the
// message index) in front of the library's own encoding.
type schemaFormat struct {
	name   string
	source string // DEDUP_KEY
	// register registers two versions of an event schema (v2 adds a field
	// and moves id) and returns an encoder of an event {id, n} under
	// version v (1 or 2); an empty id leaves the field unset.
	register func(t *testing.T, reg *registrytest.Server) func(v int, id string, n int) []byte
	// truncated is the reason a value cut inside its id field is
	// unkeyed for.
	truncated string
}

func frame(t *testing.T, id int, index []int, payload []byte) []byte {
	t.Helper()
	var h sr.ConfluentHeader
	b, err := h.AppendEncode(nil, id, index)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, payload...)
}

var schemaFormats = []schemaFormat{
	{name: "avro", source: "avro:id", truncated: "undecodable", register: func(t *testing.T, reg *registrytest.Server) func(int, string, int) []byte {
		texts := []string{
			`{"type":"record","name":"Event","namespace":"e2e","fields":[{"name":"id","type":"string"},{"name":"n","type":"long"}]}`,
			`{"type":"record","name":"Event","namespace":"e2e","fields":[{"name":"source","type":"string","default":""},{"name":"tags","type":{"type":"array","items":"string"},"default":[]},{"name":"n","type":"long"},{"name":"id","type":"string"}]}`,
		}
		var ids []int
		var schemas []avro.Schema
		for _, text := range texts {
			ids = append(ids, reg.Register(namesOf(t).input+"-value", sr.Schema{Schema: text, Type: sr.TypeAvro}))
			schemas = append(schemas, avro.MustParse(text))
		}
		return func(v int, id string, n int) []byte {
			rec := map[string]any{"id": id, "n": int64(n), "source": "e2e", "tags": []string{"a", "b"}}
			b, err := avro.Marshal(schemas[v-1], rec)
			if err != nil {
				t.Fatal(err)
			}
			return frame(t, ids[v-1], nil, b)
		}
	}},
	{name: "protobuf", source: "protobuf:id", truncated: "undecodable", register: func(t *testing.T, reg *registrytest.Server) func(int, string, int) []byte {
		texts := []string{
			"syntax = \"proto3\";\npackage e2e;\nmessage Event {\n  string id = 1;\n  int64 n = 2;\n}\n",
			"syntax = \"proto3\";\npackage e2e;\nmessage Meta { string source = 1; }\nmessage Event {\n  Meta meta = 3;\n  int64 n = 2;\n  repeated string tags = 4;\n  string id = 1;\n}\n",
		}
		var ids []int
		var descs []protoreflect.MessageDescriptor
		for i, text := range texts {
			ids = append(ids, reg.Register(namesOf(t).input+"-value", sr.Schema{Schema: text, Type: sr.TypeProtobuf}))
			name := fmt.Sprintf("event%d.proto", i)
			c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{Accessor: protocompile.SourceAccessorFromMap(map[string]string{name: text})}}
			files, err := c.Compile(context.Background(), name)
			if err != nil {
				t.Fatal(err)
			}
			descs = append(descs, files[0].Messages().ByName("Event"))
		}
		return func(v int, id string, n int) []byte {
			md := descs[v-1]
			m := dynamicpb.NewMessage(md)
			if id != "" {
				m.Set(md.Fields().ByName("id"), protoreflect.ValueOfString(id))
			}
			m.Set(md.Fields().ByName("n"), protoreflect.ValueOfInt64(int64(n)))
			if v == 2 {
				list := m.Mutable(md.Fields().ByName("tags")).List()
				list.Append(protoreflect.ValueOfString("a"))
			}
			b, err := proto.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			// The message index of the file's message Event: 0 in v1,
			// 1 in v2 (Meta comes first).
			return frame(t, ids[v-1], []int{v - 1}, b)
		}
	}},
	{name: "jsonschema", source: "jsonschema:id", truncated: "malformed", register: func(t *testing.T, reg *registrytest.Server) func(int, string, int) []byte {
		texts := []string{
			`{"type":"object","properties":{"id":{"type":"string"},"n":{"type":"integer"}}}`,
			`{"type":"object","properties":{"source":{"type":"string"},"n":{"type":"integer"},"id":{"type":"string"}}}`,
		}
		var ids []int
		for _, text := range texts {
			ids = append(ids, reg.Register(namesOf(t).input+"-value", sr.Schema{Schema: text, Type: sr.TypeJSON}))
		}
		return func(v int, id string, n int) []byte {
			rec := map[string]any{"n": n}
			if id != "" {
				rec["id"] = id
			}
			if v == 2 {
				rec["source"] = "e2e"
			}
			b, err := json.Marshal(rec)
			if err != nil {
				t.Fatal(err)
			}
			return frame(t, ids[v-1], nil, b)
		}
	}},
}

// TestSchemaKeys: for each format and checkpoint store, records framed by a
// Schema Registry are deduplicated by the id field whatever schema version
// wrote them, across a SIGKILL: every id is forwarded once, its first
// record. Values without a usable id (not framed, an id the registry does
// not know, cut short, the field unset) are forwarded once each and
// counted unkeyed with their reason.
func TestSchemaKeys(t *testing.T) {
	for _, f := range schemaFormats {
		for _, store := range []string{"file", "kafka"} {
			t.Run(f.name+"/"+store, func(t *testing.T) { testSchemaKeys(t, f, store) })
		}
	}
}

func schemaPartition(id string) int32 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int32(h.Sum32() % numPartitions)
}

func testSchemaKeys(t *testing.T, f schemaFormat, store string) {
	_, brokers := newCluster(t)
	obs := startObserver(t, brokers)
	reg := registrytest.New()
	t.Cleanup(reg.Close)
	encode := f.register(t, reg)
	env := stageEnv(t, brokers, store)
	env["DEDUP_KEY"] = f.source
	env["SCHEMA_REGISTRY_URL"] = reg.URL()

	const ids, copies = 120, 3
	rng := newRand(testSeed(t))
	base := time.Now().Truncate(time.Millisecond)
	w := &workload{}
	firsts := map[string]string{} // id -> value of its first record
	add := func(id string, value []byte, p int32) {
		w.recs = append(w.recs, inRecord{key: id, value: string(value), ts: base.Add(time.Duration(len(w.recs)) * time.Millisecond), partition: p, offset: -1})
	}
	for i := range ids * copies {
		id := fmt.Sprintf("id-%d", rng.IntN(ids))
		v := encode(1+rng.IntN(2), id, i)
		if _, seen := firsts[id]; !seen {
			firsts[id] = string(v)
		}
		add(id, v, schemaPartition(id))
	}
	half := len(w.recs) / 2

	// Values without a key, after the kill: the last process counts them.
	valid := encode(1, "unkeyed", 0)
	unkeyed := map[string]string{ // value -> reason
		"not framed at all":                    "not_framed",
		string(frame(t, 9999, nil, valid[5:])): "unknown_schema",
		string(valid[:5+3]):                    f.truncated,
		string(encode(2, "", 1)):               "missing_field",
	}
	if f.name == "protobuf" {
		// A Protobuf payload cut after the message index and the id's tag
		// and length, inside the id's bytes.
		delete(unkeyed, string(valid[:5+3]))
		unkeyed[string(valid[:5+1+3])] = f.truncated
	}
	for v := range unkeyed {
		add("unkeyed", []byte(v), 0)
	}
	for p := range int32(numPartitions) {
		id := fmt.Sprintf("%s%d", sentinelPrefix, p)
		v := encode(2, id, -1)
		firsts[id] = string(v)
		add(id, v, p)
	}

	p := startProc(t, "dedup-"+f.name, env)
	guard := func() error { return alive(p) }
	produceRange(t, brokers, w, 0, half)
	waitJoined(t, p, 30*time.Second, guard)
	obs.waitProgress(t, 60*time.Second, int64(ids/3), "a third of the ids in the output", guard)
	p.kill(t)
	p = startProc(t, "dedup-"+f.name+"-2", env)
	guard = func() error { return alive(p) }
	produceRange(t, brokers, w, half, len(w.recs))
	obs.waitSentinels(t, 60*time.Second, guard)
	waitFor(t, 30*time.Second, "the unkeyed records counted", func() error {
		if err := guard(); err != nil {
			return err
		}
		if n := metric(t, p, "dedup_unkeyed_total", nil); n < float64(len(unkeyed)) {
			return fmt.Errorf("%w: %v of %d", errNotYet, n, len(unkeyed))
		}
		return nil
	})
	reasons := map[string]float64{}
	for _, reason := range unkeyed {
		reasons[reason]++
	}
	for reason, want := range reasons {
		if got := metric(t, p, "dedup_unkeyed_total", map[string]string{"reason": reason}); got != want {
			t.Errorf("dedup_unkeyed_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
	p.termOK(t)

	byValue := map[string]int{}
	for _, o := range obs.drain(t, brokers) {
		byValue[o.value]++
	}
	for id, v := range firsts {
		if byValue[v] != 1 {
			t.Errorf("id %s: its first record forwarded %d times, want once", id, byValue[v])
		}
	}
	for v, reason := range unkeyed {
		if byValue[v] != 1 {
			t.Errorf("unkeyed value (%s) forwarded %d times, want once", reason, byValue[v])
		}
	}
	if want := len(firsts) + len(unkeyed); len(byValue) != want || sumCounts(byValue) != want {
		t.Errorf("output: %d records of %d values, want %d (each id's first record and each unkeyed value, once)", sumCounts(byValue), len(byValue), want)
	}
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}

// TestSchemaRegistryOutage: the registry unreachable while records need a
// schema the stage has not fetched yet: none of them is forwarded (nor
// counted unkeyed), /readyz is not 200 and names the registry; once it
// answers, every waiting record is decided and each id forwarded once,
// without a restart.
func TestSchemaRegistryOutage(t *testing.T) {
	_, brokers := newCluster(t)
	obs := startObserver(t, brokers)
	reg := registrytest.New()
	t.Cleanup(reg.Close)
	encode := schemaFormats[0].register(t, reg)
	env := stageEnv(t, brokers, "file")
	env["DEDUP_KEY"] = "avro:id"
	env["SCHEMA_REGISTRY_URL"] = reg.URL()
	env["SCHEMA_REGISTRY_TIMEOUT"] = "500ms"

	p := startProc(t, "dedup-outage", env)
	guard := func() error { return alive(p) }
	waitReady(t, p, 30*time.Second)
	reg.SetDown(registrytest.Unavailable)
	w := &workload{}
	base := time.Now().Truncate(time.Millisecond)
	want := map[string]string{}
	for i := range 60 {
		id := fmt.Sprintf("id-%d", i%20)
		v := encode(1+i%2, id, i)
		if _, ok := want[id]; !ok {
			want[id] = string(v)
		}
		w.recs = append(w.recs, inRecord{key: id, value: string(v), ts: base.Add(time.Duration(i) * time.Millisecond), partition: schemaPartition(id), offset: -1})
	}
	produceRange(t, brokers, w, 0, len(w.recs))
	waitFor(t, 30*time.Second, "/readyz not 200, naming the schema registry", func() error {
		if err := guard(); err != nil {
			return err
		}
		code, body := httpGet(p.metrics, "/readyz")
		if code == http.StatusOK || !strings.Contains(body, "schema registry") {
			return fmt.Errorf("%w: /readyz %d %q", errNotYet, code, body)
		}
		return nil
	})
	if n := metric(t, p, "dedup_key_waiting", nil); n < 1 {
		t.Errorf("dedup_key_waiting = %v during the outage, want at least 1", n)
	}
	if n := obs.count(); n != 0 {
		t.Fatalf("%d records forwarded while their schemas could not be fetched", n)
	}
	reg.SetDown(registrytest.Up)
	waitReady(t, p, 30*time.Second)
	obs.waitProgress(t, 30*time.Second, int64(len(want)), "every id forwarded after the outage", guard)
	if n := metric(t, p, "dedup_unkeyed_total", nil); n != 0 {
		t.Errorf("dedup_unkeyed_total = %v, want 0: an outage makes nothing unkeyed", n)
	}
	p.termOK(t)
	byValue := map[string]int{}
	for _, o := range obs.drain(t, brokers) {
		byValue[o.value]++
	}
	for id, v := range want {
		if byValue[v] != 1 {
			t.Errorf("id %s: first record forwarded %d times, want once", id, byValue[v])
		}
	}
	if sumCounts(byValue) != len(want) {
		t.Errorf("%d output records, want %d", sumCounts(byValue), len(want))
	}
}

// httpGet returns the status and body of a GET of path on addr.
func httpGet(addr, path string) (int, string) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
