package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"dedup/registry/registrytest"
	"dedup/schema"
)

func names(refs []schema.Reference) []string {
	var ns []string
	for _, r := range refs {
		ns = append(ns, r.Name)
	}
	return ns
}

func TestReferences(t *testing.T) {
	reg := newRegistry(t)

	// Avro: Order refers to Address, which refers to Country; Order
	// refers to Country too.
	country := `{"type":"enum","name":"Country","namespace":"com.acme","symbols":["FR","DE"]}`
	reg.Register("com.acme.Country", sr.Schema{Schema: country})
	address := `{"type":"record","name":"Address","namespace":"com.acme","fields":[{"name":"country","type":"com.acme.Country"}]}`
	reg.Register("com.acme.Address", sr.Schema{Schema: address, References: []sr.SchemaReference{
		{Name: "com.acme.Country", Subject: "com.acme.Country", Version: 1},
	}})
	order := reg.Register("orders-value", sr.Schema{
		Schema: `{"type":"record","name":"Order","namespace":"com.acme","fields":[` +
			`{"name":"billing","type":"com.acme.Address"},{"name":"origin","type":"com.acme.Country"}]}`,
		References: []sr.SchemaReference{
			{Name: "com.acme.Address", Subject: "com.acme.Address", Version: 1},
			{Name: "com.acme.Country", Subject: "com.acme.Country", Version: 1},
		},
	})

	// Protobuf: a diamond, order.proto imports money.proto and
	// date.proto, and money.proto imports date.proto.
	date := `syntax = "proto3"; package acme; message Date { int32 day = 1; }`
	reg.Register("acme/date.proto", sr.Schema{Type: sr.TypeProtobuf, Schema: date})
	money := `syntax = "proto3"; package acme; import "acme/date.proto"; message Money { int64 units = 1; Date at = 2; }`
	reg.Register("acme/money.proto", sr.Schema{Type: sr.TypeProtobuf, Schema: money, References: []sr.SchemaReference{
		{Name: "acme/date.proto", Subject: "acme/date.proto", Version: 1},
	}})
	item := reg.Register("items-value", sr.Schema{
		Type:   sr.TypeProtobuf,
		Schema: `syntax = "proto3"; package acme; import "acme/money.proto"; import "acme/date.proto"; message Item { Money price = 1; Date added = 2; }`,
		References: []sr.SchemaReference{
			{Name: "acme/money.proto", Subject: "acme/money.proto", Version: 1},
			{Name: "acme/date.proto", Subject: "acme/date.proto", Version: 1},
		},
	})

	// JSON Schema: a $ref URL.
	addrJSON := `{"$id":"https://acme.example/address.json","type":"object"}`
	reg.Register("address.json", sr.Schema{Type: sr.TypeJSON, Schema: addrJSON})
	user := reg.Register("users-value", sr.Schema{
		Type:       sr.TypeJSON,
		Schema:     `{"type":"object","properties":{"home":{"$ref":"https://acme.example/address.json"}}}`,
		References: []sr.SchemaReference{{Name: "https://acme.example/address.json", Subject: "address.json", Version: 1}},
	})

	c, _ := newClient(t, Options{URLs: []string{reg.URL()}})
	for _, tc := range []struct {
		id     int
		format Format
		want   []schema.Reference
	}{
		{order, Avro, []schema.Reference{{Name: "com.acme.Country", Text: country}, {Name: "com.acme.Address", Text: address}}},
		{item, Protobuf, []schema.Reference{{Name: "acme/date.proto", Text: date}, {Name: "acme/money.proto", Text: money}}},
		{user, JSON, []schema.Reference{{Name: "https://acme.example/address.json", Text: addrJSON}}},
	} {
		if err := c.Wait(context.Background(), uint32(tc.id)); err != nil {
			t.Fatal(err)
		}
		s, st := c.Lookup(uint32(tc.id))
		if st != Ready || s.Format != tc.format {
			t.Fatalf("Lookup(%d) = %+v, %v", tc.id, s, st)
		}
		if !slices.Equal(s.References, tc.want) {
			t.Errorf("%v references %v; want %v", tc.format, names(s.References), names(tc.want))
		}
	}
	// Each referenced subject version fetched once per id that needs it.
	if n := reg.Requests("/subjects/acme/date.proto/versions/1"); n != 1 {
		t.Errorf("date.proto fetched %d times for one id; want 1", n)
	}

	s, err := c.Latest(context.Background(), "orders-value")
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != uint32(order) || s.Format != Avro || !slices.Equal(names(s.References), []string{"com.acme.Country", "com.acme.Address"}) {
		t.Errorf("Latest = %+v", s)
	}
}

func TestLatest(t *testing.T) {
	reg := newRegistry(t)
	reg.Register("orders-value", avro("OrderV1"))
	v2 := reg.Register("orders-value", avro("OrderV2"))
	c, _ := newClient(t, Options{URLs: []string{reg.URL()}})
	s, err := c.Latest(context.Background(), "orders-value")
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != uint32(v2) || !strings.Contains(s.Text, "OrderV2") {
		t.Errorf("Latest = %+v; want version 2", s)
	}
	if _, err := c.Latest(context.Background(), "nope-value"); !errors.Is(err, ErrSubjectNotFound) {
		t.Errorf("Latest of a missing subject: %v; want ErrSubjectNotFound", err)
	}
	// One attempt, no retry.
	reg.SetDown(registrytest.Unavailable)
	before := reg.Requests("/")
	var ue *UnavailableError
	if _, err := c.Latest(context.Background(), "orders-value"); !errors.As(err, &ue) {
		t.Errorf("Latest during an outage: %v; want *UnavailableError", err)
	}
	if n := reg.Requests("/") - before; n != 1 {
		t.Errorf("%d requests; want 1", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Latest(ctx, "orders-value"); !errors.Is(err, context.Canceled) {
		t.Errorf("Latest with an ended context: %v", err)
	}
}

// A reference the registry no longer has makes the whole id NotFound, said
// in a log line; Latest says it as ErrUnresolvableReference.
func TestMissingReference(t *testing.T) {
	reg := newRegistry(t)
	reg.Register("com.acme.Country", sr.Schema{Schema: `{"type":"enum","name":"Country","namespace":"com.acme","symbols":["FR"]}`})
	id := uint32(reg.Register("orders-value", sr.Schema{
		Schema:     `{"type":"record","name":"Order","fields":[{"name":"c","type":"com.acme.Country"}]}`,
		References: []sr.SchemaReference{{Name: "com.acme.Country", Subject: "com.acme.Country", Version: 1}},
	}))
	reg.DeleteSubject("com.acme.Country")
	c, logs := newClient(t, Options{URLs: []string{reg.URL()}})
	if err := c.Wait(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if _, st := c.Lookup(id); st != NotFound {
		t.Fatalf("Lookup = %v; want not_found", st)
	}
	if n := logs.count("schema has a reference the schema registry cannot resolve"); n != 1 ||
		!strings.Contains(logs.String(), `com.acme.Country`) {
		t.Errorf("%d lines about the reference; want 1 naming it:\n%s", n, logs)
	}
	if err := c.Health(); err != nil {
		t.Errorf("health: %v", err)
	}
	if _, err := c.Latest(context.Background(), "orders-value"); !errors.Is(err, ErrUnresolvableReference) {
		t.Errorf("Latest: %v; want ErrUnresolvableReference", err)
	}
}

func TestReferenceDepth(t *testing.T) {
	reg := newRegistry(t)
	// chain registers a schema whose references nest n deep.
	chain := func(prefix string, n int) uint32 {
		var refs []sr.SchemaReference
		for i := range n {
			name := fmt.Sprintf("%s%d", prefix, i)
			reg.Register(name, sr.Schema{Schema: fmt.Sprintf(`{"type":"fixed","name":%q,"size":1}`, name), References: refs})
			refs = []sr.SchemaReference{{Name: name, Subject: name, Version: 1}}
		}
		return uint32(reg.Register(prefix+"-value", sr.Schema{Schema: `"string"`, References: refs}))
	}
	deepest := chain("ok", maxReferenceDepth)
	tooDeep := chain("deep", maxReferenceDepth+1)
	c, logs := newClient(t, Options{URLs: []string{reg.URL()}})
	if err := c.Wait(context.Background(), deepest); err != nil {
		t.Fatal(err)
	}
	if s, st := c.Lookup(deepest); st != Ready || len(s.References) != maxReferenceDepth || s.References[0].Name != "ok0" {
		t.Errorf("Lookup of %d nested references = %v", maxReferenceDepth, st)
	}
	if err := c.Wait(context.Background(), tooDeep); err != nil {
		t.Fatal(err)
	}
	if _, st := c.Lookup(tooDeep); st != NotFound {
		t.Errorf("Lookup of %d nested references = %v; want not_found", maxReferenceDepth+1, st)
	}
	if !strings.Contains(logs.String(), "references nest deeper than") {
		t.Errorf("no line about the depth:\n%s", logs)
	}
}

// The real registry cannot hold a cycle (a reference must exist before
// the schema naming it); a broken one answering one must not loop.
func TestReferenceCycle(t *testing.T) {
	answers := map[string]string{
		"/schemas/ids/1":         `{"schema":"{}","references":[{"name":"a","subject":"a","version":1}]}`,
		"/subjects/a/versions/1": `{"subject":"a","version":1,"id":2,"schema":"{}","references":[{"name":"b","subject":"b","version":1}]}`,
		"/subjects/b/versions/1": `{"subject":"b","version":1,"id":3,"schema":"{}","references":[{"name":"a2","subject":"a","version":1}]}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := answers[r.URL.Path]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			body = `{"error_code":40403,"message":"not found"}`
		}
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	c, logs := newClient(t, Options{URLs: []string{srv.URL}})
	if err := c.Wait(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if _, st := c.Lookup(1); st != NotFound {
		t.Errorf("Lookup = %v; want not_found", st)
	}
	if !strings.Contains(logs.String(), "(a cycle)") {
		t.Errorf("no line about the cycle:\n%s", logs)
	}
}
