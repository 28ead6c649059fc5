package keyformats

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"dedup/registry/registrytest"
)

// TestEveryFormatCarriesTheEvent: each format's value decodes, with the
// format's library, to the event it was made of, under the schema id the
// registry gave it.
func TestEveryFormatCarriesTheEvent(t *testing.T) {
	reg := registrytest.New()
	t.Cleanup(reg.Close)
	enc, err := Register(reg, "t")
	if err != nil {
		t.Fatal(err)
	}
	ev := New(7, 1234)
	for _, f := range Formats {
		v, err := enc.Value(f, &ev)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		payload := v
		if f != JSON {
			var h sr.ConfluentHeader
			id, rest, err := h.DecodeID(v)
			if err != nil || id != enc.ids[f] {
				t.Fatalf("%s: schema id %d, %v; want %d", f, id, err, enc.ids[f])
			}
			payload = rest
			if f == Protobuf {
				if idx, rest, err := h.DecodeIndex(rest, 8); err != nil || !reflect.DeepEqual(idx, []int{0}) {
					t.Fatalf("protobuf: message index %v, %v", idx, err)
				} else {
					payload = rest
				}
			}
		}
		var got Event
		switch f {
		case JSON, JSONSchema:
			err = json.Unmarshal(payload, &got)
		case Avro:
			err = avro.Unmarshal(enc.avro, payload, &got)
		case Protobuf:
			m := dynamicpb.NewMessage(enc.pb)
			if err = proto.Unmarshal(payload, m); err == nil {
				got = fromProtobuf(m)
			}
		}
		if err != nil {
			t.Fatalf("%s: decode: %v", f, err)
		}
		if !reflect.DeepEqual(got, ev) {
			t.Errorf("%s: decoded %+v, want %+v", f, got, ev)
		}
	}
}

// fromProtobuf reads an Event out of its dynamic message.
func fromProtobuf(m *dynamicpb.Message) Event {
	get := func(m protoreflect.Message, name string) protoreflect.Value {
		return m.Get(m.Descriptor().Fields().ByName(protoreflect.Name(name)))
	}
	meta := get(m, "meta").Message()
	ev := Event{
		Source: get(m, "source").String(), Seq: get(m, "seq").Int(), Tenant: get(m, "tenant").String(),
		CreatedAt: get(m, "created_at").Int(), ID: get(m, "id").String(), Amount: get(m, "amount").Float(),
		Active: get(m, "active").Bool(), Note: get(m, "note").String(),
		Meta: Meta{Region: get(meta, "region").String(), Zone: int32(get(meta, "zone").Int()), Host: get(meta, "host").String()},
	}
	tags := get(m, "tags").List()
	for i := range tags.Len() {
		ev.Tags = append(ev.Tags, tags.Get(i).String())
	}
	return ev
}

// TestUUIDsAreDistinct: distinct key ids give distinct ids of a UUID's
// shape.
func TestUUIDsAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for id := range uint64(100000) {
		u := UUID(id)
		if len(u) != 36 || u[8] != '-' || u[13] != '-' || u[14] != '4' || u[18] != '-' || u[19] != '8' || u[23] != '-' {
			t.Fatalf("UUID(%d) = %q", id, u)
		}
		if seen[u] {
			t.Fatalf("UUID(%d) = %q repeats", id, u)
		}
		seen[u] = true
	}
}

// TestTheIDIsTheFifthField: in every schema and in the JSON encoding the
// id is the fifth of ten fields.
func TestTheIDIsTheFifthField(t *testing.T) {
	reg := registrytest.New()
	t.Cleanup(reg.Close)
	enc, err := Register(reg, "t")
	if err != nil {
		t.Fatal(err)
	}
	rs := enc.avro.(*avro.RecordSchema)
	if n := len(rs.Fields()); n != 10 || rs.Fields()[4].Name() != "id" {
		t.Errorf("avro: %d fields, the fifth %s", n, rs.Fields()[4].Name())
	}
	if fs := enc.pb.Fields(); fs.Len() != 10 || fs.Get(4).Name() != "id" {
		t.Errorf("protobuf: %d fields, the fifth %s", fs.Len(), fs.Get(4).Name())
	}
	ev := New(0, 0)
	b, err := json.Marshal(&ev)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var names []string
	if _, err := dec.Token(); err != nil { // {
		t.Fatal(err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	if len(names) != 10 || names[4] != "id" {
		t.Errorf("json fields %q: want ten, id the fifth", names)
	}
}
