package check

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"dedup/internal/config"
	"dedup/internal/testkit"
	"dedup/registry/registrytest"
)

// The same order in the three formats: id a string, customer a record (a
// message, an object) whose id is a number.
const (
	avroOrder = `{"type":"record","name":"Order","namespace":"shop","fields":[
	  {"name":"id","type":"string"},
	  {"name":"customer","type":{"type":"record","name":"Customer","fields":[{"name":"id","type":"long"}]}},
	  {"name":"note","type":["null","string"],"default":null}]}`
	protoOrder = `syntax = "proto3";
package shop;
message Order { string id = 1; Customer customer = 2; }
message Customer { int64 id = 1; }`
	jsonOrder = `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
	  "definitions":{"Customer":{"type":"object","properties":{"id":{"type":"integer"}}}},
	  "properties":{"id":{"type":"string"},"customer":{"$ref":"#/definitions/Customer"}}}`
)

// registryEnv is a configuration that reads DEDUP_KEY from the registry
// at url, with extra on top.
func registryEnv(t *testing.T, url, dedupKey string, extra testkit.Env) testkit.Env {
	env := testkit.Env{
		"KAFKA_BROKERS":       "",
		"DATA_DIR":            t.TempDir(),
		"DEDUP_KEY":           dedupKey,
		"SCHEMA_REGISTRY_URL": url,
	}
	maps.Copy(env, extra)
	return env
}

// runRegistryCheck runs the registry check alone with env's configuration
// and returns its lines and the checks that failed.
func runRegistryCheck(t *testing.T, env testkit.Env, timeout time.Duration) (string, []string) {
	t.Helper()
	cfg, err := config.Load(env.Lookup)
	if err != nil {
		t.Fatalf("load configuration: %v", err)
	}
	var out bytes.Buffer
	c := &checker{cfg: &cfg, lookup: env.Lookup, log: slog.New(slog.DiscardHandler), out: &out, timeout: timeout}
	c.checkRegistry(context.Background())
	return out.String(), c.failed
}

// line is the line of check name in out, or "".
func line(out, name string) string {
	for _, l := range strings.Split(out, "\n") {
		if len(l) > 6 && strings.HasPrefix(l[6:], name+" ") {
			return l
		}
	}
	return ""
}

// wantLine fails the test unless check name printed status and every one
// of wants.
func wantLine(t *testing.T, out, status, name string, wants ...string) {
	t.Helper()
	l := line(out, name)
	if !strings.HasPrefix(l, status+" ") {
		t.Errorf("check %q: line %q, want status %s; output:\n%s", name, l, status, out)
		return
	}
	for _, w := range wants {
		if !strings.Contains(l, w) {
			t.Errorf("check %q: line lacks %q:\n%s", name, w, l)
		}
	}
}

func register(reg *registrytest.Server, subject, text string, typ sr.SchemaType) string {
	return strconv.Itoa(reg.Register(subject, sr.Schema{Schema: text, Type: typ}))
}

// TestRegistryCheckScalarPath: for each format, a subject whose latest
// schema has the key's path as a scalar passes, naming the subject, the
// schema id and format, and the path; the registry is asked under the
// default subject <INPUT_TOPIC>-value.
func TestRegistryCheckScalarPath(t *testing.T) {
	for _, c := range []struct {
		prefix, text, format string
		typ                  sr.SchemaType
	}{
		{"avro:", avroOrder, "AVRO", sr.TypeAvro},
		{"protobuf:", protoOrder, "PROTOBUF", sr.TypeProtobuf},
		{"jsonschema:", jsonOrder, "JSON", sr.TypeJSON},
	} {
		t.Run(c.format, func(t *testing.T) {
			reg := registrytest.New()
			defer reg.Close()
			reg.Register("orders-value", sr.Schema{Schema: `{"type":"string"}`}) // another subject's id first
			id := register(reg, "orders-value", c.text, c.typ)
			for _, path := range []string{"id", "customer.id"} {
				env := registryEnv(t, reg.URL(), c.prefix+path, testkit.Env{"INPUT_TOPIC": "orders"})
				out, failed := runRegistryCheck(t, env, 5*time.Second)
				if len(failed) > 0 {
					t.Fatalf("%s: failed %q:\n%s", path, failed, out)
				}
				wantLine(t, out, "ok", "schema registry", "subject orders-value", "latest schema id "+id, c.format, reg.URL())
				wantLine(t, out, "ok", "key "+c.prefix+path, path+" is a scalar", "schema id "+id, "orders-value")
			}
		})
	}
}

// TestRegistryCheckComposite: each schema-framed part of a composite key
// gets a line of its own; the other parts none. A part whose path is not
// in the schema fails alone, named in the failed checks.
func TestRegistryCheckComposite(t *testing.T) {
	reg := registrytest.New()
	defer reg.Close()
	id := register(reg, "events-value", avroOrder, sr.TypeAvro)

	out, failed := runRegistryCheck(t, registryEnv(t, reg.URL(), "header:tenant,avro:id,key,avro:customer.id", nil), 5*time.Second)
	if len(failed) > 0 {
		t.Fatalf("failed %q:\n%s", failed, out)
	}
	wantLine(t, out, "ok", "schema registry", "latest schema id "+id)
	wantLine(t, out, "ok", "key avro:id", "id is a scalar")
	wantLine(t, out, "ok", "key avro:customer.id", "customer.id is a scalar")
	if n := strings.Count(out, "\n"); n != 3 {
		t.Errorf("%d lines, want 3 (the registry and two parts):\n%s", n, out)
	}

	out, failed = runRegistryCheck(t, registryEnv(t, reg.URL(), "header:tenant,avro:id,avro:customer.ref", nil), 5*time.Second)
	wantLine(t, out, "ok", "key avro:id")
	wantLine(t, out, "FAIL", "key avro:customer.ref", "customer.ref: no such field")
	if want := []string{"key avro:customer.ref"}; strings.Join(failed, ";") != strings.Join(want, ";") {
		t.Errorf("failed %q, want %q", failed, want)
	}
}

// TestRegistryCheckPathFails: a path the latest schema lacks, or that
// holds a record (message, object), fails naming the path, the subject
// and the schema id, in each format.
func TestRegistryCheckPathFails(t *testing.T) {
	for _, c := range []struct {
		name, text, spec string
		typ              sr.SchemaType
		wants            []string
	}{
		{"avro missing", avroOrder, "avro:order_id", sr.TypeAvro, []string{"order_id: no such field", "missing_field"}},
		{"avro nested missing", avroOrder, "avro:customer.name", sr.TypeAvro, []string{"customer.name: no such field"}},
		{"avro record", avroOrder, "avro:customer", sr.TypeAvro, []string{"customer is not a scalar", "a record, an array or a map", "not_scalar"}},
		{"protobuf missing", protoOrder, "protobuf:order_id", sr.TypeProtobuf, []string{"order_id: no such field", "in the first message of", "PROTOBUF"}},
		{"protobuf message", protoOrder, "protobuf:customer", sr.TypeProtobuf, []string{"customer is not a scalar", "a message"}},
		{"jsonschema missing", jsonOrder, "jsonschema:customer.name", sr.TypeJSON, []string{"customer.name: no such field", "JSON"}},
		{"jsonschema object", jsonOrder, "jsonschema:customer", sr.TypeJSON, []string{"customer is not a scalar", "an object or an array"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg := registrytest.New()
			defer reg.Close()
			id := register(reg, "events-value", c.text, c.typ)
			out, failed := runRegistryCheck(t, registryEnv(t, reg.URL(), c.spec, nil), 5*time.Second)
			wantLine(t, out, "ok", "schema registry")
			wantLine(t, out, "FAIL", "key "+c.spec, append(c.wants, "schema id "+id, "subject events-value")...)
			if len(failed) != 1 || failed[0] != "key "+c.spec {
				t.Errorf("failed %q, want the part alone", failed)
			}
		})
	}
}

// TestRegistryCheckLatestVersion: the latest version decides: a path
// removed by the newest version fails, though older versions have it.
func TestRegistryCheckLatestVersion(t *testing.T) {
	reg := registrytest.New()
	defer reg.Close()
	register(reg, "events-value", avroOrder, sr.TypeAvro)
	env := registryEnv(t, reg.URL(), "avro:note", nil)
	if out, failed := runRegistryCheck(t, env, 5*time.Second); len(failed) > 0 {
		t.Fatalf("first version: failed %q:\n%s", failed, out)
	}
	v2 := register(reg, "events-value", `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"}]}`, sr.TypeAvro)
	out, _ := runRegistryCheck(t, env, 5*time.Second)
	wantLine(t, out, "ok", "schema registry", "latest schema id "+v2)
	wantLine(t, out, "FAIL", "key avro:note", "schema id "+v2)
}

// TestRegistryCheckOtherFormat: a subject holding another format than the
// part reads fails, naming both formats and the prefix that reads the
// subject's.
func TestRegistryCheckOtherFormat(t *testing.T) {
	reg := registrytest.New()
	defer reg.Close()
	id := register(reg, "events-value", protoOrder, sr.TypeProtobuf)
	out, failed := runRegistryCheck(t, registryEnv(t, reg.URL(), "avro:id", nil), 5*time.Second)
	wantLine(t, out, "ok", "schema registry", "PROTOBUF")
	wantLine(t, out, "FAIL", "key avro:id", "holds a PROTOBUF schema (id "+id+"), not AVRO", "undecodable", "protobuf:id")
	if len(failed) != 1 {
		t.Errorf("failed %q", failed)
	}
}

// TestRegistryCheckUnknownSubject: a subject the registry does not have
// fails naming it and SCHEMA_REGISTRY_SUBJECT; setting that to the
// subject the producers use passes.
func TestRegistryCheckUnknownSubject(t *testing.T) {
	reg := registrytest.New()
	defer reg.Close()
	register(reg, "shop.Order", avroOrder, sr.TypeAvro) // RecordNameStrategy
	out, failed := runRegistryCheck(t, registryEnv(t, reg.URL(), "avro:id", nil), 5*time.Second)
	wantLine(t, out, "FAIL", "schema registry", `subject "events-value" not found`, "SCHEMA_REGISTRY_SUBJECT", reg.URL())
	if len(failed) != 1 || line(out, "key avro:id") != "" {
		t.Errorf("failed %q; want the registry line alone:\n%s", failed, out)
	}

	out, failed = runRegistryCheck(t, registryEnv(t, reg.URL(), "avro:id", testkit.Env{"SCHEMA_REGISTRY_SUBJECT": "shop.Order"}), 5*time.Second)
	if len(failed) > 0 {
		t.Fatalf("SCHEMA_REGISTRY_SUBJECT=shop.Order: failed %q:\n%s", failed, out)
	}
	wantLine(t, out, "ok", "schema registry", "subject shop.Order")
}

// TestRegistryCheckUnresolvableReference: a latest schema whose reference
// the registry no longer has fails, saying its records would be unkeyed.
func TestRegistryCheckUnresolvableReference(t *testing.T) {
	reg := registrytest.New()
	defer reg.Close()
	reg.Register("shop.Customer", sr.Schema{Schema: `{"type":"record","name":"Customer","namespace":"shop","fields":[{"name":"id","type":"long"}]}`})
	reg.Register("events-value", sr.Schema{
		Schema:     `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"customer","type":"shop.Customer"}]}`,
		References: []sr.SchemaReference{{Name: "shop.Customer", Subject: "shop.Customer", Version: 1}},
	})
	env := registryEnv(t, reg.URL(), "avro:customer.id", nil)
	if out, failed := runRegistryCheck(t, env, 5*time.Second); len(failed) > 0 {
		t.Fatalf("with its reference: failed %q:\n%s", failed, out)
	}
	reg.DeleteSubject("shop.Customer")
	out, _ := runRegistryCheck(t, env, 5*time.Second)
	wantLine(t, out, "FAIL", "schema registry", "reference the registry cannot resolve", "unknown_schema", `"shop.Customer"`)
}

// TestRegistryCheckCredentials: a registry that requires basic auth fails
// the check without credentials and with wrong ones, naming the two
// variables and never the password; the right ones pass.
func TestRegistryCheckCredentials(t *testing.T) {
	const user, pass = "dedup", "pw-Never-Printed"
	reg := registrytest.New()
	defer reg.Close()
	register(reg, "events-value", avroOrder, sr.TypeAvro)
	reg.SetAuth(user, pass)
	for _, c := range []struct {
		name  string
		creds testkit.Env
		want  string
	}{
		{"none", nil, "requires credentials"},
		{"wrong password", testkit.Env{"SCHEMA_REGISTRY_USERNAME": user, "SCHEMA_REGISTRY_PASSWORD": "pw-Wrong-Never-Printed"}, `refused the credentials of SCHEMA_REGISTRY_USERNAME "dedup"`},
	} {
		out, failed := runRegistryCheck(t, registryEnv(t, reg.URL(), "avro:id", c.creds), 5*time.Second)
		wantLine(t, out, "FAIL", "schema registry", c.want, "SCHEMA_REGISTRY_USERNAME and SCHEMA_REGISTRY_PASSWORD", "401")
		if strings.Contains(out, "Never-Printed") {
			t.Errorf("%s: a password is printed:\n%s", c.name, out)
		}
		if len(failed) != 1 {
			t.Errorf("%s: failed %q", c.name, failed)
		}
	}
	out, failed := runRegistryCheck(t, registryEnv(t, reg.URL(), "avro:id",
		testkit.Env{"SCHEMA_REGISTRY_USERNAME": user, "SCHEMA_REGISTRY_PASSWORD": pass}), 5*time.Second)
	if len(failed) > 0 {
		t.Fatalf("right credentials: failed %q:\n%s", failed, out)
	}
	if strings.Contains(out, pass) {
		t.Errorf("the password is printed:\n%s", out)
	}
}

// TestRegistryCheckDown: a registry that refuses connections fails the
// check naming every URL tried; a hanging one fails within --timeout; with
// several URLs one that answers is enough.
func TestRegistryCheckDown(t *testing.T) {
	reg := registrytest.New()
	defer reg.Close()
	other := registrytest.New()
	defer other.Close()
	register(reg, "events-value", avroOrder, sr.TypeAvro)
	register(other, "events-value", avroOrder, sr.TypeAvro)
	urls := reg.URL() + "," + other.URL()

	reg.SetDown(registrytest.Stopped)
	other.SetDown(registrytest.Stopped)
	out, failed := runRegistryCheck(t, registryEnv(t, urls, "avro:id", nil), 5*time.Second)
	wantLine(t, out, "FAIL", "schema registry", "unreachable", "SCHEMA_REGISTRY_URL="+urls, reg.URL()+": GET", other.URL()+": GET")
	if len(failed) != 1 || line(out, "key avro:id") != "" {
		t.Errorf("failed %q; want the registry line alone:\n%s", failed, out)
	}

	other.SetDown(registrytest.Up)
	out, failed = runRegistryCheck(t, registryEnv(t, urls, "avro:id", nil), 5*time.Second)
	if len(failed) > 0 {
		t.Fatalf("second URL up: failed %q:\n%s", failed, out)
	}
	wantLine(t, out, "ok", "key avro:id")

	reg.SetDown(registrytest.Hang)
	start := time.Now()
	out, _ = runRegistryCheck(t, registryEnv(t, reg.URL(), "avro:id", nil), 300*time.Millisecond)
	wantLine(t, out, "FAIL", "schema registry", "no answer from SCHEMA_REGISTRY_URL="+reg.URL()+" within 300ms")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a hanging registry took %v, want about --timeout", d)
	}
}

// TestRegistryCheckTLS: an https registry is reached with the stage's TLS
// settings: its test certificate is refused by default and accepted with
// SCHEMA_REGISTRY_TLS_INSECURE_SKIP_VERIFY.
func TestRegistryCheckTLS(t *testing.T) {
	reg := registrytest.NewTLS()
	defer reg.Close()
	register(reg, "events-value", avroOrder, sr.TypeAvro)
	out, _ := runRegistryCheck(t, registryEnv(t, reg.URL(), "avro:id", nil), 5*time.Second)
	wantLine(t, out, "FAIL", "schema registry", "unreachable", "certificate")
	out, failed := runRegistryCheck(t, registryEnv(t, reg.URL(), "avro:id",
		testkit.Env{"SCHEMA_REGISTRY_TLS_INSECURE_SKIP_VERIFY": "true"}), 5*time.Second)
	if len(failed) > 0 {
		t.Fatalf("insecure skip verify: failed %q:\n%s", failed, out)
	}
}

// TestRegistryCheckOnlySchemaKeys: a DEDUP_KEY that reads no schema-framed
// value checks no registry, even with SCHEMA_REGISTRY_URL set.
func TestRegistryCheckOnlySchemaKeys(t *testing.T) {
	reg := registrytest.New()
	defer reg.Close()
	out, failed := runRegistryCheck(t, registryEnv(t, reg.URL(), "header:tenant,json:id", nil), 5*time.Second)
	if out != "" || len(failed) > 0 || reg.Requests("/") != 0 {
		t.Errorf("output %q, failed %q, %d request(s) to the registry; want none", out, failed, reg.Requests("/"))
	}
}
