package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"dedup/internal/testkit"
	"dedup/registry/registrytest"
)

// TestCheckSchemaRegistry: with a schema-framed DEDUP_KEY, check reads the
// latest schema of <INPUT_TOPIC>-value and reports the registry and each
// schema-framed part beside the other checks: exit 0 when the paths are
// scalars; exit 1, the failed check named on the last line, when a path is
// missing or the registry is down.
func TestCheckSchemaRegistry(t *testing.T) {
	cluster := testkit.Cluster(t, 2)
	reg := registrytest.New()
	defer reg.Close()
	reg.Register("events-value", sr.Schema{Schema: `{"type":"record","name":"Order","fields":[
	  {"name":"id","type":"string"},{"name":"customer","type":{"type":"record","name":"Customer","fields":[{"name":"id","type":"long"}]}}]}`})
	check := func(dedupKey string) (string, int) {
		t.Helper()
		env := clusterEnv(t, cluster, testkit.Env{"DEDUP_KEY": dedupKey, "SCHEMA_REGISTRY_URL": reg.URL()})
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"check", "--timeout", "5s"}, env.Lookup, &stdout, &stderr)
		return stdout.String(), code
	}

	out, code := check("header:tenant,avro:customer.id")
	if code != exitOK {
		t.Fatalf("exit %d, want 0:\n%s", code, out)
	}
	wantCheck(t, out, "ok", "schema registry")
	wantCheck(t, out, "ok", "key avro:customer.id")
	wantCheck(t, out, "ok", "input topic")
	if !strings.HasPrefix(lastLine(out), "dedup check: every check holds") {
		t.Errorf("verdict %q", lastLine(out))
	}

	out, code = check("avro:customer")
	if code != exitFailure {
		t.Fatalf("a record at the path: exit %d, want 1:\n%s", code, out)
	}
	wantCheck(t, out, "FAIL", "key avro:customer")
	if want := "dedup check: 1 check(s) failed: key avro:customer"; lastLine(out) != want {
		t.Errorf("verdict %q, want %q", lastLine(out), want)
	}

	reg.SetDown(registrytest.Stopped)
	out, code = check("avro:id")
	if code != exitFailure {
		t.Fatalf("registry down: exit %d, want 1:\n%s", code, out)
	}
	wantCheck(t, out, "FAIL", "schema registry")
	wantCheck(t, out, "ok", "input topic") // the other checks still run
	if want := "dedup check: 1 check(s) failed: schema registry"; lastLine(out) != want {
		t.Errorf("verdict %q, want %q", lastLine(out), want)
	}
}
