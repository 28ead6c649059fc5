package schema

import (
	"bytes"
	"context"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

const pbTenantProto = `syntax = "proto3";
package acme;

message Tenant {
  string tenant_id = 1;
  string region = 2;
}
`

const pbEventProto = `syntax = "proto3";
package test.v1;

import "acme/tenant.proto";
import "google/protobuf/timestamp.proto";

enum Color {
  COLOR_UNSPECIFIED = 0;
  RED = 1;
  GREEN = 2;
  CRIMSON = 1 [deprecated = true];
  option allow_alias = true;
}

message Event {
  message Inner {
    message Deep {
      string leaf = 1;
      int64 n = 2;
      Color color = 3;
    }
    string name = 1;
    Deep deep = 2;
  }
  repeated int64 nums = 1;
  string id = 2;
  bytes raw = 3;
  int32 i32 = 4;
  int64 i64 = 5;
  uint32 u32 = 6;
  uint64 u64 = 7;
  sint32 s32 = 8;
  sint64 s64 = 9;
  fixed32 f32 = 10;
  fixed64 f64 = 11;
  sfixed32 sf32 = 12;
  sfixed64 sf64 = 13;
  float fl = 14;
  double db = 15;
  bool flag = 16;
  Color color = 17;
  repeated string tags = 18;
  map<string, string> attrs = 19;
  Inner inner = 20;
  oneof key {
    string email = 21;
    int64 account = 22;
    Inner other = 23;
  }
  optional int32 opt = 24;
  acme.Tenant tenant = 25;
  google.protobuf.Timestamp at = 26;
  repeated Inner items = 27;
  repeated int32 unpacked = 28 [packed = false];
}

message Second {
  string code = 1;
  Event event = 2;
}
`

const pbLegacyProto = `syntax = "proto2";
package legacy;

enum Level {
  LOW = 1;
  HIGH = 2;
}

message Record {
  required string id = 1;
  optional int32 count = 2 [default = 7];
  optional group Result = 3 {
    optional string url = 1;
    optional int64 rank = 2;
  }
  optional Level level = 4;
  repeated int32 vals = 5;
  optional bool ok = 6;
}
`

var pbEventRefs = []Reference{{Name: "acme/tenant.proto", Text: pbTenantProto}}

// pbCompileFile compiles a test schema with protocompile, the way a
// producer's code generator would see it.
func pbCompileFile(t testing.TB, text string, refs []Reference) protoreflect.FileDescriptor {
	t.Helper()
	srcs := map[string]string{"test/main.proto": text}
	for _, r := range refs {
		srcs[r.Name] = r.Text
	}
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(srcs),
	})}
	files, err := c.Compile(context.Background(), "test/main.proto")
	if err != nil {
		t.Fatal(err)
	}
	return files[0]
}

func pbMessage(t testing.TB, fd protoreflect.FileDescriptor, name string) protoreflect.MessageDescriptor {
	t.Helper()
	d := fd.Messages().ByName(protoreflect.Name(name))
	if d == nil {
		t.Fatalf("no message %s", name)
	}
	return d
}

// pbIndex is the Confluent message index path of md in its file.
func pbIndex(md protoreflect.MessageDescriptor) []int {
	var idx []int
	for d := protoreflect.Descriptor(md); ; d = d.Parent() {
		if _, ok := d.(protoreflect.MessageDescriptor); !ok {
			break
		}
		idx = append([]int{d.Index()}, idx...)
	}
	return idx
}

// pbSet sets the field at the dotted path of m (creating the messages on
// the way) to v: a scalar Go value protoreflect.ValueOf takes, a []int64,
// []int32 or []string for a repeated field, a map[string]string for a map.
func pbSet(t testing.TB, m protoreflect.Message, path string, v any) {
	t.Helper()
	segs := strings.Split(path, ".")
	for _, s := range segs[:len(segs)-1] {
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(s))
		if fd == nil {
			t.Fatalf("no field %s", s)
		}
		m = m.Mutable(fd).Message()
	}
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(segs[len(segs)-1]))
	if fd == nil {
		t.Fatalf("no field %s", path)
	}
	switch v := v.(type) {
	case []int64:
		l := m.Mutable(fd).List()
		for _, x := range v {
			l.Append(protoreflect.ValueOfInt64(x))
		}
	case []int32:
		l := m.Mutable(fd).List()
		for _, x := range v {
			l.Append(protoreflect.ValueOfInt32(x))
		}
	case []string:
		l := m.Mutable(fd).List()
		for _, x := range v {
			l.Append(protoreflect.ValueOfString(x))
		}
	case map[string]string:
		mm := m.Mutable(fd).Map()
		for k, x := range v {
			mm.Set(protoreflect.ValueOfString(k).MapKey(), protoreflect.ValueOfString(x))
		}
	case map[string]any: // a message field set from an empty map: present, empty
		m.Mutable(fd)
	default:
		m.Set(fd, protoreflect.ValueOf(v))
	}
}

// pbBuild makes a dynamic message of md with the fields in kv (path, value
// pairs).
func pbBuild(t testing.TB, md protoreflect.MessageDescriptor, kv ...any) *dynamicpb.Message {
	t.Helper()
	m := dynamicpb.NewMessage(md)
	for i := 0; i < len(kv); i += 2 {
		pbSet(t, m, kv[i].(string), kv[i+1])
	}
	return m
}

// pbRecord frames the concatenation of the messages' encodings (a merge,
// in Protobuf) with the real serializer's header: magic byte, id, indexes.
func pbRecord(t testing.TB, id int, index []int, msgs ...proto.Message) []byte {
	t.Helper()
	var h sr.ConfluentHeader
	b, err := h.AppendEncode(nil, id, index)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if b, err = (proto.MarshalOptions{AllowPartial: true}).MarshalAppend(b, m); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func pbCompile(t testing.TB, text string, refs []Reference, path string) Plan {
	t.Helper()
	var segs []string
	if path != "" {
		segs = strings.Split(path, ".")
	}
	p, err := CompileProtobuf(text, refs, segs)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// pbKey frames value and runs the plan on its payload.
func pbKey(t testing.TB, p Plan, value []byte) (string, Status) {
	t.Helper()
	_, payload, ok := Frame(value)
	if !ok {
		t.Fatalf("Frame(%x) not ok", value)
	}
	dst := []byte("prefix:")
	out, st := p.Append(dst, payload)
	if !bytes.HasPrefix(out, []byte("prefix:")) {
		t.Fatalf("Append clobbered dst: %q", out)
	}
	if st != Found && len(out) != len("prefix:") {
		t.Fatalf("status %v but dst grew: %q", st, out)
	}
	return string(out[len("prefix:"):]), st
}

// pbOracle is what the real library's decoding says the path holds in m.
func pbOracle(m protoreflect.Message, path []string) (string, Status) {
	if len(path) == 0 {
		return "", NotScalar
	}
	// First the schema alone, as Static sees it.
	md := m.Descriptor()
	for i, s := range path {
		fd := md.Fields().ByName(protoreflect.Name(s))
		switch {
		case fd == nil:
			return "", Missing
		case fd.IsList() || fd.IsMap():
			return "", NotScalar
		case fd.Message() != nil:
			if i == len(path)-1 {
				return "", NotScalar
			}
			md = fd.Message()
		case i < len(path)-1:
			return "", Missing
		}
	}
	for _, s := range path[:len(path)-1] {
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(s))
		if !m.Has(fd) {
			return "", Missing
		}
		m = m.Get(fd).Message()
	}
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(path[len(path)-1]))
	if !m.Has(fd) {
		return "", Missing
	}
	v := m.Get(fd)
	switch fd.Kind() {
	case protoreflect.StringKind:
		if v.String() == "" {
			return "", Missing
		}
		return v.String(), Found
	case protoreflect.BytesKind:
		if len(v.Bytes()) == 0 {
			return "", Missing
		}
		return string(v.Bytes()), Found
	case protoreflect.BoolKind:
		return strconv.FormatBool(v.Bool()), Found
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name()), Found
		}
		return strconv.Itoa(int(v.Enum())), Found
	case protoreflect.FloatKind:
		return strconv.FormatFloat(v.Float(), 'g', -1, 32), Found
	case protoreflect.DoubleKind:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64), Found
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Fixed32Kind, protoreflect.Fixed64Kind:
		return strconv.FormatUint(v.Uint(), 10), Found
	default:
		return strconv.FormatInt(v.Int(), 10), Found
	}
}

// pbMistyped says whether a message on the path holds, among its unknown
// fields, a field number its schema declares: a field written with another
// wire type than its own, which the library keeps as unknown and the Plan
// calls Undecodable.
func pbMistyped(m protoreflect.Message, path []string) bool {
	for i := 0; ; i++ {
		for b := m.GetUnknown(); len(b) > 0; {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				break
			}
			if m.Descriptor().Fields().ByNumber(num) != nil {
				return true
			}
			b = b[n:]
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				break
			}
			b = b[n:]
		}
		if i >= len(path)-1 {
			return false
		}
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(path[i]))
		if fd == nil || fd.IsList() || fd.IsMap() || fd.Message() == nil {
			return false
		}
		m = m.Get(fd).Message()
	}
}

// pbCheckOracle asserts that the plan's answer for the record agrees with
// the library's decoding of it.
func pbCheckOracle(t testing.TB, fd protoreflect.FileDescriptor, p Plan, path string, value []byte) {
	t.Helper()
	_, payload, ok := Frame(value)
	if !ok {
		t.Fatal("not framed")
	}
	got, st := p.Append(nil, payload)
	pbCheckPayload(t, fd, path, payload, got, st)
}

func pbCheckPayload(t testing.TB, fd protoreflect.FileDescriptor, path string, payload, got []byte, st Status) {
	t.Helper()
	var h sr.ConfluentHeader
	idx, body, err := h.DecodeIndex(payload, 8)
	if err != nil {
		if st != Undecodable {
			t.Fatalf("%s: indexes %x do not decode (%v) but status %v", path, payload, err, st)
		}
		return
	}
	md := pbByIndex(fd, idx)
	if md == nil {
		if st != Undecodable {
			t.Fatalf("%s: index %v out of range but status %v", path, idx, st)
		}
		return
	}
	m := dynamicpb.NewMessage(md)
	if err := (proto.UnmarshalOptions{AllowPartial: true}).Unmarshal(body, m); err != nil {
		return // invalid UTF-8, a bad message off the path, ...: nothing to compare
	}
	var segs []string
	if path != "" {
		segs = strings.Split(path, ".")
	}
	want, wst := pbOracle(m, segs)
	if st == Undecodable && pbMistyped(m, segs) {
		return
	}
	if st != wst || string(got) != want {
		t.Fatalf("%s in %x: plan %v %q, library %v %q", path, payload, st, got, wst, want)
	}
}

func pbByIndex(fd protoreflect.FileDescriptor, idx []int) protoreflect.MessageDescriptor {
	msgs := fd.Messages()
	var md protoreflect.MessageDescriptor
	for _, i := range idx {
		if i < 0 || i >= msgs.Len() {
			return nil
		}
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	return md
}

func TestProtobufScalars(t *testing.T) {
	fd := pbCompileFile(t, pbEventProto, pbEventRefs)
	event := pbMessage(t, fd, "Event")
	cases := []struct {
		path  string
		value any
		want  string
		st    Status
	}{
		{"id", "order-42", "order-42", Found},
		{"id", "", "", Missing},
		{"raw", []byte{0, 1, 0xff}, "\x00\x01\xff", Found},
		{"raw", []byte{}, "", Missing},
		{"i32", int32(-5), "-5", Found},
		{"i32", int32(math.MinInt32), "-2147483648", Found},
		{"i32", int32(math.MaxInt32), "2147483647", Found},
		{"i32", int32(0), "", Missing},
		{"i64", int64(math.MinInt64), "-9223372036854775808", Found},
		{"i64", int64(1234567890123), "1234567890123", Found},
		{"u32", uint32(math.MaxUint32), "4294967295", Found},
		{"u64", uint64(math.MaxUint64), "18446744073709551615", Found},
		{"s32", int32(-7), "-7", Found},
		{"s32", int32(math.MinInt32), "-2147483648", Found},
		{"s64", int64(math.MinInt64), "-9223372036854775808", Found},
		{"s64", int64(99), "99", Found},
		{"f32", uint32(math.MaxUint32), "4294967295", Found},
		{"f64", uint64(1) << 63, "9223372036854775808", Found},
		{"sf32", int32(-1), "-1", Found},
		{"sf64", int64(-2), "-2", Found},
		{"fl", float32(1.5), "1.5", Found},
		{"fl", float32(0.1), "0.1", Found},
		{"fl", float32(math.Inf(-1)), "-Inf", Found},
		{"db", 0.1, "0.1", Found},
		{"db", -1e300, "-1e+300", Found},
		{"db", float64(0), "", Missing},
		{"flag", true, "true", Found},
		{"flag", false, "", Missing},
		{"color", protoreflect.EnumNumber(1), "RED", Found}, // RED and its alias CRIMSON: the first declared
		{"color", protoreflect.EnumNumber(2), "GREEN", Found},
		{"color", protoreflect.EnumNumber(7), "7", Found},
		{"color", protoreflect.EnumNumber(-3), "-3", Found},
		{"color", protoreflect.EnumNumber(0), "", Missing},
		{"opt", int32(0), "0", Found}, // proto3 optional: presence
		{"opt", int32(-9), "-9", Found},
		{"email", "a@example.com", "a@example.com", Found},
		{"account", int64(0), "0", Found}, // a oneof member has presence
		{"account", int64(77), "77", Found},
		{"tenant.tenant_id", "t-1", "t-1", Found},
		{"at.seconds", int64(1700000000), "1700000000", Found},
		{"at.nanos", int32(5), "5", Found},
	}
	for _, c := range cases {
		m := pbBuild(t, event, c.path, c.value, "tenant.region", "eu", "nums", []int64{1, 2})
		rec := pbRecord(t, 7, []int{0}, m)
		p := pbCompile(t, pbEventProto, pbEventRefs, c.path)
		got, st := pbKey(t, p, rec)
		if got != c.want || st != c.st {
			t.Errorf("%s = %#v: got %v %q, want %v %q", c.path, c.value, st, got, c.st, c.want)
		}
		pbCheckOracle(t, fd, p, c.path, rec)
	}
	// Absent fields.
	rec := pbRecord(t, 7, []int{0}, pbBuild(t, event, "id", "x"))
	for _, path := range []string{"i32", "opt", "email", "color", "tenant.tenant_id", "at.seconds", "inner.deep.leaf"} {
		if got, st := pbKey(t, pbCompile(t, pbEventProto, pbEventRefs, path), rec); st != Missing {
			t.Errorf("absent %s: got %v %q, want missing", path, st, got)
		}
	}
}

func TestProtobufNested(t *testing.T) {
	fd := pbCompileFile(t, pbEventProto, pbEventRefs)
	event := pbMessage(t, fd, "Event")
	m := pbBuild(t, event,
		"id", "top",
		"inner.name", "in",
		"inner.deep.leaf", "deep-leaf",
		"inner.deep.n", int64(-12),
		"inner.deep.color", protoreflect.EnumNumber(2),
		"other.deep.leaf", "via-oneof",
		"items", []string{}, // nothing
	)
	rec := pbRecord(t, 1, []int{0}, m)
	for path, want := range map[string]string{
		"id":               "top",
		"inner.name":       "in",
		"inner.deep.leaf":  "deep-leaf",
		"inner.deep.n":     "-12",
		"inner.deep.color": "GREEN",
		"other.deep.leaf":  "via-oneof",
	} {
		p := pbCompile(t, pbEventProto, pbEventRefs, path)
		if got, st := pbKey(t, p, rec); st != Found || got != want {
			t.Errorf("%s: got %v %q, want %q", path, st, got, want)
		}
		pbCheckOracle(t, fd, p, path, rec)
	}
	for path, want := range map[string]Status{
		"other.name":     Missing, // the oneof's message is set, its field is not
		"inner.deep.zzz": Missing, // not in the schema
		"id.more":        Missing, // a scalar has no fields
		"inner.deep":     NotScalar,
		"inner":          NotScalar,
	} {
		p := pbCompile(t, pbEventProto, pbEventRefs, path)
		if got, st := pbKey(t, p, rec); st != want {
			t.Errorf("%s: got %v %q, want %v", path, st, got, want)
		}
		pbCheckOracle(t, fd, p, path, rec)
	}
}

func TestProtobufLastWins(t *testing.T) {
	fd := pbCompileFile(t, pbEventProto, pbEventRefs)
	event := pbMessage(t, fd, "Event")
	cases := []struct {
		name string
		msgs []proto.Message
		path string
		want string
		st   Status
	}{
		{"scalar twice", []proto.Message{pbBuild(t, event, "id", "a"), pbBuild(t, event, "id", "b")}, "id", "b", Found},
		{"enum twice", []proto.Message{pbBuild(t, event, "color", protoreflect.EnumNumber(2)), pbBuild(t, event, "color", protoreflect.EnumNumber(1))}, "color", "RED", Found},
		{"merged message keeps", []proto.Message{pbBuild(t, event, "inner.name", "x"), pbBuild(t, event, "inner.deep.leaf", "y")}, "inner.name", "x", Found},
		{"merged message adds", []proto.Message{pbBuild(t, event, "inner.name", "x"), pbBuild(t, event, "inner.deep.leaf", "y")}, "inner.deep.leaf", "y", Found},
		{"merged message replaces", []proto.Message{pbBuild(t, event, "inner.deep.leaf", "x"), pbBuild(t, event, "id", "i"), pbBuild(t, event, "inner.deep.leaf", "z")}, "inner.deep.leaf", "z", Found},
		{"oneof switched away", []proto.Message{pbBuild(t, event, "email", "e"), pbBuild(t, event, "account", int64(5))}, "email", "", Missing},
		{"oneof switched to", []proto.Message{pbBuild(t, event, "email", "e"), pbBuild(t, event, "account", int64(5))}, "account", "5", Found},
		{"oneof switched back", []proto.Message{pbBuild(t, event, "email", "e"), pbBuild(t, event, "account", int64(5)), pbBuild(t, event, "email", "f")}, "email", "f", Found},
		{"oneof message cleared", []proto.Message{pbBuild(t, event, "other.name", "x"), pbBuild(t, event, "email", "e"), pbBuild(t, event, "other", map[string]any{})}, "other.name", "", Missing},
		{"oneof message merged", []proto.Message{pbBuild(t, event, "other.name", "x"), pbBuild(t, event, "other.deep.leaf", "l")}, "other.name", "x", Found},
	}
	for _, c := range cases {
		rec := pbRecord(t, 1, []int{0}, c.msgs...)
		p := pbCompile(t, pbEventProto, pbEventRefs, c.path)
		if got, st := pbKey(t, p, rec); st != c.st || got != c.want {
			t.Errorf("%s: %s got %v %q, want %v %q", c.name, c.path, st, got, c.st, c.want)
		}
		pbCheckOracle(t, fd, p, c.path, rec)
	}

	// An implicit-presence field written a second time with its default
	// (no proto3 writer does it, the wire allows it): the default wins,
	// which is Missing. A proto3 optional field's 0 is a value.
	negZero := uint64(math.Float32bits(float32(math.Copysign(0, -1))))
	for _, c := range []struct {
		path  string
		value any
		typ   protowire.Type // the second occurrence's wire type and value
		raw   uint64
		want  string
		st    Status
	}{
		{"i64", int64(5), protowire.VarintType, 0, "", Missing},
		{"i32", int32(5), protowire.VarintType, 1 << 32, "", Missing}, // int32 of it is 0
		{"s32", int32(5), protowire.VarintType, 0, "", Missing},
		{"u32", uint32(5), protowire.VarintType, 1 << 32, "", Missing},
		{"f32", uint32(5), protowire.Fixed32Type, 0, "", Missing},
		{"sf64", int64(5), protowire.Fixed64Type, 0, "", Missing},
		{"fl", float32(5), protowire.Fixed32Type, 0, "", Missing},
		{"fl", float32(5), protowire.Fixed32Type, negZero, "-0", Found},
		{"db", float64(5), protowire.Fixed64Type, 0, "", Missing},
		{"flag", true, protowire.VarintType, 0, "", Missing},
		{"flag", false, protowire.VarintType, 2, "true", Found},
		{"color", protoreflect.EnumNumber(2), protowire.VarintType, 0, "", Missing},
		{"id", "x", protowire.BytesType, 0, "", Missing},
		{"opt", int32(5), protowire.VarintType, 0, "0", Found},
		{"account", int64(5), protowire.VarintType, 0, "0", Found},
	} {
		rec := pbRecord(t, 1, []int{0}, pbBuild(t, event, c.path, c.value))
		rec = protowire.AppendTag(rec, event.Fields().ByName(protoreflect.Name(c.path)).Number(), c.typ)
		switch c.typ {
		case protowire.VarintType:
			rec = protowire.AppendVarint(rec, c.raw)
		case protowire.Fixed32Type:
			rec = protowire.AppendFixed32(rec, uint32(c.raw))
		case protowire.Fixed64Type:
			rec = protowire.AppendFixed64(rec, c.raw)
		default:
			rec = protowire.AppendString(rec, "")
		}
		p := pbCompile(t, pbEventProto, pbEventRefs, c.path)
		if got, st := pbKey(t, p, rec); st != c.st || got != c.want {
			t.Errorf("%s %v then the default: got %v %q, want %v %q", c.path, c.value, st, got, c.st, c.want)
		}
		pbCheckOracle(t, fd, p, c.path, rec)
	}
}

func TestProtobufRepeatedAndMaps(t *testing.T) {
	fd := pbCompileFile(t, pbEventProto, pbEventRefs)
	event := pbMessage(t, fd, "Event")
	nums := pbBuild(t, event, "nums", []int64{1, -2, 300})
	body, err := proto.Marshal(nums)
	if err != nil {
		t.Fatal(err)
	}
	if num, typ, _ := protowire.ConsumeTag(body); num != 1 || typ != protowire.BytesType {
		t.Fatalf("nums is not written packed: field %d wire type %d", num, typ)
	}
	unpacked := pbBuild(t, event, "unpacked", []int32{-1, 2})
	if body, _ := proto.Marshal(unpacked); len(body) == 0 || body[0] != byte(protowire.EncodeTag(28, protowire.VarintType)) {
		t.Fatalf("unpacked is not written unpacked: %x", body)
	}
	rec := pbRecord(t, 1, []int{0},
		nums, // a packed repeated field before the path's
		unpacked,
		pbBuild(t, event, "tags", []string{"a", "b"}, "attrs", map[string]string{"k": "v"}, "items", []string{}),
		pbBuild(t, event, "id", "after-repeated"),
	)
	// items is a repeated message field: append one through the list.
	item := pbBuild(t, event)
	l := item.Mutable(event.Fields().ByName("items")).List()
	e := l.NewElement()
	e.Message().Set(e.Message().Descriptor().Fields().ByName("name"), protoreflect.ValueOfString("n"))
	l.Append(e)
	if rec, err = (proto.MarshalOptions{}).MarshalAppend(rec, item); err != nil {
		t.Fatal(err)
	}

	p := pbCompile(t, pbEventProto, pbEventRefs, "id")
	if got, st := pbKey(t, p, rec); st != Found || got != "after-repeated" {
		t.Errorf("id after repeated fields: got %v %q", st, got)
	}
	pbCheckOracle(t, fd, p, "id", rec)
	empty := pbRecord(t, 1, []int{0}, pbBuild(t, event, "id", "x"))
	for _, path := range []string{"nums", "unpacked", "tags", "attrs", "items", "items.name", "attrs.key", "inner", "at", "tenant", ""} {
		p := pbCompile(t, pbEventProto, pbEventRefs, path)
		if p.Static() != NotScalar {
			t.Errorf("%q: Static %v, want not_scalar", path, p.Static())
		}
		// The schema decides: the record holds the field or not.
		for _, r := range [][]byte{rec, empty} {
			if got, st := pbKey(t, p, r); st != NotScalar {
				t.Errorf("%q: got %v %q, want not_scalar", path, st, got)
			}
		}
	}
}

func TestProtobufIndexes(t *testing.T) {
	fd := pbCompileFile(t, pbEventProto, pbEventRefs)
	event := pbMessage(t, fd, "Event")
	second := pbMessage(t, fd, "Second")
	inner := event.Messages().ByName("Inner")
	deep := inner.Messages().ByName("Deep")
	if got := pbIndex(second); len(got) != 1 || got[0] != 1 {
		t.Fatalf("Second's index %v", got)
	}
	if got := pbIndex(inner); len(got) != 2 || got[0] != 0 || got[1] != 0 {
		t.Fatalf("Inner's index %v", got)
	}
	if got := pbIndex(deep); len(got) != 3 {
		t.Fatalf("Deep's index %v", got)
	}

	cases := []struct {
		index []int
		msg   proto.Message
		path  string
		want  string
	}{
		{[]int{1}, pbBuild(t, second, "code", "c-1", "event.id", "e-1"), "code", "c-1"},
		{[]int{1}, pbBuild(t, second, "code", "c-1", "event.id", "e-1"), "event.id", "e-1"},
		{[]int{0, 0}, pbBuild(t, inner, "name", "inner-name"), "name", "inner-name"},
		{[]int{0, 0}, pbBuild(t, inner, "deep.leaf", "l"), "deep.leaf", "l"},
		{[]int{0, 0, 0}, pbBuild(t, deep, "leaf", "deepest"), "leaf", "deepest"},
		{[]int{0}, pbBuild(t, event, "id", "first"), "id", "first"},
	}
	for _, c := range cases {
		rec := pbRecord(t, 3, c.index, c.msg)
		p := pbCompile(t, pbEventProto, pbEventRefs, c.path)
		if got, st := pbKey(t, p, rec); st != Found || got != c.want {
			t.Errorf("%v %s: got %v %q, want %q", c.index, c.path, st, got, c.want)
		}
		pbCheckOracle(t, fd, p, c.path, rec)
	}

	// The same path in another message than the one Static describes.
	p := pbCompile(t, pbEventProto, pbEventRefs, "code")
	if p.Static() != Missing {
		t.Errorf("Static of code (not in Event): %v", p.Static())
	}
	if got, st := pbKey(t, p, pbRecord(t, 3, []int{1}, pbBuild(t, second, "code", "c"))); st != Found || got != "c" {
		t.Errorf("code in Second: %v %q", st, got)
	}
	if got, st := pbKey(t, p, pbRecord(t, 3, []int{0}, pbBuild(t, event, "id", "c"))); st != Missing {
		t.Errorf("code in Event: %v %q", st, got)
	}

	// [0] written in full rather than as the single 0 byte.
	body, _ := proto.Marshal(pbBuild(t, event, "id", "long-form"))
	idp := pbCompile(t, pbEventProto, pbEventRefs, "id")
	for _, idx := range [][]byte{{2, 0}, {0x80, 0}} {
		if got, st := idp.Append(nil, append(append([]byte{}, idx...), body...)); st != Found || string(got) != "long-form" {
			t.Errorf("indexes %x: %v %q", idx, st, got)
		}
	}

	// Out of range and malformed indexes.
	var h sr.ConfluentHeader
	for _, idx := range [][]int{{2}, {0, 2}, {0, 0, 0, 0}, {1, 0}, {-1}, {0, -1}} {
		rec, _ := h.AppendEncode(nil, 3, idx)
		rec = append(rec, body...)
		if got, st := pbKey(t, idp, rec); st != Undecodable {
			t.Errorf("index %v: %v %q, want undecodable", idx, st, got)
		}
	}
	for _, payload := range [][]byte{nil, {1}, {3}, {4, 0}, {0x80}, {2, 0x80}, bytes.Repeat([]byte{0xff}, 11)} {
		if got, st := idp.Append(nil, payload); st != Undecodable {
			t.Errorf("payload %x: %v %q, want undecodable", payload, st, got)
		}
	}
}

func TestProtobufReferences(t *testing.T) {
	const main = `syntax = "proto3";
package billing;
import "acme/tenant.proto";
import "acme/region.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
message Invoice {
  acme.Tenant tenant = 1;
  acme.geo.Region region = 2;
  google.protobuf.Timestamp issued = 3;
  google.protobuf.StringValue note = 4;
}
`
	const region = `syntax = "proto3";
package acme.geo;
import "acme/tenant.proto";
message Region { string code = 1; acme.Tenant owner = 2; }
`
	refs := []Reference{{Name: "acme/tenant.proto", Text: pbTenantProto}, {Name: "acme/region.proto", Text: region}}
	fd := pbCompileFile(t, main, refs)
	invoice := pbMessage(t, fd, "Invoice")
	m := pbBuild(t, invoice, "tenant.tenant_id", "t-9", "region.owner.tenant_id", "t-8", "issued.seconds", int64(-5), "note.value", "n")
	rec := pbRecord(t, 11, []int{0}, m)
	for path, want := range map[string]string{
		"tenant.tenant_id":       "t-9",
		"region.owner.tenant_id": "t-8",
		"issued.seconds":         "-5",
		"note.value":             "n",
	} {
		p := pbCompile(t, main, refs, path)
		if got, st := pbKey(t, p, rec); st != Found || got != want {
			t.Errorf("%s: %v %q, want %q", path, st, got, want)
		}
	}

	// The registry may list a well-known file as a reference too.
	withWKT := append([]Reference{{Name: "google/protobuf/timestamp.proto", Text: pbTimestampProto}}, refs...)
	if got, st := pbKey(t, pbCompile(t, main, withWKT, "issued.seconds"), rec); st != Found || got != "-5" {
		t.Errorf("timestamp from a reference: %v %q", st, got)
	}
	// A reference named like the file the text is compiled as.
	clash := append([]Reference{{Name: protoMainFile, Text: "syntax = \"proto3\"; package clash; message X {}"}}, refs...)
	if got, st := pbKey(t, pbCompile(t, main, clash, "tenant.tenant_id"), rec); st != Found || got != "t-9" {
		t.Errorf("reference named %s: %v %q", protoMainFile, st, got)
	}

	for name, c := range map[string]struct {
		text string
		refs []Reference
	}{
		"missing reference": {main, refs[:1]},
		"syntax error":      {"syntax = \"proto3\"; message {", nil},
		"unknown type":      {"syntax = \"proto3\"; message A { B b = 1; }", nil},
		"bad reference":     {main, []Reference{{Name: "acme/tenant.proto", Text: "nope"}, refs[1]}},
	} {
		if _, err := CompileProtobuf(c.text, c.refs, []string{"x"}); err == nil || !strings.HasPrefix(err.Error(), "compile protobuf schema: ") {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

const pbTimestampProto = `syntax = "proto3";
package google.protobuf;
option go_package = "google.golang.org/protobuf/types/known/timestamppb";
message Timestamp {
  int64 seconds = 1;
  int32 nanos = 2;
}
`

func TestProtobufProto2(t *testing.T) {
	fd := pbCompileFile(t, pbLegacyProto, nil)
	record := pbMessage(t, fd, "Record")
	cases := []struct {
		kv   []any
		path string
		want string
		st   Status
	}{
		{[]any{"id", "r1"}, "id", "r1", Found},
		{[]any{"id", "r1", "count", int32(0)}, "count", "0", Found}, // explicit presence: 0 is a value
		{[]any{"id", "r1"}, "count", "", Missing},                   // the default 7 is not on the wire
		{[]any{"id", "r1", "count", int32(-3)}, "count", "-3", Found},
		{[]any{"id", "r1", "result.url", "https://x"}, "result.url", "https://x", Found}, // a group
		{[]any{"id", "r1", "result.rank", int64(2)}, "result.rank", "2", Found},
		{[]any{"id", "r1", "result.rank", int64(2)}, "result.url", "", Missing},
		{[]any{"id", "r1", "level", protoreflect.EnumNumber(2)}, "level", "HIGH", Found},
		{[]any{"id", "r1", "level", protoreflect.EnumNumber(9)}, "level", "9", Found}, // unknown to a closed enum: the number
		{[]any{"id", "r1", "ok", false}, "ok", "false", Found},
		{[]any{"id", "r1", "vals", []int32{1, 2}}, "vals", "", NotScalar},
		{[]any{"id", "r1", "result.url", "u"}, "result", "", NotScalar},
	}
	for _, c := range cases {
		rec := pbRecord(t, 2, []int{0}, pbBuild(t, record, c.kv...))
		p := pbCompile(t, pbLegacyProto, nil, c.path)
		if got, st := pbKey(t, p, rec); st != c.st || got != c.want {
			t.Errorf("%v %s: got %v %q, want %v %q", c.kv, c.path, st, got, c.st, c.want)
		}
		pbCheckOracle(t, fd, p, c.path, rec)
	}
	// A group written twice merges, like a message.
	rec := pbRecord(t, 2, []int{0}, pbBuild(t, record, "result.url", "a"), pbBuild(t, record, "result.rank", int64(4)))
	if got, st := pbKey(t, pbCompile(t, pbLegacyProto, nil, "result.url"), rec); st != Found || got != "a" {
		t.Errorf("merged group: %v %q", st, got)
	}
	// A group's end tag with another number is undecodable.
	bad, _ := (&sr.ConfluentHeader{}).AppendEncode(nil, 2, []int{0})
	bad = protowire.AppendTag(bad, 3, protowire.StartGroupType)
	bad = protowire.AppendString(protowire.AppendTag(bad, 1, protowire.BytesType), "u")
	bad = protowire.AppendTag(bad, 4, protowire.EndGroupType)
	if got, st := pbKey(t, pbCompile(t, pbLegacyProto, nil, "result.url"), bad); st != Undecodable {
		t.Errorf("group ended by another number: %v %q", st, got)
	}
}

func TestProtobufEvolution(t *testing.T) {
	const v1 = `syntax = "proto3";
package shop;
message Order {
  string id = 1;
  int32 qty = 2;
  sint32 delta = 3;
}
`
	const v2 = `syntax = "proto3";
package shop;
message Customer { string name = 1; }
message Order {
  message Line { string sku = 1; }
  string note = 5;
  int64 qty = 2;
  repeated Line lines = 6;
  Customer customer = 7;
  string id = 1;
  sint64 delta = 3;
  map<string, int64> totals = 8;
}
`
	f1 := pbCompileFile(t, v1, nil)
	f2 := pbCompileFile(t, v2, nil)
	o1 := pbMessage(t, f1, "Order")
	o2 := pbMessage(t, f2, "Order")
	for _, c := range []struct {
		id    string
		qty   int32
		delta int32
	}{{"o-1", 3, -1}, {"o-2", -5, 7}, {"o-3", math.MinInt32, math.MaxInt32}} {
		r1 := pbRecord(t, 1, pbIndex(o1), pbBuild(t, o1, "id", c.id, "qty", c.qty, "delta", c.delta))
		m2 := pbBuild(t, o2, "id", c.id, "qty", int64(c.qty), "delta", int64(c.delta), "note", "n", "customer.name", "c")
		l := m2.Mutable(o2.Fields().ByName("lines")).List()
		e := l.NewElement()
		e.Message().Set(e.Message().Descriptor().Fields().ByName("sku"), protoreflect.ValueOfString("s"))
		l.Append(e)
		r2 := pbRecord(t, 2, pbIndex(o2), m2)
		for _, path := range []string{"id", "qty", "delta"} {
			p1 := pbCompile(t, v1, nil, path)
			p2 := pbCompile(t, v2, nil, path)
			k1, s1 := pbKey(t, p1, r1)
			k2, s2 := pbKey(t, p2, r2)
			// A v1 record read with the v2 schema (a reader that
			// compiled the newer version under the same id).
			k3, s3 := pbKey(t, p2, pbRecord(t, 2, pbIndex(o2), pbBuild(t, o1, "id", c.id, "qty", c.qty, "delta", c.delta)))
			if s1 != Found || s2 != Found || s3 != Found || k1 != k2 || k1 != k3 {
				t.Errorf("%s of %+v: v1 %v %q, v2 %v %q, v1 read as v2 %v %q", path, c, s1, k1, s2, k2, s3, k3)
			}
		}
	}
}

func TestProtobufWrongWireType(t *testing.T) {
	fd := pbCompileFile(t, pbEventProto, pbEventRefs)
	var h sr.ConfluentHeader
	head, _ := h.AppendEncode(nil, 5, []int{0})
	with := func(f func(b []byte) []byte) []byte { return f(append([]byte{}, head...)) }
	id := func(b []byte) []byte {
		return protowire.AppendString(protowire.AppendTag(b, 2, protowire.BytesType), "ok")
	}
	cases := []struct {
		name string
		rec  []byte
		path string
		st   Status
	}{
		{"string as varint", with(func(b []byte) []byte {
			return protowire.AppendVarint(protowire.AppendTag(b, 2, protowire.VarintType), 1)
		}), "id", Undecodable},
		{"int32 as fixed32", with(func(b []byte) []byte {
			return protowire.AppendFixed32(protowire.AppendTag(b, 4, protowire.Fixed32Type), 1)
		}), "i32", Undecodable},
		{"double as fixed32", with(func(b []byte) []byte {
			return protowire.AppendFixed32(protowire.AppendTag(b, 15, protowire.Fixed32Type), 1)
		}), "db", Undecodable},
		{"message as varint", with(func(b []byte) []byte {
			return protowire.AppendVarint(protowire.AppendTag(b, 20, protowire.VarintType), 1)
		}), "inner.name", Undecodable},
		{"message as group", with(func(b []byte) []byte {
			b = protowire.AppendTag(b, 20, protowire.StartGroupType)
			return protowire.AppendTag(b, 20, protowire.EndGroupType)
		}), "inner.name", Undecodable},
		{"nested string as fixed64", with(func(b []byte) []byte {
			inner := protowire.AppendFixed64(protowire.AppendTag(nil, 1, protowire.Fixed64Type), 1)
			return protowire.AppendBytes(protowire.AppendTag(b, 20, protowire.BytesType), inner)
		}), "inner.name", Undecodable},
		{"field number 0", with(func(b []byte) []byte { return id(append(b, 0, 0)) }), "id", Undecodable},
		{"field number too big", with(func(b []byte) []byte {
			return id(protowire.AppendVarint(protowire.AppendTag(b, protowire.MaxValidNumber+1, protowire.VarintType), 1))
		}), "id", Undecodable},
		{"end group at the top", with(func(b []byte) []byte { return id(protowire.AppendTag(b, 9, protowire.EndGroupType)) }), "id", Undecodable},
		{"reserved wire type", with(func(b []byte) []byte { return id(protowire.AppendTag(b, 9, 6)) }), "id", Undecodable},
		{"bad length off the path", with(func(b []byte) []byte { return append(id(b), byte(protowire.EncodeTag(3, protowire.BytesType)), 5, 'x') }), "id", Undecodable},
		// Off the path another field's wire type is not checked
		// (only the path's fields are decoded), nor is a message's
		// content; unknown fields and groups are skipped.
		{"other field mistyped", with(func(b []byte) []byte {
			return id(protowire.AppendVarint(protowire.AppendTag(b, 3, protowire.VarintType), 1))
		}), "id", Found},
		{"unknown group", with(func(b []byte) []byte {
			b = protowire.AppendTag(b, 99, protowire.StartGroupType)
			b = protowire.AppendVarint(protowire.AppendTag(b, 1, protowire.VarintType), 1)
			return id(protowire.AppendTag(b, 99, protowire.EndGroupType))
		}), "id", Found},
		{"bad message off the path", with(func(b []byte) []byte {
			return id(protowire.AppendBytes(protowire.AppendTag(b, 25, protowire.BytesType), []byte{0xff}))
		}), "id", Found},
	}
	for _, c := range cases {
		p := pbCompile(t, pbEventProto, pbEventRefs, c.path)
		got, st := pbKey(t, p, c.rec)
		if st != c.st {
			t.Errorf("%s: got %v %q, want %v", c.name, st, got, c.st)
		}
		pbCheckOracle(t, fd, p, c.path, c.rec)
	}
}

// pbRichEvent is an Event with every kind of field set.
func pbRichEvent(t testing.TB, event protoreflect.MessageDescriptor) *dynamicpb.Message {
	return pbBuild(t, event,
		"nums", []int64{1, -2, 1 << 40},
		"id", "evt-0001",
		"raw", []byte{0, 0xfe},
		"i32", int32(-100),
		"i64", int64(-1)<<40,
		"u32", uint32(7),
		"u64", uint64(1)<<60,
		"s32", int32(-33),
		"s64", int64(-1)<<50,
		"f32", uint32(5),
		"f64", uint64(6),
		"sf32", int32(-7),
		"sf64", int64(-8),
		"fl", float32(2.25),
		"db", 3.5e-8,
		"flag", true,
		"color", protoreflect.EnumNumber(2),
		"tags", []string{"x", "y"},
		"attrs", map[string]string{"a": "b"},
		"inner.name", "nm",
		"inner.deep.leaf", "lf",
		"inner.deep.n", int64(9),
		"account", int64(12),
		"opt", int32(0),
		"tenant.tenant_id", "ten",
		"at.seconds", int64(1),
		"unpacked", []int32{4, 5},
	)
}

var pbRichPaths = []string{
	"id", "raw", "i32", "i64", "u32", "u64", "s32", "s64", "f32", "f64", "sf32", "sf64", "fl", "db",
	"flag", "color", "inner.name", "inner.deep.leaf", "inner.deep.n", "inner.deep.color", "account", "email",
	"other.name", "opt", "tenant.tenant_id", "tenant.region", "at.seconds", "at.nanos", "nums", "tags", "attrs",
	"items.name", "inner", "nope", "",
}

func TestProtobufTruncated(t *testing.T) {
	fd := pbCompileFile(t, pbEventProto, pbEventRefs)
	event := pbMessage(t, fd, "Event")
	inner := event.Messages().ByName("Inner")
	recs := [][]byte{
		pbRecord(t, 1, []int{0}, pbRichEvent(t, event)),
		pbRecord(t, 1, []int{0, 0}, pbBuild(t, inner, "name", "n", "deep.leaf", "l", "deep.n", int64(-1))),
	}
	for _, path := range pbRichPaths {
		p := pbCompile(t, pbEventProto, pbEventRefs, path)
		for _, rec := range recs {
			_, payload, _ := Frame(rec)
			for n := 0; n <= len(payload); n++ {
				cut := payload[:n:n]
				got, st := p.Append(nil, cut)
				// Truncated inside a field: the library fails too.
				_, body, err := (&sr.ConfluentHeader{}).DecodeIndex(cut, 8)
				if err == nil {
					err = (proto.UnmarshalOptions{AllowPartial: true}).Unmarshal(body, dynamicpb.NewMessage(pbByIndex(fd, pbIndexOf(t, cut))))
				}
				if (err != nil) != (st == Undecodable) {
					t.Fatalf("%q cut at %d of %d: status %v %q, library error %v", path, n, len(payload), st, got, err)
				}
				pbCheckPayload(t, fd, path, cut, got, st)
			}
		}
	}
}

func pbIndexOf(t testing.TB, payload []byte) []int {
	idx, _, err := (&sr.ConfluentHeader{}).DecodeIndex(payload, 8)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func TestProtobufStatic(t *testing.T) {
	for path, want := range map[string]Status{
		"id":               Found,
		"color":            Found,
		"opt":              Found,
		"email":            Found,
		"account":          Found,
		"inner.deep.leaf":  Found,
		"tenant.tenant_id": Found,
		"at.seconds":       Found,
		"inner":            NotScalar,
		"other":            NotScalar,
		"at":               NotScalar,
		"nums":             NotScalar,
		"tags":             NotScalar,
		"attrs":            NotScalar,
		"items.name":       NotScalar,
		"":                 NotScalar,
		"nope":             Missing,
		"code":             Missing, // Second's, not the first message's
		"id.x":             Missing,
		"inner.nope":       Missing,
	} {
		if got := pbCompile(t, pbEventProto, pbEventRefs, path).Static(); got != want {
			t.Errorf("Static(%q) = %v, want %v", path, got, want)
		}
	}
	// A file without messages.
	p := pbCompile(t, `syntax = "proto3"; enum E { Z = 0; }`, nil, "id")
	if p.Static() != Missing {
		t.Errorf("no messages: Static %v", p.Static())
	}
	if _, st := p.Append(nil, []byte{0}); st != Undecodable {
		t.Errorf("no messages: Append %v", st)
	}
}

func TestProtobufAllocs(t *testing.T) {
	fd := pbCompileFile(t, pbEventProto, pbEventRefs)
	event := pbMessage(t, fd, "Event")
	inner := event.Messages().ByName("Inner")
	_, payload, _ := Frame(pbRecord(t, 1, []int{0}, pbRichEvent(t, event)))
	_, nested, _ := Frame(pbRecord(t, 1, []int{0, 0, 0}, pbBuild(t, inner.Messages().ByName("Deep"), "leaf", "l", "color", protoreflect.EnumNumber(7))))
	dst := make([]byte, 0, 64)
	for _, path := range pbRichPaths {
		p := pbCompile(t, pbEventProto, pbEventRefs, path)
		for _, pl := range [][]byte{payload, nested} {
			allocs := testing.AllocsPerRun(200, func() { dst, _ = p.Append(dst[:0], pl) })
			if allocs != 0 {
				t.Errorf("%q: %v allocs per Append", path, allocs)
			}
		}
	}
	for _, path := range []string{"leaf", "color"} {
		p := pbCompile(t, pbEventProto, pbEventRefs, path)
		if allocs := testing.AllocsPerRun(200, func() { dst, _ = p.Append(dst[:0], nested) }); allocs != 0 {
			t.Errorf("[0,0,0] %q: %v allocs per Append", path, allocs)
		}
	}
}

func TestProtobufConcurrent(t *testing.T) {
	fd := pbCompileFile(t, pbEventProto, pbEventRefs)
	event := pbMessage(t, fd, "Event")
	p := pbCompile(t, pbEventProto, pbEventRefs, "inner.deep.leaf")
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 8; g++ {
		want := "leaf-" + strconv.Itoa(g)
		_, payload, _ := Frame(pbRecord(t, 1, []int{0}, pbBuild(t, event, "id", "x", "inner.deep.leaf", want)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			var dst []byte
			for i := 0; i < 500; i++ {
				var st Status
				if dst, st = p.Append(dst[:0], payload); st != Found || string(dst) != want {
					errs <- string(dst)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("concurrent Append: %q", e)
	}
}

// FuzzProtobufPlan runs plans of two files over arbitrary payloads: no
// panic, and wherever the library decodes the payload, the plan says what
// the library's decoded message holds (or Undecodable for a path field
// written with another wire type, which the library keeps as unknown).
func FuzzProtobufPlan(f *testing.F) {
	fd := pbCompileFile(f, pbEventProto, pbEventRefs)
	legacy := pbCompileFile(f, pbLegacyProto, nil)
	event := pbMessage(f, fd, "Event")
	inner := event.Messages().ByName("Inner")
	record := pbMessage(f, legacy, "Record")
	type pbFuzzPlan struct {
		fd   protoreflect.FileDescriptor
		path string
		plan Plan
	}
	var plans []pbFuzzPlan
	for _, path := range append(pbRichPaths, "code", "event.id", "event.inner.deep.leaf", "name", "deep.leaf", "deep.color", "leaf", "n") {
		plans = append(plans, pbFuzzPlan{fd, path, pbCompile(f, pbEventProto, pbEventRefs, path)})
	}
	for _, path := range []string{"id", "count", "result.url", "result.rank", "ok", "vals", "level", "result"} {
		plans = append(plans, pbFuzzPlan{legacy, path, pbCompile(f, pbLegacyProto, nil, path)})
	}
	seeds := [][]byte{
		pbRecord(f, 1, []int{0}, pbRichEvent(f, event)),
		pbRecord(f, 1, []int{0}, pbBuild(f, event, "email", "e"), pbBuild(f, event, "other.name", "o"), pbBuild(f, event, "id", "a"), pbBuild(f, event, "id", "b")),
		pbRecord(f, 1, []int{1}, pbBuild(f, pbMessage(f, fd, "Second"), "code", "c", "event.id", "i", "event.inner.deep.leaf", "l")),
		pbRecord(f, 1, []int{0, 0}, pbBuild(f, inner, "name", "n", "deep.leaf", "l", "deep.color", protoreflect.EnumNumber(1))),
		pbRecord(f, 1, []int{0, 0, 0}, pbBuild(f, inner.Messages().ByName("Deep"), "leaf", "l", "n", int64(-4))),
		pbRecord(f, 1, []int{0}, pbBuild(f, record, "id", "r", "count", int32(0), "result.url", "u", "ok", false, "vals", []int32{1})),
	}
	for _, s := range seeds {
		_, payload, _ := Frame(s)
		f.Add(payload)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		for _, p := range plans {
			got, st := p.plan.Append(nil, payload)
			if st != Found && len(got) != 0 {
				t.Fatalf("%s: status %v with key %q", p.path, st, got)
			}
			pbCheckPayload(t, p.fd, p.path, payload, got, st)
		}
	})
}
