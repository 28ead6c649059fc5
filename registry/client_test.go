package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"dedup/registry/registrytest"
)

func TestLookupCachesAfterFirstFetch(t *testing.T) {
	reg := newRegistry(t)
	ids := map[Format]int{
		Avro:     reg.Register("orders-value", avro("Order")),
		Protobuf: reg.Register("items-value", sr.Schema{Type: sr.TypeProtobuf, Schema: `syntax = "proto3"; message Item { string id = 1; }`}),
		JSON:     reg.Register("users-value", sr.Schema{Type: sr.TypeJSON, Schema: `{"type":"object","properties":{"id":{"type":"string"}}}`}),
	}
	c, _ := newClient(t, Options{URLs: []string{reg.URL()}})
	for format, id := range ids {
		if s, st := c.Lookup(uint32(id)); st != Pending || s != nil {
			t.Fatalf("first Lookup(%d) = %v, %v; want nil, pending", id, s, st)
		}
		if err := c.Wait(context.Background(), uint32(id)); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			s, st := c.Lookup(uint32(id))
			if st != Ready || s == nil || s.ID != uint32(id) || s.Format != format || s.Text == "" || len(s.References) != 0 {
				t.Fatalf("Lookup(%d) = %+v, %v; want a ready %v schema", id, s, st, format)
			}
		}
		if n := reg.Requests(idsPath(id)); n != 1 {
			t.Errorf("%v: %d requests for id %d; want 1", format, n, id)
		}
	}
	st := c.Stats()
	if st.Schemas != 3 || st.RequestsOK != 3 || st.Bytes <= 3*entryOverhead || !st.Up || st.Waiting != 0 {
		t.Errorf("stats %+v", st)
	}
	if err := c.Health(); err != nil {
		t.Errorf("health: %v", err)
	}
}

// All the goroutines ask while the one request hangs, so they all find the
// fetch in flight; once released, every one of them sees the schema.
func TestOneFetchPerID(t *testing.T) {
	reg := newRegistry(t)
	id := uint32(reg.Register("orders-value", avro("Order")))
	reg.SetDown(registrytest.Hang)
	c, _ := newClient(t, Options{URLs: []string{reg.URL()}, Timeout: time.Minute})

	const askers = 50
	var (
		start, asked sync.WaitGroup
		done         sync.WaitGroup
		errs         = make(chan error, askers)
	)
	start.Add(1)
	for range askers {
		asked.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			_, st := c.Lookup(id)
			asked.Done()
			if st != Pending {
				errs <- fmt.Errorf("Lookup while the request hangs: %v", st)
				return
			}
			if err := c.Wait(context.Background(), id); err != nil {
				errs <- err
				return
			}
			if s, st := c.Lookup(id); st != Ready || s.ID != id {
				errs <- fmt.Errorf("Lookup after Wait: %v", st)
			}
		}()
	}
	start.Done()
	asked.Wait()
	waitFor(t, "the fetch to reach the registry", func() bool { return reg.Requests(idsPath(int(id))) == 1 })
	reg.SetDown(registrytest.Up)
	done.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := reg.Requests("/"); n != 1 {
		t.Errorf("%d requests; want 1", n)
	}
}

func TestNotFoundCached(t *testing.T) {
	reg := newRegistry(t)
	c, logs := newClient(t, Options{URLs: []string{reg.URL()}})
	const id = 404
	if err := c.Wait(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if s, st := c.Lookup(id); st != NotFound || s != nil {
			t.Fatalf("Lookup = %v, %v; want nil, not_found", s, st)
		}
		if err := c.Wait(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	if n := reg.Requests(idsPath(id)); n != 1 {
		t.Errorf("%d requests; want 1", n)
	}
	if err := c.Health(); err != nil {
		t.Errorf("a 40403 is an answer, health: %v", err)
	}
	if st := c.Stats(); st.RequestsNotFound != 1 || st.Schemas != 1 || st.Bytes != entryOverhead {
		t.Errorf("stats %+v", st)
	}
	if n := logs.count("schema id not in the schema registry"); n != 1 {
		t.Errorf("%d lines for the unknown id; want 1", n)
	}
}

// A 404 without the registry's code is a wrong URL, not an unknown id:
// caching it would make the id's records undecodable for good.
func TestNotFoundWithoutCodeIsAnOutage(t *testing.T) {
	reg := newRegistry(t)
	id := uint32(reg.Register("orders-value", avro("Order")))
	c, _ := newClient(t, Options{URLs: []string{reg.URL() + "/wrong-base"}})
	c.Lookup(id)
	waitFor(t, "health to fail", func() bool { return c.Health() != nil })
	var ue *UnavailableError
	if !errors.As(c.Health(), &ue) {
		t.Fatalf("health %v; want *UnavailableError", c.Health())
	}
	if _, st := c.Lookup(id); st != Pending {
		t.Errorf("Lookup = %v; want pending", st)
	}
}

func TestLookupDoesNotAllocate(t *testing.T) {
	reg := newRegistry(t)
	id := uint32(reg.Register("orders-value", avro("Order")))
	c, _ := newClient(t, Options{URLs: []string{reg.URL()}})
	for _, id := range []uint32{id, 999} {
		if err := c.Wait(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		var sink *Schema
		allocs := testing.AllocsPerRun(1000, func() {
			s, _ := c.Lookup(id)
			sink = s
		})
		_ = sink
		if allocs != 0 {
			t.Errorf("Lookup(%d) on a cached id: %v allocations; want 0", id, allocs)
		}
	}
}

func TestEviction(t *testing.T) {
	reg := newRegistry(t)
	pad := strings.Repeat("x", 1000)
	var sizes []int64
	for i := range 4 {
		sch := sr.Schema{Schema: fmt.Sprintf(`{"type":"record","name":"R%d","doc":%q,"fields":[]}`, i+1, pad)}
		reg.Register(fmt.Sprintf("s%d-value", i+1), sch)
		sizes = append(sizes, sizeOf(&Schema{Text: sch.Schema}))
	}
	// Room for two schemas, not three.
	limit := sizes[0] + sizes[1] + sizes[2] - 1
	c, _ := newClient(t, Options{URLs: []string{reg.URL()}, CacheBytes: limit})
	for id := uint32(1); id <= 4; id++ {
		if err := c.Wait(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	st := c.Stats()
	if st.Evictions != 2 || st.Schemas != 2 || st.Bytes != sizes[2]+sizes[3] || st.Bytes > limit {
		t.Fatalf("stats %+v; want 2 evictions, ids 3 and 4 cached", st)
	}
	for id, want := range map[uint32]State{1: Pending, 2: Pending, 3: Ready, 4: Ready} {
		if _, got := c.Lookup(id); got != want {
			t.Errorf("Lookup(%d) = %v; want %v", id, got, want)
		}
	}
	// Lookup started the fetches of 1 and 2 again.
	for id := uint32(1); id <= 2; id++ {
		if err := c.Wait(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		if n := reg.Requests(idsPath(int(id))); n != 2 {
			t.Errorf("id %d fetched %d times; want 2", id, n)
		}
	}
	if _, st := c.Lookup(2); st != Ready {
		t.Errorf("Lookup(2) after its refetch = %v", st)
	}
}

// A schema larger than the whole bound is kept anyway (alone): evicting it
// at once would fetch it again for every record.
func TestEvictionKeepsNewest(t *testing.T) {
	reg := newRegistry(t)
	id := uint32(reg.Register("orders-value", avro("Order")))
	c, _ := newClient(t, Options{URLs: []string{reg.URL()}, CacheBytes: 1})
	if err := c.Wait(context.Background(), 999); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if _, st := c.Lookup(id); st != Ready {
		t.Errorf("Lookup = %v; want ready", st)
	}
	if st := c.Stats(); st.Schemas != 1 || st.Evictions != 1 {
		t.Errorf("stats %+v", st)
	}
}

// Lookups of cached ids from many goroutines while new ids settle: the
// race detector checks the copy-on-write table.
func TestConcurrentLookupsWhileSettling(t *testing.T) {
	reg := newRegistry(t)
	const n = 40
	for i := range n {
		reg.Register(fmt.Sprintf("s%d-value", i), avro(fmt.Sprintf("R%d", i)))
	}
	c, _ := newClient(t, Options{URLs: []string{reg.URL()}})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				id := uint32((i+g)%n + 1)
				if err := c.Wait(context.Background(), id); err != nil {
					t.Error(err)
					return
				}
				if s, st := c.Lookup(id); st != Ready || s.ID != id {
					t.Errorf("Lookup(%d) = %v", id, st)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n2 := reg.Requests("/schemas/ids/"); n2 != n {
		t.Errorf("%d requests for %d ids", n2, n)
	}
}

func TestCloseStopsRetryingFetch(t *testing.T) {
	for _, mode := range []registrytest.Mode{registrytest.Unavailable, registrytest.Hang} {
		t.Run(mode.String(), func(t *testing.T) {
			reg := newRegistry(t)
			id := uint32(reg.Register("orders-value", avro("Order")))
			reg.SetDown(mode)
			// A long timeout: a hanging request must end with Close,
			// not with its timeout.
			c, _ := newClient(t, Options{URLs: []string{reg.URL()}, Timeout: time.Hour})
			c.Lookup(id)
			waitFor(t, "the fetch to reach the registry", func() bool { return reg.Requests(idsPath(int(id))) > 0 })
			if mode == registrytest.Unavailable {
				waitFor(t, "the fetch to retry", func() bool { return c.Stats().Waiting == 1 })
			}
			waited := make(chan error, 1)
			go func() { waited <- c.Wait(context.Background(), id) }()
			closed := make(chan struct{})
			go func() {
				c.Close()
				close(closed)
			}()
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Fatal("Close did not return")
			}
			select {
			case err := <-waited:
				if !errors.Is(err, ErrClosed) {
					t.Errorf("Wait after Close: %v; want ErrClosed", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Wait did not return after Close")
			}
			if err := c.Wait(context.Background(), id); !errors.Is(err, ErrClosed) {
				t.Errorf("Wait on a closed client: %v", err)
			}
			if _, st := c.Lookup(id); st != Pending {
				t.Errorf("Lookup on a closed client: %v", st)
			}
			if _, err := c.Latest(context.Background(), "orders-value"); !errors.Is(err, ErrClosed) {
				t.Errorf("Latest on a closed client: %v", err)
			}
			if st := c.Stats(); st.Waiting != 0 {
				t.Errorf("stats after Close %+v", st)
			}
		})
	}
}

func TestWaitContext(t *testing.T) {
	reg := newRegistry(t)
	id := uint32(reg.Register("orders-value", avro("Order")))
	reg.SetDown(registrytest.Unavailable)
	c, _ := newClient(t, Options{URLs: []string{reg.URL()}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := c.Wait(ctx, id); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait: %v; want the context's deadline", err)
	}
	// The fetch does not end with the caller's context.
	reg.SetDown(registrytest.Up)
	if err := c.Wait(context.Background(), id); err != nil {
		t.Fatal(err)
	}
}

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want []string
	}{
		{"no url", Options{}, []string{"no schema registry url"}},
		{"scheme", Options{URLs: []string{"registry:8081"}}, []string{"scheme must be http or https"}},
		{"no host", Options{URLs: []string{"http://"}}, []string{"no host"}},
		{"credentials in url", Options{URLs: []string{"https://key:secret@registry"}}, []string{"credentials in the url", "key:xxxxx@"}},
		{"password alone", Options{URLs: []string{"http://r"}, Password: "p"}, []string{"password set without a username"}},
		{"username alone", Options{URLs: []string{"http://r"}, Username: "u"}, []string{"username set without a password"}},
		{"negative", Options{URLs: []string{"http://r"}, Timeout: -1, CacheBytes: -1}, []string{"timeout -1ns is negative", "cache bytes -1 is negative"}},
		{"back-off", Options{URLs: []string{"http://r"}, BackoffFirst: time.Second, BackoffMax: time.Millisecond}, []string{"max back-off 1ms is below the first back-off 1s"}},
		{"every problem at once", Options{URLs: []string{"ftp://r"}, Password: "p"}, []string{"scheme", "password"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.o)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
	c, err := New(Options{URLs: []string{"http://registry:8081"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.o.Timeout != DefaultTimeout || c.o.CacheBytes != DefaultCacheBytes || c.o.BackoffFirst != DefaultBackoffFirst || c.o.BackoffMax != DefaultBackoffMax || c.o.Logger == nil {
		t.Errorf("defaults not applied: %+v", c.o)
	}
}

// The hit path from every partition's goroutine at once.
func BenchmarkLookup(b *testing.B) {
	reg := registrytest.New()
	defer reg.Close()
	id := uint32(reg.Register("orders-value", avro("Order")))
	c, err := New(Options{URLs: []string{reg.URL()}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.Wait(context.Background(), id); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, st := c.Lookup(id); st != Ready {
				b.Fatal(st)
			}
		}
	})
}
