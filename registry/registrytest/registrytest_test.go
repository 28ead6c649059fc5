package registrytest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

// pkg/sr's own client, as a producer's serializer uses it, works against
// the server.
func TestSRClient(t *testing.T) {
	s := New()
	defer s.Close()
	cl, err := sr.NewClient(sr.URLs(s.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	avro := sr.Schema{Schema: `{"type":"record","name":"Order","fields":[]}`}
	created, err := cl.CreateSchema(ctx, "orders-value", avro)
	if err != nil {
		t.Fatal(err)
	}
	if created.ID != 1 || created.Version != 1 || created.Subject != "orders-value" {
		t.Errorf("CreateSchema = %+v", created)
	}
	// The same schema: the same id, in the same subject (no new version)
	// and in another.
	if id, err := cl.RegisterSchema(ctx, "orders-value", avro, -1, -1); err != nil || id != 1 {
		t.Errorf("registered again: %d, %v", id, err)
	}
	if id := s.Register("archive-value", avro); id != 1 {
		t.Errorf("in another subject: id %d", id)
	}
	if vs, err := cl.SubjectVersions(ctx, "orders-value"); err != nil || !slices.Equal(vs, []int{1}) {
		t.Errorf("versions %v, %v", vs, err)
	}
	proto := sr.Schema{Type: sr.TypeProtobuf, Schema: `syntax = "proto3"; message Item {}`}
	created, err = cl.CreateSchema(ctx, "orders-value", proto)
	if err != nil || created.ID != 2 || created.Version != 2 {
		t.Fatalf("second version: %+v, %v", created, err)
	}

	got, err := cl.SchemaByID(ctx, 2)
	if err != nil || got.Type != sr.TypeProtobuf || got.Schema != proto.Schema {
		t.Errorf("SchemaByID = %+v, %v", got, err)
	}
	latest, err := cl.SchemaByVersion(ctx, "orders-value", -1)
	if err != nil || latest.ID != 2 || latest.Version != 2 {
		t.Errorf("latest = %+v, %v", latest, err)
	}
	if text, err := cl.SchemaTextByID(ctx, 1); err != nil || text != avro.Schema {
		t.Errorf("SchemaTextByID = %q, %v", text, err)
	}
	if subjects, err := cl.Subjects(ctx); err != nil || !slices.Equal(subjects, []string{"archive-value", "orders-value"}) {
		t.Errorf("subjects %v, %v", subjects, err)
	}
	if ss, err := cl.LookupSchema(ctx, "orders-value", avro); err != nil || ss.ID != 1 || ss.Version != 1 {
		t.Errorf("LookupSchema = %+v, %v", ss, err)
	}

	for _, tc := range []struct {
		name string
		err  func() error
		code int
	}{
		{"unknown id", func() error { _, err := cl.SchemaByID(ctx, 9); return err }, 40403},
		{"unknown subject", func() error { _, err := cl.SchemaByVersion(ctx, "nope", 1); return err }, 40401},
		{"unknown version", func() error { _, err := cl.SchemaByVersion(ctx, "orders-value", 9); return err }, 40402},
		{"unregistered schema", func() error {
			_, err := cl.LookupSchema(ctx, "orders-value", sr.Schema{Schema: `"int"`})
			return err
		}, 40403},
		{"missing reference", func() error {
			_, err := cl.CreateSchema(ctx, "x", sr.Schema{Schema: `"int"`, References: []sr.SchemaReference{{Name: "a", Subject: "a", Version: 1}}})
			return err
		}, 42201},
	} {
		var re *sr.ResponseError
		if err := tc.err(); !errors.As(err, &re) || re.ErrorCode != tc.code {
			t.Errorf("%s: %v; want error code %d", tc.name, err, tc.code)
		}
	}
	if n := s.Requests("/schemas/ids/"); n < 3 {
		t.Errorf("%d requests under /schemas/ids/", n)
	}
}

// The body of an Avro schema omits schemaType, as the Confluent registry's
// does; clients that read it must take its absence as AVRO.
func TestWireFormat(t *testing.T) {
	s := New()
	defer s.Close()
	s.Register("orders-value", sr.Schema{Schema: `"string"`})
	resp, err := http.Get(s.URL() + "/schemas/ids/1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != ContentType {
		t.Errorf("content type %q", ct)
	}
	if string(body) != `{"schema":"\"string\""}` {
		t.Errorf("body %s", body)
	}
	resp, err = http.Get(s.URL() + "/not/a/path")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(body), `"error_code":404`) {
		t.Errorf("unknown path: %d %s", resp.StatusCode, body)
	}
}

func TestControls(t *testing.T) {
	s := New()
	defer s.Close()
	s.Register("orders-value", sr.Schema{Schema: `"string"`})
	get := func() (int, error) {
		resp, err := http.Get(s.URL() + "/schemas/ids/1")
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	s.SetDown(Unavailable)
	if code, err := get(); code != 503 || err != nil {
		t.Errorf("unavailable: %d, %v", code, err)
	}
	s.SetDown(Drop)
	if _, err := get(); err == nil {
		t.Error("drop: no error")
	}
	s.SetDown(Stopped)
	before := s.Requests("/")
	if _, err := get(); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("stopped: %v", err)
	}
	if n := s.Requests("/"); n != before {
		t.Errorf("a request counted while stopped: %d, then %d", before, n)
	}
	s.SetDown(Up)
	if code, err := get(); code != 200 || err != nil {
		t.Errorf("up again: %d, %v", code, err)
	}
	s.SetAuth("u", "p")
	if code, _ := get(); code != 401 {
		t.Errorf("auth without credentials: %d", code)
	}
	req, _ := http.NewRequest(http.MethodGet, s.URL()+"/schemas/ids/1", nil)
	req.SetBasicAuth("u", "p")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("auth with credentials: %v %v", resp, err)
	}
	if resp != nil {
		resp.Body.Close()
	}
}
