// Package keyformats builds one event in each format DEDUP_KEY reads a key
// from: plain JSON (json:), and values framed by a Schema Registry in Avro
// (avro:), Protobuf (protobuf:) and JSON Schema (jsonschema:), each encoded
// by the format's own library and framed by franz-go's sr.ConfluentHeader,
// as the producers' serializers do. The benchmarks that compare key
// extraction across formats (package key's BenchmarkKeyFormats, package
// processor's BenchmarkStageKeyFormats) take their records from it, so
// that every format carries the same event.
//
// The event has ten fields: strings, integers, a double, a boolean, a
// nested record, an array of strings; its id, a UUID's text, is the fifth.
// Only benchmarks import this package: the service binary does not link
// the encoders.
package keyformats

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/bufbuild/protocompile"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"dedup/registry/registrytest"
)

// The DEDUP_KEY prefixes of the formats.
const (
	JSON       = "json"
	Avro       = "avro"
	Protobuf   = "protobuf"
	JSONSchema = "jsonschema"
)

// Formats are the four formats, in the order the benchmarks report them.
var Formats = []string{JSON, Avro, Protobuf, JSONSchema}

// Path is the id's path in every format: DEDUP_KEY is Format + ":" + Path.
const Path = "id"

// Event is the benchmarks' record. Its field order is the order of the
// fields in every format's encoding.
type Event struct {
	Source    string   `avro:"source" json:"source"`
	Seq       int64    `avro:"seq" json:"seq"`
	Tenant    string   `avro:"tenant" json:"tenant"`
	CreatedAt int64    `avro:"created_at" json:"created_at"` // Unix milliseconds
	ID        string   `avro:"id" json:"id"`
	Amount    float64  `avro:"amount" json:"amount"`
	Active    bool     `avro:"active" json:"active"`
	Meta      Meta     `avro:"meta" json:"meta"`
	Tags      []string `avro:"tags" json:"tags"`
	Note      string   `avro:"note" json:"note"`
}

// Meta is Event's nested record.
type Meta struct {
	Region string `avro:"region" json:"region"`
	Zone   int32  `avro:"zone" json:"zone"`
	Host   string `avro:"host" json:"host"`
}

// AvroSchemaText is Event's Avro schema.
const AvroSchemaText = `{"type":"record","name":"Event","namespace":"com.acme.orders","fields":[
	{"name":"source","type":"string"},
	{"name":"seq","type":"long"},
	{"name":"tenant","type":"string"},
	{"name":"created_at","type":"long"},
	{"name":"id","type":"string"},
	{"name":"amount","type":"double"},
	{"name":"active","type":"boolean"},
	{"name":"meta","type":{"type":"record","name":"Meta","fields":[
		{"name":"region","type":"string"},
		{"name":"zone","type":"int"},
		{"name":"host","type":"string"}]}},
	{"name":"tags","type":{"type":"array","items":"string"}},
	{"name":"note","type":"string"}]}`

// ProtobufSchemaText is Event's Protobuf schema: Event is the file's first
// message (Confluent message index [0]).
const ProtobufSchemaText = `syntax = "proto3";
package com.acme.orders;

message Event {
  message Meta {
    string region = 1;
    int32 zone = 2;
    string host = 3;
  }
  string source = 1;
  int64 seq = 2;
  string tenant = 3;
  int64 created_at = 4;
  string id = 5;
  double amount = 6;
  bool active = 7;
  Meta meta = 8;
  repeated string tags = 9;
  string note = 10;
}
`

// JSONSchemaText is Event's JSON Schema.
const JSONSchemaText = `{"$schema":"http://json-schema.org/draft-07/schema#","title":"Event","type":"object",` +
	`"properties":{"source":{"type":"string"},"seq":{"type":"integer"},"tenant":{"type":"string"},` +
	`"created_at":{"type":"integer"},"id":{"type":"string"},"amount":{"type":"number"},"active":{"type":"boolean"},` +
	`"meta":{"type":"object","properties":{"region":{"type":"string"},"zone":{"type":"integer"},"host":{"type":"string"}},"required":["region","zone","host"]},` +
	`"tags":{"type":"array","items":{"type":"string"}},"note":{"type":"string"}},` +
	`"required":["source","seq","tenant","created_at","id","amount","active","meta","tags","note"]}`

// New returns the event with distinct key keyID at input position index:
// its id is UUID(keyID); the other fields vary with both, so that values
// are not all alike.
func New(index, keyID uint64) Event {
	return Event{
		Source:    "checkout-service",
		Seq:       int64(index),
		Tenant:    fmt.Sprintf("tenant-eu-%04d", keyID%10000),
		CreatedAt: 1767225600123 + int64(index),
		ID:        UUID(keyID),
		Amount:    float64(keyID%100000)/100 + 0.95,
		Active:    keyID%2 == 0,
		Meta:      Meta{Region: "eu-central-1", Zone: int32(keyID % 3), Host: "ip-10-0-3-17.internal"},
		Tags:      []string{"priority", "gift", "eu"},
		Note:      "leave at the door, ring twice",
	}
}

// UUID is the text of a version-4 UUID for keyID: distinct keyIDs give
// distinct texts (every bit of a bijective scramble of keyID is in it).
func UUID(keyID uint64) string {
	h := keyID*0x9e3779b97f4a7c15 + 0x2545f4914f6cdd1d
	l := mix(keyID)
	return fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x",
		uint32(h>>32), uint16(h>>16), uint16(h)>>4, 0x8000|uint16(h&0xf)<<8|uint16(l>>56),
		l&0xffffffffffff)
}

// mix is splitmix64's finaliser.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Encoder encodes events in every format, the framed ones with the schema
// ids a registry gave them.
type Encoder struct {
	avro avro.Schema
	pb   protoreflect.MessageDescriptor
	ids  map[string]int // schema id by framed format
}

// Register registers Event's schemas in reg, each under the subject
// "<prefix>-<format>-value", and returns the encoder that frames values
// with their ids.
func Register(reg *registrytest.Server, prefix string) (*Encoder, error) {
	s, err := avro.Parse(AvroSchemaText)
	if err != nil {
		return nil, fmt.Errorf("parse the avro schema: %w", err)
	}
	c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"event.proto": ProtobufSchemaText}),
	}}
	files, err := c.Compile(context.Background(), "event.proto")
	if err != nil {
		return nil, fmt.Errorf("compile the protobuf schema: %w", err)
	}
	md := files[0].Messages().ByName("Event")
	if md == nil {
		return nil, fmt.Errorf("compile the protobuf schema: no message Event")
	}
	return &Encoder{avro: s, pb: md, ids: map[string]int{
		Avro:       reg.Register(prefix+"-avro-value", sr.Schema{Schema: AvroSchemaText, Type: sr.TypeAvro}),
		Protobuf:   reg.Register(prefix+"-protobuf-value", sr.Schema{Schema: ProtobufSchemaText, Type: sr.TypeProtobuf}),
		JSONSchema: reg.Register(prefix+"-jsonschema-value", sr.Schema{Schema: JSONSchemaText, Type: sr.TypeJSON}),
	}}, nil
}

// Value is ev's record value in format: plain JSON for json, the
// registry's framing (magic byte, schema id, Protobuf's message indexes)
// and the library's encoding for the others.
func (e *Encoder) Value(format string, ev *Event) ([]byte, error) {
	var h sr.ConfluentHeader
	switch format {
	case JSON:
		return json.Marshal(ev)
	case Avro:
		b, _ := h.AppendEncode(nil, e.ids[Avro], nil)
		payload, err := avro.Marshal(e.avro, ev)
		if err != nil {
			return nil, fmt.Errorf("avro: %w", err)
		}
		return append(b, payload...), nil
	case Protobuf:
		b, _ := h.AppendEncode(nil, e.ids[Protobuf], []int{0})
		payload, err := proto.Marshal(e.protobuf(ev))
		if err != nil {
			return nil, fmt.Errorf("protobuf: %w", err)
		}
		return append(b, payload...), nil
	case JSONSchema:
		b, _ := h.AppendEncode(nil, e.ids[JSONSchema], nil)
		payload, err := json.Marshal(ev)
		if err != nil {
			return nil, err
		}
		return append(b, payload...), nil
	}
	return nil, fmt.Errorf("unknown format %q", format)
}

// protobuf is ev as a dynamic message of the compiled Event.
func (e *Encoder) protobuf(ev *Event) *dynamicpb.Message {
	m := dynamicpb.NewMessage(e.pb)
	f := e.pb.Fields()
	set := func(m *dynamicpb.Message, f protoreflect.FieldDescriptors, name string, v protoreflect.Value) {
		m.Set(f.ByName(protoreflect.Name(name)), v)
	}
	set(m, f, "source", protoreflect.ValueOfString(ev.Source))
	set(m, f, "seq", protoreflect.ValueOfInt64(ev.Seq))
	set(m, f, "tenant", protoreflect.ValueOfString(ev.Tenant))
	set(m, f, "created_at", protoreflect.ValueOfInt64(ev.CreatedAt))
	set(m, f, "id", protoreflect.ValueOfString(ev.ID))
	set(m, f, "amount", protoreflect.ValueOfFloat64(ev.Amount))
	set(m, f, "active", protoreflect.ValueOfBool(ev.Active))
	mf := f.ByName("meta")
	meta := dynamicpb.NewMessage(mf.Message())
	mfs := mf.Message().Fields()
	set(meta, mfs, "region", protoreflect.ValueOfString(ev.Meta.Region))
	set(meta, mfs, "zone", protoreflect.ValueOfInt32(ev.Meta.Zone))
	set(meta, mfs, "host", protoreflect.ValueOfString(ev.Meta.Host))
	m.Set(mf, protoreflect.ValueOfMessage(meta))
	tags := m.Mutable(f.ByName("tags")).List()
	for _, t := range ev.Tags {
		tags.Append(protoreflect.ValueOfString(t))
	}
	set(m, f, "note", protoreflect.ValueOfString(ev.Note))
	return m
}
