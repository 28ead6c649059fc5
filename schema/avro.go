package schema

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/hamba/avro/v2"
)

// CompileAvro compiles a Plan for the dotted path in records written with
// the Avro schema text (the writer's schema, as the registry returns it),
// refs being the schemas of named types it refers to (Confluent schema
// references), dependencies first.
//
// The path's segments are record field names. A record field is descended
// into by name; a union is followed through the branch the record holds
// (its null branch is Missing, a branch that is not a record is Missing
// before the path's end). At the path's end a scalar (string, bytes, fixed,
// int, long, float, double, boolean, enum) gives its canonical key bytes,
// null is Missing and a record, array or map is NotScalar. Logical types
// ride on their underlying type: timestamp-millis is a long, a bytes
// decimal its raw bytes, a uuid its string. A path naming a field the
// schema lacks makes every record Missing.
//
// The Plan reads a record only up to the end of the path's field: the
// fields before it are skipped by their type (with a program built once
// here, not by reflection per record), the fields after it are not read at
// all. So a record whose tail after the field is truncated or malformed is
// not detected: decoding only what the path needs is the point of the Plan,
// and proving the tail well-formed would cost a full decode per record.
// Anything wrong before or at the field is Undecodable, never a panic, and
// so is nesting deeper than avroMaxDepth (records, unions, arrays and maps
// within one another, as only a recursive type allows). Fixed-size values
// before the field (booleans among them) are skipped by size, unchecked.
//
// Named types resolve by the names the texts define (a reference's Name
// only labels its errors). It returns an error only when the schema text or
// a reference's text does not parse.
func CompileAvro(text string, refs []Reference, path []string) (Plan, error) {
	cache := &avro.SchemaCache{}
	for _, ref := range refs {
		if _, err := avro.ParseWithCache(ref.Text, "", cache); err != nil {
			return nil, fmt.Errorf("compile avro schema: reference %q: %w", ref.Name, err)
		}
	}
	s, err := avro.ParseWithCache(text, "", cache)
	if err != nil {
		return nil, fmt.Errorf("compile avro schema: %w", err)
	}
	b := avroBuilder{named: map[avro.NamedSchema]*avroNode{}}
	root, err := b.target(s, path)
	if err != nil {
		return nil, fmt.Errorf("compile avro schema: %w", err)
	}
	return &avroPlan{root: root, static: root.static()}, nil
}

// avroMaxDepth bounds how deep skipping nests (records, unions, arrays and
// maps inside one another), so that a hostile record under a recursive
// schema cannot exhaust the stack: deeper is Undecodable.
const avroMaxDepth = 256

// avroKind is how a value of one Avro type is skipped.
type avroKind uint8

const (
	avroKindFixedSize avroKind = iota // null, boolean, float, double, fixed, all-fixed records: advance by fixed bytes
	avroKindInt                       // zigzag varint, at most 5 bytes
	avroKindLong                      // zigzag varint, at most 10 bytes
	avroKindBytes                     // bytes and string: long length, then the bytes
	avroKindEnum                      // int symbol index below n
	avroKindUnion                     // long branch index, then the branch
	avroKindRecord                    // the fields in order
	avroKindArray                     // blocks of items
	avroKindMap                       // blocks of (string key, value)
)

// avroNode is the precomputed skip program of one Avro type. Named types
// are built once per compile and shared, so a recursive type is a cycle of
// nodes.
type avroNode struct {
	kind avroKind
	// fixed is the encoded size when every value of the type has the same
	// size (null 0, boolean 1, float 4, double 8, fixed n, a record of such
	// fields), else -1. Every type with fixed -1 takes at least one byte.
	fixed int
	// n is the number of enum symbols.
	n int
	// elem is the array item or the map value.
	elem *avroNode
	// nodes are a record's fields (runs of fixed-size fields merged into
	// one node) or a union's branches.
	nodes []*avroNode
}

// avroOp is one step of a Plan along its path.
type avroOp uint8

const (
	avroOpDescend   avroOp = iota // skip the fields before the path's field, then go on to next
	avroOpUnion                   // read the branch index, then go on to that branch
	avroOpMissing                 // the schema has no such field, or the value is null
	avroOpNotScalar               // a record, array or map
	avroOpString                  // string or bytes
	avroOpFixed
	avroOpInt
	avroOpLong
	avroOpFloat
	avroOpDouble
	avroOpBoolean
	avroOpEnum
)

// avroTarget is the program that reads a Plan's path, one node per path
// level (and per union branch).
type avroTarget struct {
	op       avroOp
	skip     []*avroNode   // avroOpDescend: the fields before the path's field
	next     *avroTarget   // avroOpDescend: the path's field
	branches []*avroTarget // avroOpUnion
	size     int           // avroOpFixed
	symbols  []string      // avroOpEnum
}

func (t *avroTarget) static() Status {
	switch t.op {
	case avroOpDescend:
		return t.next.static()
	case avroOpUnion:
		st := Missing
		for _, b := range t.branches {
			switch b.static() {
			case Found:
				return Found
			case NotScalar:
				st = NotScalar
			}
		}
		return st
	case avroOpMissing:
		return Missing
	case avroOpNotScalar:
		return NotScalar
	}
	return Found
}

type avroBuilder struct {
	named map[avro.NamedSchema]*avroNode
}

// avroDeref returns the named type a reference stands for.
func avroDeref(s avro.Schema) avro.Schema {
	if r, ok := s.(*avro.RefSchema); ok {
		return r.Schema()
	}
	return s
}

// target builds the program that reads path in a value of schema s. A
// path that leads nowhere in every branch is Missing without reading the
// record at all.
func (b *avroBuilder) target(s avro.Schema, path []string) (*avroTarget, error) {
	t, err := b.build(s, path)
	if err != nil {
		return nil, err
	}
	if t.static() == Missing {
		return &avroTarget{op: avroOpMissing}, nil
	}
	return t, nil
}

func (b *avroBuilder) build(s avro.Schema, path []string) (*avroTarget, error) {
	s = avroDeref(s)
	if u, ok := s.(*avro.UnionSchema); ok {
		t := &avroTarget{op: avroOpUnion}
		for _, br := range u.Types() {
			bt, err := b.target(br, path)
			if err != nil {
				return nil, err
			}
			t.branches = append(t.branches, bt)
		}
		return t, nil
	}
	if s.Type() == avro.Null {
		return &avroTarget{op: avroOpMissing}, nil
	}
	if len(path) > 0 {
		rec, ok := s.(*avro.RecordSchema)
		if !ok {
			// Only records have named fields to descend into.
			return &avroTarget{op: avroOpMissing}, nil
		}
		fields := rec.Fields()
		for i, f := range fields {
			if f.Name() != path[0] {
				continue
			}
			before := make([]*avroNode, 0, i)
			for _, pf := range fields[:i] {
				n, err := b.node(pf.Type())
				if err != nil {
					return nil, err
				}
				before = append(before, n)
			}
			next, err := b.target(f.Type(), path[1:])
			if err != nil {
				return nil, err
			}
			return &avroTarget{op: avroOpDescend, skip: avroMerge(before), next: next}, nil
		}
		return &avroTarget{op: avroOpMissing}, nil
	}
	switch s := s.(type) {
	case *avro.RecordSchema, *avro.ArraySchema, *avro.MapSchema:
		return &avroTarget{op: avroOpNotScalar}, nil
	case *avro.EnumSchema:
		return &avroTarget{op: avroOpEnum, symbols: s.Symbols()}, nil
	case *avro.FixedSchema:
		return &avroTarget{op: avroOpFixed, size: s.Size()}, nil
	case *avro.PrimitiveSchema:
		switch s.Type() {
		case avro.String, avro.Bytes:
			return &avroTarget{op: avroOpString}, nil
		case avro.Int:
			return &avroTarget{op: avroOpInt}, nil
		case avro.Long:
			return &avroTarget{op: avroOpLong}, nil
		case avro.Float:
			return &avroTarget{op: avroOpFloat}, nil
		case avro.Double:
			return &avroTarget{op: avroOpDouble}, nil
		case avro.Boolean:
			return &avroTarget{op: avroOpBoolean}, nil
		}
	}
	return nil, fmt.Errorf("unsupported avro type %q", s.Type())
}

// node builds (or, for a named type, finds) the skip program of schema s.
// A named type is registered before its fields are built, so a type that
// refers to itself gets a cycle of nodes rather than endless recursion.
func (b *avroBuilder) node(s avro.Schema) (*avroNode, error) {
	s = avroDeref(s)
	if ns, ok := s.(avro.NamedSchema); ok {
		if n, ok := b.named[ns]; ok {
			return n, nil
		}
	}
	switch s := s.(type) {
	case *avro.NullSchema:
		return &avroNode{kind: avroKindFixedSize, fixed: 0}, nil
	case *avro.PrimitiveSchema:
		switch s.Type() {
		case avro.Boolean:
			return &avroNode{kind: avroKindFixedSize, fixed: 1}, nil
		case avro.Int:
			return &avroNode{kind: avroKindInt, fixed: -1}, nil
		case avro.Long:
			return &avroNode{kind: avroKindLong, fixed: -1}, nil
		case avro.Float:
			return &avroNode{kind: avroKindFixedSize, fixed: 4}, nil
		case avro.Double:
			return &avroNode{kind: avroKindFixedSize, fixed: 8}, nil
		case avro.String, avro.Bytes:
			return &avroNode{kind: avroKindBytes, fixed: -1}, nil
		}
	case *avro.FixedSchema:
		n := &avroNode{kind: avroKindFixedSize, fixed: s.Size()}
		b.named[s] = n
		return n, nil
	case *avro.EnumSchema:
		n := &avroNode{kind: avroKindEnum, fixed: -1, n: len(s.Symbols())}
		b.named[s] = n
		return n, nil
	case *avro.ArraySchema:
		elem, err := b.node(s.Items())
		if err != nil {
			return nil, err
		}
		return &avroNode{kind: avroKindArray, fixed: -1, elem: elem}, nil
	case *avro.MapSchema:
		elem, err := b.node(s.Values())
		if err != nil {
			return nil, err
		}
		return &avroNode{kind: avroKindMap, fixed: -1, elem: elem}, nil
	case *avro.UnionSchema:
		n := &avroNode{kind: avroKindUnion, fixed: -1}
		for _, br := range s.Types() {
			bn, err := b.node(br)
			if err != nil {
				return nil, err
			}
			n.nodes = append(n.nodes, bn)
		}
		return n, nil
	case *avro.RecordSchema:
		// Registered as variable-size while its fields are built: a field
		// that refers back to the record sees it as such (a recursive type
		// is variable-size, or infinite and never decodes).
		n := &avroNode{kind: avroKindRecord, fixed: -1}
		b.named[s] = n
		fields := make([]*avroNode, 0, len(s.Fields()))
		size := 0
		for _, f := range s.Fields() {
			fn, err := b.node(f.Type())
			if err != nil {
				return nil, err
			}
			if size >= 0 && fn.fixed >= 0 {
				size += fn.fixed
			} else {
				size = -1
			}
			fields = append(fields, fn)
		}
		n.nodes = avroMerge(fields)
		if size >= 0 {
			n.kind, n.fixed = avroKindFixedSize, size
		}
		return n, nil
	}
	return nil, fmt.Errorf("unsupported avro type %q", s.Type())
}

// avroMerge folds each run of fixed-size nodes into one node that advances
// by the run's total size, and drops zero-size runs.
func avroMerge(nodes []*avroNode) []*avroNode {
	out := make([]*avroNode, 0, len(nodes))
	run := -1
	for _, n := range nodes {
		if n.fixed >= 0 {
			if run < 0 {
				run = 0
			}
			run += n.fixed
			continue
		}
		if run > 0 {
			out = append(out, &avroNode{kind: avroKindFixedSize, fixed: run})
		}
		run = -1
		out = append(out, n)
	}
	if run > 0 {
		out = append(out, &avroNode{kind: avroKindFixedSize, fixed: run})
	}
	return out
}

// avroPlan is the Plan CompileAvro returns. It is never modified after
// compilation, so it is safe for concurrent use.
type avroPlan struct {
	root   *avroTarget
	static Status
}

func (p *avroPlan) Static() Status { return p.static }

func (p *avroPlan) Append(dst, payload []byte) ([]byte, Status) {
	b := payload
	i := 0
	ok := true
	for t := p.root; ; {
		switch t.op {
		case avroOpDescend:
			for _, n := range t.skip {
				if i, ok = avroSkip(n, b, i, 0); !ok {
					return dst, Undecodable
				}
			}
			t = t.next
		case avroOpUnion:
			var idx int64
			if idx, i, ok = avroReadLong(b, i); !ok || idx < 0 || idx >= int64(len(t.branches)) {
				return dst, Undecodable
			}
			t = t.branches[idx]
		case avroOpMissing:
			return dst, Missing
		case avroOpNotScalar:
			return dst, NotScalar
		case avroOpString:
			var l int64
			if l, i, ok = avroReadLong(b, i); !ok || l < 0 || l > int64(len(b)-i) {
				return dst, Undecodable
			}
			if l == 0 {
				return dst, Missing
			}
			return append(dst, b[i:i+int(l)]...), Found
		case avroOpFixed:
			if t.size > len(b)-i {
				return dst, Undecodable
			}
			if t.size == 0 {
				return dst, Missing // empty bytes, as doc.go has them
			}
			return append(dst, b[i:i+t.size]...), Found
		case avroOpInt:
			var v int32
			if v, _, ok = avroReadInt(b, i); !ok {
				return dst, Undecodable
			}
			return strconv.AppendInt(dst, int64(v), 10), Found
		case avroOpLong:
			var v int64
			if v, _, ok = avroReadLong(b, i); !ok {
				return dst, Undecodable
			}
			return strconv.AppendInt(dst, v, 10), Found
		case avroOpFloat:
			if len(b)-i < 4 {
				return dst, Undecodable
			}
			f := math.Float32frombits(binary.LittleEndian.Uint32(b[i:]))
			return strconv.AppendFloat(dst, float64(f), 'g', -1, 32), Found
		case avroOpDouble:
			if len(b)-i < 8 {
				return dst, Undecodable
			}
			f := math.Float64frombits(binary.LittleEndian.Uint64(b[i:]))
			return strconv.AppendFloat(dst, f, 'g', -1, 64), Found
		case avroOpBoolean:
			if i >= len(b) {
				return dst, Undecodable
			}
			switch b[i] {
			case 0:
				return append(dst, "false"...), Found
			case 1:
				return append(dst, "true"...), Found
			}
			return dst, Undecodable
		case avroOpEnum:
			var v int32
			if v, _, ok = avroReadInt(b, i); !ok || v < 0 || int(v) >= len(t.symbols) {
				return dst, Undecodable
			}
			return append(dst, t.symbols[v]...), Found
		default:
			return dst, Undecodable
		}
	}
}

// avroReadLong reads the zigzag varint long at b[i:], returning it and the
// index after it; ok is false when b ends first, or the varint is longer
// than 10 bytes or overflows 64 bits.
func avroReadLong(b []byte, i int) (v int64, next int, ok bool) {
	var u uint64
	for s := uint(0); s < 70; s += 7 {
		if i >= len(b) {
			return 0, i, false
		}
		c := b[i]
		i++
		if s == 63 && c > 1 {
			return 0, i, false
		}
		u |= uint64(c&0x7f) << s
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), i, true
		}
	}
	return 0, i, false
}

// avroReadInt reads the zigzag varint int at b[i:]; ok is false when b ends
// first, or the varint is longer than 5 bytes or overflows 32 bits.
func avroReadInt(b []byte, i int) (v int32, next int, ok bool) {
	var u uint32
	for s := uint(0); s < 35; s += 7 {
		if i >= len(b) {
			return 0, i, false
		}
		c := b[i]
		i++
		if s == 28 && c > 0x0f {
			return 0, i, false
		}
		u |= uint32(c&0x7f) << s
		if c < 0x80 {
			return int32(u>>1) ^ -int32(u&1), i, true
		}
	}
	return 0, i, false
}

// avroSkip skips the value of node n at b[i:], returning the index after
// it; ok is false when the value does not decode (truncated, a negative
// length or count, an unknown union branch or enum symbol, nesting deeper
// than avroMaxDepth).
func avroSkip(n *avroNode, b []byte, i, depth int) (next int, ok bool) {
	if n.fixed >= 0 {
		if n.fixed > len(b)-i {
			return i, false
		}
		return i + n.fixed, true
	}
	switch n.kind {
	case avroKindInt:
		_, i, ok = avroReadInt(b, i)
		return i, ok
	case avroKindLong:
		_, i, ok = avroReadLong(b, i)
		return i, ok
	case avroKindBytes:
		var l int64
		if l, i, ok = avroReadLong(b, i); !ok || l < 0 || l > int64(len(b)-i) {
			return i, false
		}
		return i + int(l), true
	case avroKindEnum:
		var v int32
		if v, i, ok = avroReadInt(b, i); !ok || v < 0 || int(v) >= n.n {
			return i, false
		}
		return i, true
	}
	if depth >= avroMaxDepth {
		return i, false
	}
	switch n.kind {
	case avroKindUnion:
		var idx int64
		if idx, i, ok = avroReadLong(b, i); !ok || idx < 0 || idx >= int64(len(n.nodes)) {
			return i, false
		}
		return avroSkip(n.nodes[idx], b, i, depth+1)
	case avroKindRecord:
		for _, f := range n.nodes {
			if i, ok = avroSkip(f, b, i, depth+1); !ok {
				return i, false
			}
		}
		return i, true
	case avroKindArray, avroKindMap:
		return avroSkipBlocks(n, b, i, depth)
	}
	return i, false
}

// avroSkipBlocks skips an array's or a map's blocks. A block is a count
// (0 ends), then that many items; a negative count is followed by the
// block's size in bytes, which skips the block in one step.
func avroSkipBlocks(n *avroNode, b []byte, i, depth int) (next int, ok bool) {
	for {
		var count int64
		if count, i, ok = avroReadLong(b, i); !ok {
			return i, false
		}
		if count == 0 {
			return i, true
		}
		if count < 0 {
			var size int64
			if size, i, ok = avroReadLong(b, i); !ok || size < 0 || size > int64(len(b)-i) {
				return i, false
			}
			i += int(size)
			continue
		}
		if n.kind == avroKindArray && n.elem.fixed >= 0 {
			// Items of one size: skip them in one step; zero-size items
			// (null, empty records) take no bytes whatever their count.
			if n.elem.fixed == 0 {
				continue
			}
			if count > int64((len(b)-i)/n.elem.fixed) {
				return i, false
			}
			i += int(count) * n.elem.fixed
			continue
		}
		// Every item takes at least one byte (a map key's length, a
		// variable-size value), so a count beyond the bytes left is
		// truncated, and the loop below is bounded by the payload.
		if count > int64(len(b)-i) {
			return i, false
		}
		for ; count > 0; count-- {
			if n.kind == avroKindMap {
				var l int64
				if l, i, ok = avroReadLong(b, i); !ok || l < 0 || l > int64(len(b)-i) {
					return i, false
				}
				i += int(l)
			}
			if i, ok = avroSkip(n.elem, b, i, depth+1); !ok {
				return i, false
			}
		}
	}
}
