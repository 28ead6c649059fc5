package registry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"dedup/schema"
)

// Format is a schema's language, the registry's schemaType.
type Format uint8

const (
	Avro Format = iota // schemaType AVRO, or none
	Protobuf
	JSON
)

// String is the registry's name of the format.
func (f Format) String() string {
	switch f {
	case Avro:
		return "AVRO"
	case Protobuf:
		return "PROTOBUF"
	case JSON:
		return "JSON"
	}
	return "unknown"
}

func formatOf(t sr.SchemaType) Format {
	switch t {
	case sr.TypeProtobuf:
		return Protobuf
	case sr.TypeJSON:
		return JSON
	}
	return Avro
}

// Schema is a writer's schema with everything it refers to.
type Schema struct {
	ID     uint32
	Format Format
	Text   string
	// References: every schema Text refers to, and every schema those
	// refer to, each once (by name), each after its own references: the
	// order schema's Compile functions take. Name is the name the
	// referring schema uses: an Avro full type name, a Protobuf import
	// path, a JSON Schema $ref URL.
	References []schema.Reference
}

// State is what Lookup knows of an id.
type State uint8

const (
	// Pending: not known yet; a background fetch is under way (the
	// zero value, so that a State nobody set never reads as an answer).
	Pending State = iota
	// Ready: the schema is known.
	Ready
	// NotFound: the registry has no schema with this id (40403), or the
	// schema has a reference the registry cannot resolve. Records with
	// the id are undecodable.
	NotFound
)

// String is the state as a log or metric value.
func (s State) String() string {
	switch s {
	case Pending:
		return "pending"
	case Ready:
		return "ready"
	case NotFound:
		return "not_found"
	}
	return "unknown"
}

// Client looks writer schemas up by id and caches them. Safe for
// concurrent use.
type Client struct {
	o         Options
	clients   []*sr.Client // one per URL, in Options.URLs order
	transport *http.Transport

	// table is the cache: an immutable map replaced as a whole (under
	// mu) on every change, so that Lookup reads it without a lock.
	table atomic.Pointer[map[uint32]entry]

	mu      sync.Mutex
	flights map[uint32]*flight // ids being fetched
	order   []uint32           // settled ids, oldest first: the eviction order
	sizes   map[uint32]int64   // settled ids' accounted bytes
	closed  bool

	bytes     atomic.Int64 // sum of sizes
	cached    atomic.Int64 // len(sizes)
	evictions atomic.Uint64
	waiting   atomic.Int64 // flights that failed at least once

	requests [outcomes]atomic.Uint64
	prefer   atomic.Int32  // the URL that answered last
	seq      atomic.Uint64 // numbers calls, for health's ordering
	health   health

	ctx    context.Context // ends at Close: background fetches
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type entry struct {
	schema *Schema // nil unless Ready
	state  State
}

// flight is one background fetch; done is closed when it ends.
type flight struct {
	done chan struct{}
	err  error // set before done is closed: nil, or ErrClosed
}

// entryOverhead is what one cached id costs beyond its texts: the map
// slot, the Schema and its slice headers, the eviction queue.
const entryOverhead = 160

// referenceOverhead is what one reference costs beyond its two strings.
const referenceOverhead = 32

// maxEntries bounds the ids cached whatever their bytes: every change
// copies the table, so its length is the cost of each insert. Real
// deployments use hundreds of ids; a stream of bogus ids (40403, 160 bytes
// each) would otherwise grow the table to CacheBytes/entryOverhead.
const maxEntries = 1 << 16

func sizeOf(s *Schema) int64 {
	n := int64(entryOverhead)
	if s == nil {
		return n
	}
	n += int64(len(s.Text))
	for _, r := range s.References {
		n += referenceOverhead + int64(len(r.Name)+len(r.Text))
	}
	return n
}

// New returns a client for o. It validates o and makes no request.
func New(o Options) (*Client, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if o.TLS != nil {
		tr.TLSClientConfig = o.TLS.Clone()
	}
	hc := &http.Client{Transport: tr, Timeout: o.Timeout}
	c := &Client{
		o:         o,
		transport: tr,
		flights:   map[uint32]*flight{},
		sizes:     map[uint32]int64{},
	}
	for _, u := range o.URLs {
		// One pkg/sr client per URL: its own list is tried once, in
		// order, on transport errors only, so a 5xx from the first URL
		// would never reach the second; call walks the URLs itself.
		opts := []sr.ClientOpt{sr.URLs(u), sr.HTTPClient(hc), sr.UserAgent("dedup")}
		if o.Username != "" {
			opts = append(opts, sr.BasicAuth(o.Username, o.Password))
		}
		cl, err := sr.NewClient(opts...)
		if err != nil {
			return nil, fmt.Errorf("create schema registry client for %s: %w", u, err)
		}
		c.clients = append(c.clients, cl)
	}
	empty := map[uint32]entry{}
	c.table.Store(&empty)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Lookup is id's schema when it is cached (Ready), or whether the registry
// has none (NotFound). Otherwise it starts a background fetch of id, unless
// one is under way, and answers Pending. On a cached id it takes no lock
// and allocates nothing: it is on every record's path.
func (c *Client) Lookup(id uint32) (*Schema, State) {
	if e, ok := (*c.table.Load())[id]; ok {
		return e.schema, e.state
	}
	c.start(id)
	return nil, Pending
}

// Wait blocks until the fetch of id settles, starting it if needed: then
// Lookup answers Ready or NotFound (unless the cache evicted id in
// between). It returns ctx.Err() if ctx ends first and ErrClosed if the
// client is closed before the fetch settles.
func (c *Client) Wait(ctx context.Context, id uint32) error {
	if e, ok := (*c.table.Load())[id]; ok && e.state != Pending {
		return nil
	}
	f, err := c.start(id)
	if f == nil {
		return err
	}
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// start returns the flight of id, starting one if none is under way; nil
// when id is settled already, with ErrClosed when the client is closed.
func (c *Client) start(id uint32) (*flight, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if f := c.flights[id]; f != nil {
		return f, nil
	}
	if e, ok := (*c.table.Load())[id]; ok && e.state != Pending {
		return nil, nil
	}
	f := &flight{done: make(chan struct{})}
	c.flights[id] = f
	// Pending in the table too, so that the records waiting for id ask
	// without taking mu.
	c.replaceLocked(func(m map[uint32]entry) { m[id] = entry{state: Pending} })
	c.wg.Add(1)
	go c.fetch(id, f)
	return f, nil
}

// replaceLocked swaps the table for a copy changed by edit.
func (c *Client) replaceLocked(edit func(map[uint32]entry)) {
	old := *c.table.Load()
	m := make(map[uint32]entry, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	edit(m)
	c.table.Store(&m)
}

// settle caches the outcome of f, evicting the oldest ids past the memory
// bound (or maxEntries), and ends f. The newest id stays even when it
// alone exceeds the bound: evicting it would fetch it again for every
// record.
func (c *Client) settle(id uint32, f *flight, s *Schema, st State) {
	size := sizeOf(s)
	c.mu.Lock()
	c.order = append(c.order, id)
	c.sizes[id] = size
	total := c.bytes.Add(size)
	var evicted []uint32
	for (total > c.o.CacheBytes || len(c.order) > maxEntries) && len(c.order) > 1 {
		victim := c.order[0]
		c.order = c.order[1:]
		total = c.bytes.Add(-c.sizes[victim])
		delete(c.sizes, victim)
		evicted = append(evicted, victim)
	}
	c.replaceLocked(func(m map[uint32]entry) {
		for _, v := range evicted {
			delete(m, v)
		}
		m[id] = entry{schema: s, state: st}
	})
	c.cached.Store(int64(len(c.sizes)))
	c.evictions.Add(uint64(len(evicted)))
	delete(c.flights, id)
	c.mu.Unlock()
	close(f.done)
}

// abort ends f without an outcome: the client is closing.
func (c *Client) abort(id uint32, f *flight) {
	c.mu.Lock()
	delete(c.flights, id)
	c.mu.Unlock()
	f.err = ErrClosed
	close(f.done)
}

// fetch is the background fetch of id: it retries outages and refused
// credentials with back-off until the registry answers or Close. It runs
// on the client's context, not a caller's: every record of the id waits
// for it, whoever asked first.
func (c *Client) fetch(id uint32, f *flight) {
	defer c.wg.Done()
	memo := map[subjectVersion]sr.SubjectSchema{} // references fetched, kept across retries
	wait := c.o.BackoffFirst
	failed := false
	for {
		s, st, err := c.resolveID(c.ctx, id, memo)
		if err == nil {
			if failed {
				c.waiting.Add(-1)
			}
			c.settle(id, f, s, st)
			return
		}
		if c.ctx.Err() != nil {
			break
		}
		if !failed {
			failed = true
			c.waiting.Add(1)
		}
		t := time.NewTimer(jitter(wait))
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
		}
		if c.ctx.Err() != nil {
			break
		}
		wait = min(2*wait, c.o.BackoffMax)
	}
	if failed {
		c.waiting.Add(-1)
	}
	c.abort(id, f)
}

// jitter is a wait between half of d and d, so that the fetches that
// failed together do not retry together.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

// resolveID fetches id and its references: Ready, NotFound, or an error
// to retry on.
func (c *Client) resolveID(ctx context.Context, id uint32, memo map[subjectVersion]sr.SubjectSchema) (*Schema, State, error) {
	a := asker{attrs: []any{"schema_id", id}, background: true}
	var got sr.Schema
	err := c.call(ctx, request{
		path:     fmt.Sprintf("/schemas/ids/%d", id),
		notFound: []int{sr.ErrSchemaNotFound.Code},
		asker:    a,
		do: func(ctx context.Context, cl *sr.Client) (err error) {
			got, err = cl.SchemaByID(ctx, int(id))
			if err == nil && got.Schema == "" {
				err = errNoText
			}
			return err
		},
	})
	var nf *notFoundError
	if errors.As(err, &nf) {
		c.o.Logger.Warn("schema id not in the schema registry: its records are forwarded unkeyed (reason unknown_schema)",
			"schema_id", id, "err", err)
		return nil, NotFound, nil
	}
	if err != nil {
		return nil, Pending, err
	}
	refs, err := c.resolve(ctx, got.References, memo, a)
	var ue *unresolvableError
	if errors.As(err, &ue) {
		c.o.Logger.Warn("schema has a reference the schema registry cannot resolve: its records are forwarded unkeyed (reason unknown_schema)",
			"schema_id", id, "err", err)
		return nil, NotFound, nil
	}
	if err != nil {
		return nil, Pending, err
	}
	return &Schema{ID: id, Format: formatOf(got.Type), Text: got.Schema, References: refs}, Ready, nil
}

// Latest is the latest version of subject, its references resolved: one
// attempt per URL, no retry, no change to Health (`dedup check` before a
// deploy). Errors:
// ErrSubjectNotFound, ErrUnresolvableReference, *AuthError,
// *UnavailableError, ctx's, ErrClosed.
func (c *Client) Latest(ctx context.Context, subject string) (*Schema, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	a := asker{attrs: []any{"subject", subject}}
	ss, err := c.version(ctx, subjectVersion{subject: subject, version: -1}, a)
	var nf *notFoundError
	if errors.As(err, &nf) {
		return nil, fmt.Errorf("get latest schema of subject %q: %w: %w", subject, ErrSubjectNotFound, err)
	}
	if err != nil {
		return nil, fmt.Errorf("get latest schema of subject %q: %w", subject, err)
	}
	refs, err := c.resolve(ctx, ss.References, map[subjectVersion]sr.SubjectSchema{}, a)
	if err != nil {
		return nil, fmt.Errorf("get latest schema of subject %q: %w", subject, err)
	}
	return &Schema{ID: uint32(ss.ID), Format: formatOf(ss.Type), Text: ss.Schema.Schema, References: refs}, nil
}

// Close stops the background fetches and waits for them; Wait then
// returns ErrClosed for the ids they were fetching. Lookup answers from
// the cache still, and Pending for the rest.
func (c *Client) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.transport.CloseIdleConnections()
}

// Stats are the client's counters, for the metrics.
type Stats struct {
	// Requests by outcome, one per HTTP request to one URL.
	RequestsOK           uint64 // an answer with the thing asked for
	RequestsNotFound     uint64 // 40401, 40402, 40403
	RequestsUnauthorized uint64 // 401, 403
	RequestsUnavailable  uint64 // everything else: refused, timed out, 5xx, ...
	// Schemas: ids cached (Ready and NotFound); Bytes: their accounted
	// size (Options.CacheBytes bounds it); Evictions: ids evicted so far.
	Schemas   int
	Bytes     int64
	Evictions uint64
	// Waiting: ids whose fetch has failed at least once and goes on.
	Waiting int
	// Up: the registry answered the latest request (Health is nil).
	Up bool
}

// Stats reads the counters; cheap enough for every scrape.
func (c *Client) Stats() Stats {
	return Stats{
		RequestsOK:           c.requests[outcomeOK].Load(),
		RequestsNotFound:     c.requests[outcomeNotFound].Load(),
		RequestsUnauthorized: c.requests[outcomeUnauthorized].Load(),
		RequestsUnavailable:  c.requests[outcomeUnavailable].Load(),
		Schemas:              int(c.cached.Load()),
		Bytes:                c.bytes.Load(),
		Evictions:            c.evictions.Load(),
		Waiting:              int(c.waiting.Load()),
		Up:                   c.Health() == nil,
	}
}
