package schema

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
)

// pbBenchProto is a typical event: ten fields, the id (a string) the
// fifth.
const pbBenchProto = `syntax = "proto3";
package bench;

message Click {
  message Meta {
    string host = 1;
    int64 pid = 2;
  }
  string source = 1;
  int64 ts = 2;
  string kind = 3;
  int64 seq = 4;
  string id = 5;
  double score = 6;
  bool active = 7;
  Meta meta = 8;
  repeated string tags = 9;
  int64 size = 10;
}
`

// BenchmarkProtobufKey reads the id out of one framed record: with the
// path Plan, and by decoding the whole record with the library
// (proto.Unmarshal into a dynamicpb.Message, then Get), a fresh message per
// record or one reset and reused.
func BenchmarkProtobufKey(b *testing.B) {
	fd := pbCompileFile(b, pbBenchProto, nil)
	md := pbMessage(b, fd, "Click")
	m := pbBuild(b, md,
		"source", "web-frontend-eu-west-1",
		"ts", int64(1735689600123),
		"kind", "click",
		"seq", int64(987654321),
		"id", "0b6c5e3e-7d1f-4c8e-9a6b-2f1d3c4b5a69",
		"score", 0.87,
		"active", true,
		"meta.host", "ip-10-0-12-34.eu-west-1.compute.internal",
		"meta.pid", int64(4242),
		"tags", []string{"campaign:spring", "ab:variant-b", "mobile"},
		"size", int64(1532),
	)
	value := pbRecord(b, 42, []int{0}, m)
	idField := md.Fields().ByName("id")
	const want = "0b6c5e3e-7d1f-4c8e-9a6b-2f1d3c4b5a69"

	b.Run("path", func(b *testing.B) {
		p := pbCompile(b, pbBenchProto, nil, "id")
		dst := make([]byte, 0, 64)
		b.SetBytes(int64(len(value)))
		b.ReportAllocs()
		for b.Loop() {
			_, payload, ok := Frame(value)
			if !ok {
				b.Fatal("not framed")
			}
			var st Status
			if dst, st = p.Append(dst[:0], payload); st != Found {
				b.Fatal(st)
			}
		}
		if string(dst) != want {
			b.Fatalf("key %q", dst)
		}
	})
	b.Run("dynamicpb-unmarshal", func(b *testing.B) {
		dst := make([]byte, 0, 64)
		b.SetBytes(int64(len(value)))
		b.ReportAllocs()
		for b.Loop() {
			_, payload, ok := Frame(value)
			if !ok || len(payload) == 0 || payload[0] != 0 {
				b.Fatal("not framed with index [0]")
			}
			msg := dynamicpb.NewMessage(md)
			if err := proto.Unmarshal(payload[1:], msg); err != nil {
				b.Fatal(err)
			}
			dst = append(dst[:0], msg.Get(idField).String()...)
		}
		if string(dst) != want {
			b.Fatalf("key %q", dst)
		}
	})
	b.Run("dynamicpb-unmarshal-reuse", func(b *testing.B) {
		dst := make([]byte, 0, 64)
		msg := dynamicpb.NewMessage(md)
		b.SetBytes(int64(len(value)))
		b.ReportAllocs()
		for b.Loop() {
			_, payload, ok := Frame(value)
			if !ok || len(payload) == 0 || payload[0] != 0 {
				b.Fatal("not framed with index [0]")
			}
			proto.Reset(msg)
			if err := proto.Unmarshal(payload[1:], msg); err != nil {
				b.Fatal(err)
			}
			dst = append(dst[:0], msg.Get(idField).String()...)
		}
		if string(dst) != want {
			b.Fatalf("key %q", dst)
		}
	})
}
