package key

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"dedup/registry"
	"dedup/schema"
)

// Registry is what a schema-framed source needs of the Schema Registry
// client (registry.Client).
type Registry interface {
	// Lookup never blocks: Ready with the schema, NotFound, or Pending
	// while the schema is being fetched.
	Lookup(id uint32) (*registry.Schema, registry.State)
	// Wait blocks until the fetch of id settles or ctx ends.
	Wait(ctx context.Context, id uint32) error
}

// ErrNoRegistry: a schema-framed source was used without WithRegistry.
var ErrNoRegistry = errors.New("schema-framed key source without a schema registry")

// framed is a schema-framed part's state: its registry, and the plans
// compiled for it, by schema id. The plans are an immutable map swapped
// whole on insert, so the hot path reads them without a lock or an
// allocation; schema ids are few, and a record of a new id pays the
// compile once.
type framed struct {
	reg   Registry
	mu    sync.Mutex // serialises inserts
	plans atomic.Pointer[map[uint32]compiled]
}

// compiled is one schema id's outcome for a part: a plan, or the status
// every record of that id gets (UnknownSchema, Undecodable).
type compiled struct {
	plan   schema.Plan
	status Status
}

// maxPlans bounds the plans one part keeps. Past it the map starts empty
// again: a plan is rebuilt from the registry client's cache, which keeps
// its own memory bound.
const maxPlans = 4096

// WithRegistry returns k with its schema-framed parts reading schemas from
// r. Parts get fresh plan caches.
func (k Source) WithRegistry(r Registry) Source {
	parts := make([]part, len(k.parts))
	copy(parts, k.parts)
	for i := range parts {
		if parts[i].framed != nil {
			parts[i].framed = &framed{reg: r}
		}
	}
	return Source{parts: parts, spec: k.spec}
}

// framedKey is a schema-framed part's key of value.
func (p *part) framedKey(value []byte, a *Arena) ([]byte, Status) {
	id, payload, ok := schema.Frame(value)
	if !ok {
		return nil, NotFramed
	}
	f := p.framed
	c, ok := f.lookup(id)
	if !ok {
		if f.reg == nil {
			return nil, Waiting
		}
		s, state := f.reg.Lookup(id)
		switch state {
		case registry.Pending:
			return nil, Waiting
		case registry.NotFound:
			c = compiled{status: UnknownSchema}
		default:
			c = p.compile(s)
		}
		f.insert(id, c)
	}
	switch {
	case c.plan != nil:
	case p.kind == fromJSONSchema && c.status == Keyed:
		return jsonStatus(payload, p.path)
	default:
		return nil, c.status
	}
	start := len(a.b)
	var st schema.Status
	a.b, st = c.plan.Append(a.b, payload)
	switch st {
	case schema.Found:
		if len(a.b) == start {
			return nil, MissingField
		}
		return a.take(start), Keyed
	case schema.Missing:
		return nil, MissingField
	case schema.NotScalar:
		return nil, NotScalar
	}
	return nil, Undecodable
}

// compile builds the part's plan for s. A schema of another format than
// the part reads, or one that does not compile, makes every record of its
// id Undecodable.
func (p *part) compile(s *registry.Schema) compiled {
	var plan schema.Plan
	var err error
	switch {
	case p.kind == fromAvro && s.Format == registry.Avro:
		plan, err = schema.CompileAvro(s.Text, s.References, p.path)
	case p.kind == fromProtobuf && s.Format == registry.Protobuf:
		plan, err = schema.CompileProtobuf(s.Text, s.References, p.path)
	case p.kind == fromJSONSchema && s.Format == registry.JSON:
		return compiled{status: Keyed} // the value is JSON: read by the JSON scanner
	default:
		return compiled{status: Undecodable}
	}
	if err != nil {
		return compiled{status: Undecodable}
	}
	return compiled{plan: plan}
}

func (f *framed) lookup(id uint32) (compiled, bool) {
	m := f.plans.Load()
	if m == nil {
		return compiled{}, false
	}
	c, ok := (*m)[id]
	return c, ok
}

func (f *framed) insert(id uint32, c compiled) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.plans.Load()
	n := 0
	if old != nil && len(*old) < maxPlans {
		n = len(*old)
	}
	m := make(map[uint32]compiled, n+1)
	if n > 0 {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[id] = c
	f.plans.Store(&m)
}

// wait blocks until value's schema is known, when it is framed and not.
func (f *framed) wait(ctx context.Context, value []byte) error {
	id, _, ok := schema.Frame(value)
	if !ok {
		return nil
	}
	if _, ok := f.lookup(id); ok {
		return nil
	}
	if f.reg == nil {
		return ErrNoRegistry
	}
	if _, state := f.reg.Lookup(id); state != registry.Pending {
		return nil
	}
	return f.reg.Wait(ctx, id)
}

// known reports whether value's schema is known to the part (or value is
// not framed, which needs no schema); when it is not, Lookup starts its
// fetch.
func (f *framed) known(value []byte) bool {
	id, _, ok := schema.Frame(value)
	if !ok {
		return true
	}
	if _, ok := f.lookup(id); ok {
		return true
	}
	if f.reg == nil {
		return false
	}
	_, state := f.reg.Lookup(id)
	return state != registry.Pending
}
