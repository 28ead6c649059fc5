package main

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"dedup/internal/testkit"
)

// benchOnly are the import-path prefixes of packages only the benchmarks
// need: the harness, its contenders' filter libraries and the plotting code.
var benchOnly = []string{
	"dedup/bench",
	"gonum.org/",
	"github.com/tylertreat/BoomFilters",
	"github.com/seiflotfy/cuckoofilter",
}

// serviceMayUse are packages under a benchOnly prefix that the service
// binary may link: the workload generator is standard library only and
// `dedup demo` draws its keyed records from it.
var serviceMayUse = []string{"dedup/bench/workload"}

// kgo is franz-go's client. The benchmarks' harness produces with it; the
// service binary links it only because kfake (the embedded broker) does.
const kgo = "github.com/twmb/franz-go/pkg/kgo"

// TestServiceBinaryLinksNoBenchmarkTooling lists the packages the service
// binary links (`go list -deps ./cmd/dedup`) and fails on any that only the
// benchmarks use, and on any project package that imports franz-go's client.
func TestServiceBinaryLinksNoBenchmarkTooling(t *testing.T) {
	out, err := exec.Command(testkit.GoTool(), "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "dedup/cmd/dedup").Output()
	if err != nil {
		t.Fatalf("go list -deps dedup/cmd/dedup: %v", err)
	}
	deps := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			deps[f[0]] = f[1:]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if _, ok := deps["dedup/processor"]; !ok {
		t.Fatalf("go list -deps dedup/cmd/dedup lists no dedup/processor; output:\n%s", out)
	}
	for pkg, imports := range deps {
		for _, prefix := range benchOnly {
			under := pkg == prefix || strings.HasPrefix(pkg, strings.TrimSuffix(prefix, "/")+"/")
			if under && !slices.Contains(serviceMayUse, pkg) {
				t.Errorf("the service binary links %s, which only the benchmarks need", pkg)
			}
		}
		if strings.HasPrefix(pkg, "dedup/") && slices.Contains(imports, kgo) {
			t.Errorf("%s imports %s: the service's own Kafka client is kafka-go", pkg, kgo)
		}
	}
}

// TestBenchOnlyPackagesAreFoundByTheCheck makes sure the check above would
// see the benchmark tooling: this command itself links it.
func TestBenchOnlyPackagesAreFoundByTheCheck(t *testing.T) {
	out, err := exec.Command(testkit.GoTool(), "list", "-deps", "dedup/cmd/dedup-bench").Output()
	if err != nil {
		t.Fatalf("go list -deps dedup/cmd/dedup-bench: %v", err)
	}
	for _, want := range []string{"dedup/bench", "gonum.org/v1/plot", "github.com/tylertreat/BoomFilters", "github.com/seiflotfy/cuckoofilter", kgo} {
		if !slices.Contains(strings.Fields(string(out)), want) {
			t.Errorf("dedup-bench does not link %s; the service-binary check's list is stale", want)
		}
	}
}
