package schema

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// protoMainFile is the name the compiled schema text goes under in the
// in-memory resolver (references go under their own names).
const protoMainFile = "dedup-schema.proto"

// CompileProtobuf compiles a Plan for the dotted path in records written
// with the .proto schema text (as the registry returns it, proto2 or
// proto3), refs being the files it imports (Confluent schema references:
// Name is the import path), dependencies first. The well-known imports
// (google/protobuf/*.proto) resolve without a reference. It returns an
// error only when the text does not compile.
//
// The path's segments are field names as the .proto spells them; a
// segment before the last goes into a singular message (or group) field.
// The Plan reads the message indexes at the start of the payload and
// reads the path in that message: a plan is compiled for every message of
// the file, top-level and nested. An index out of range is Undecodable.
//
// Append follows Protobuf's semantics without decoding values it does not
// need: every field at each level of the path is scanned, so a singular
// field written several times yields its last value, and a message field
// written several times is merged (the last value found across its
// occurrences wins; another member of a oneof written after the path's
// member clears it). A field that is not on the wire is Missing; so is a
// proto3 field without presence (no `optional`) whose value is its
// default (0, false, the 0 enum value, "", empty bytes), since a proto3
// writer leaves those off the wire. A field with presence (proto2,
// proto3 optional, a oneof member) written with 0 is Found ("0"). An
// empty string or bytes is always Missing. The path's field written with
// another wire type than its declared type is Undecodable, as is a
// truncated or malformed record (every top-level field is checked; the
// content of a message field off the path is not).
//
// Key bytes (see the package comment): string and bytes raw; int32,
// int64, sint32, sint64, sfixed32, sfixed64 signed decimal; uint32,
// uint64, fixed32, fixed64 unsigned decimal; float and double the
// shortest decimal ('g') at their own width; bool "true" or "false"; an
// enum the name of its value (the first declared, for aliases) or the
// number in decimal when the schema does not know it.
//
// A path that leads, in the record's message, to a message, a repeated or
// a map field (at its end or on its way), and an empty path, make Append
// say NotScalar for every record that decodes, whether the field is on the
// wire or not: the schema, not the record, decides it (an empty repeated
// field is not on the wire at all). A path the message does not have
// (or that goes on past a scalar) makes Missing.
//
// Static reports the path in the file's first message (index [0]), the
// message a Confluent serializer's default subject names.
func CompileProtobuf(text string, refs []Reference, path []string) (Plan, error) {
	srcs := make(map[string]string, len(refs)+1)
	for _, r := range refs {
		if _, dup := srcs[r.Name]; !dup {
			srcs[r.Name] = r.Text
		}
	}
	main := protoMainFile
	for i := 1; ; i++ {
		if _, dup := srcs[main]; !dup {
			break
		}
		main = fmt.Sprintf("dedup-schema-%d.proto", i)
	}
	srcs[main] = text
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(srcs),
		}),
	}
	files, err := c.Compile(context.Background(), main)
	if err != nil {
		return nil, fmt.Errorf("compile protobuf schema: %w", err)
	}
	p := &protoPlan{top: protoNodes(files[0].Messages(), path), static: Missing}
	if len(p.top) > 0 {
		p.static = p.top[0].msg.static
	}
	return p, nil
}

// protoPlan is the Plan of CompileProtobuf: a tree of per-message plans
// that the message indexes select.
type protoPlan struct {
	top    []protoNode
	static Status
}

// protoNode is one message of the file: its plan for the path and its
// nested messages, in declaration order (as the message indexes count
// them, map entries included).
type protoNode struct {
	msg    protoMsgPlan
	nested []protoNode
}

// protoStepKind says what one level of the walk looks for.
type protoStepKind uint8

const (
	// protoNone matches no field (number 0 is never on the wire): the
	// walk only checks that the message decodes.
	protoNone protoStepKind = iota
	// protoDescend: a singular message field, length-delimited.
	protoDescend
	// protoDescendGroup: a singular group (delimited) field.
	protoDescendGroup
	// protoLeaf: the scalar at the end of the path.
	protoLeaf
)

// protoStep is one level of the path in one message.
type protoStep struct {
	num  protowire.Number
	kind protoStepKind
	// wire is the wire type the field must be written with.
	wire protowire.Type
	// oneof holds the other members of the field's oneof, whose
	// occurrence clears the field.
	oneof []protowire.Number
}

// protoMsgPlan reads the path in one message.
type protoMsgPlan struct {
	// steps has one step per level of the path; a path whose static
	// status is not Found has a single protoNone step.
	steps  []protoStep
	static Status
	// The leaf: its kind, whether it has presence (proto2, proto3
	// optional, oneof), and an enum's value names.
	leaf     protoreflect.Kind
	presence bool
	enum     map[protoreflect.EnumNumber]string
}

// protoFound is what the walk has found of the leaf so far: the last
// occurrence's raw value.
type protoFound struct {
	ok bool
	v  uint64
	b  []byte
}

func protoNodes(msgs protoreflect.MessageDescriptors, path []string) []protoNode {
	if msgs.Len() == 0 {
		return nil
	}
	nodes := make([]protoNode, msgs.Len())
	for i := range nodes {
		md := msgs.Get(i)
		nodes[i] = protoNode{msg: protoResolve(md, path), nested: protoNodes(md.Messages(), path)}
	}
	return nodes
}

// protoResolve compiles the path in message md.
func protoResolve(md protoreflect.MessageDescriptor, path []string) protoMsgPlan {
	stop := func(s Status) protoMsgPlan {
		return protoMsgPlan{steps: []protoStep{{kind: protoNone}}, static: s}
	}
	if len(path) == 0 {
		return stop(NotScalar)
	}
	var steps []protoStep
	for i, name := range path {
		fd := md.Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			return stop(Missing)
		}
		if fd.IsList() || fd.IsMap() {
			return stop(NotScalar)
		}
		st := protoStep{num: fd.Number(), wire: protoWireType(fd.Kind())}
		if od := fd.ContainingOneof(); od != nil {
			for j := 0; j < od.Fields().Len(); j++ {
				if of := od.Fields().Get(j); of.Number() != fd.Number() {
					st.oneof = append(st.oneof, of.Number())
				}
			}
		}
		last := i == len(path)-1
		switch fd.Kind() {
		case protoreflect.MessageKind, protoreflect.GroupKind:
			if last {
				return stop(NotScalar)
			}
			st.kind = protoDescend
			if fd.Kind() == protoreflect.GroupKind {
				st.kind = protoDescendGroup
			}
			steps = append(steps, st)
			md = fd.Message()
		default:
			if !last {
				// A scalar has no fields: the rest of the path is not
				// in the schema.
				return stop(Missing)
			}
			st.kind = protoLeaf
			steps = append(steps, st)
			mp := protoMsgPlan{steps: steps, static: Found, leaf: fd.Kind(), presence: fd.HasPresence()}
			if ed := fd.Enum(); fd.Kind() == protoreflect.EnumKind && ed != nil {
				mp.enum = make(map[protoreflect.EnumNumber]string, ed.Values().Len())
				for j := 0; j < ed.Values().Len(); j++ {
					v := ed.Values().Get(j)
					if _, dup := mp.enum[v.Number()]; !dup {
						mp.enum[v.Number()] = string(v.Name())
					}
				}
			}
			return mp
		}
	}
	return stop(Missing) // not reached: the last segment returns above
}

// protoWireType is the wire type a singular field of kind k is written with.
func protoWireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.BoolKind, protoreflect.EnumKind,
		protoreflect.Int32Kind, protoreflect.Int64Kind,
		protoreflect.Uint32Kind, protoreflect.Uint64Kind,
		protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return protowire.VarintType
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	}
	return protowire.BytesType // string, bytes, message
}

// Static implements Plan: the path in the file's first message.
func (p *protoPlan) Static() Status { return p.static }

// Append implements Plan.
func (p *protoPlan) Append(dst, payload []byte) ([]byte, Status) {
	mp, body, ok := p.pick(payload)
	if !ok {
		return dst, Undecodable
	}
	var f protoFound
	if !mp.walk(body, 0, &f) {
		return dst, Undecodable
	}
	if mp.static != Found {
		return dst, mp.static
	}
	if !f.ok {
		return dst, Missing
	}
	return mp.appendLeaf(dst, &f)
}

// pick reads the message indexes at the start of payload and returns the
// plan of the message they select and the message's bytes.
func (p *protoPlan) pick(b []byte) (*protoMsgPlan, []byte, bool) {
	if len(b) == 0 || len(p.top) == 0 {
		return nil, nil, false
	}
	if b[0] == 0 { // the common case: [0]
		return &p.top[0].msg, b[1:], true
	}
	x, n := protowire.ConsumeVarint(b)
	if n < 0 {
		return nil, nil, false
	}
	b = b[n:]
	count := protowire.DecodeZigZag(x)
	if count < 0 {
		return nil, nil, false
	}
	if count == 0 { // a 0 count written in more than one byte
		return &p.top[0].msg, b, true
	}
	nodes := p.top
	var node *protoNode
	for ; count > 0; count-- {
		x, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return nil, nil, false
		}
		b = b[n:]
		i := protowire.DecodeZigZag(x)
		if i < 0 || i >= int64(len(nodes)) {
			return nil, nil, false
		}
		node = &nodes[i]
		nodes = node.nested
	}
	return &node.msg, b, true
}

// walk scans the message b at the path's level-th step, recording the
// leaf's last occurrence in f; it reports false when b does not decode.
// Its recursion is as deep as the path.
func (mp *protoMsgPlan) walk(b []byte, level int, f *protoFound) bool {
	st := &mp.steps[level]
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num > protowire.MaxValidNumber {
			return false
		}
		b = b[n:]
		if num == st.num {
			if typ != st.wire {
				return false
			}
			switch st.kind {
			case protoLeaf:
				switch typ {
				case protowire.VarintType:
					f.v, n = protowire.ConsumeVarint(b)
				case protowire.Fixed32Type:
					var v uint32
					v, n = protowire.ConsumeFixed32(b)
					f.v = uint64(v)
				case protowire.Fixed64Type:
					f.v, n = protowire.ConsumeFixed64(b)
				default:
					f.b, n = protowire.ConsumeBytes(b)
				}
				if n < 0 {
					return false
				}
				f.ok = true
				b = b[n:]
				continue
			case protoDescend:
				v, n := protowire.ConsumeBytes(b)
				if n < 0 || !mp.walk(v, level+1, f) {
					return false
				}
				b = b[n:]
				continue
			case protoDescendGroup:
				v, n := protowire.ConsumeGroup(num, b)
				if n < 0 || !mp.walk(v, level+1, f) {
					return false
				}
				b = b[n:]
				continue
			}
		} else if st.oneof != nil && protoInOneof(st.oneof, num) {
			// Another member of the oneof replaces the path's.
			f.ok = false
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return false
		}
		b = b[n:]
	}
	return true
}

func protoInOneof(nums []protowire.Number, num protowire.Number) bool {
	for _, o := range nums {
		if o == num {
			return true
		}
	}
	return false
}

// appendLeaf appends the key bytes of the leaf's last value, or says
// Missing for an empty string or bytes or a default value without
// presence.
func (mp *protoMsgPlan) appendLeaf(dst []byte, f *protoFound) ([]byte, Status) {
	v := f.v
	switch mp.leaf {
	case protoreflect.StringKind, protoreflect.BytesKind:
		if len(f.b) == 0 {
			return dst, Missing
		}
		return append(dst, f.b...), Found
	case protoreflect.BoolKind:
		if v == 0 && !mp.presence {
			return dst, Missing
		}
		return strconv.AppendBool(dst, v != 0), Found
	case protoreflect.EnumKind:
		e := protoreflect.EnumNumber(v)
		if e == 0 && !mp.presence {
			return dst, Missing
		}
		if name, ok := mp.enum[e]; ok {
			return append(dst, name...), Found
		}
		return strconv.AppendInt(dst, int64(e), 10), Found
	case protoreflect.FloatKind:
		if uint32(v) == 0 && !mp.presence {
			return dst, Missing
		}
		return strconv.AppendFloat(dst, float64(math.Float32frombits(uint32(v))), 'g', -1, 32), Found
	case protoreflect.DoubleKind:
		if v == 0 && !mp.presence {
			return dst, Missing
		}
		return strconv.AppendFloat(dst, math.Float64frombits(v), 'g', -1, 64), Found
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		u := uint64(uint32(v))
		if u == 0 && !mp.presence {
			return dst, Missing
		}
		return strconv.AppendUint(dst, u, 10), Found
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if v == 0 && !mp.presence {
			return dst, Missing
		}
		return strconv.AppendUint(dst, v, 10), Found
	}
	// Signed integers.
	var i int64
	switch mp.leaf {
	case protoreflect.Int32Kind, protoreflect.Sfixed32Kind:
		// An int32 varint is sign-extended to 64 bits on the wire.
		i = int64(int32(v))
	case protoreflect.Sint32Kind:
		i = int64(int32(protowire.DecodeZigZag(v & math.MaxUint32)))
	case protoreflect.Sint64Kind:
		i = protowire.DecodeZigZag(v)
	default: // int64, sfixed64
		i = int64(v)
	}
	if i == 0 && !mp.presence {
		return dst, Missing
	}
	return strconv.AppendInt(dst, i, 10), Found
}
