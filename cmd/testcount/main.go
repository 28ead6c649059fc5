// Command testcount reads `go test -json` on stdin, prints what `go test`
// prints without -v (the ok/FAIL line of each package, and the output of
// each failed test, build errors included), then one line per skipped test
// naming it and the reason it gave, and ends with one line
// "N passed, N failed, N skipped" counting tests and subtests. It exits 1
// when anything failed, including a package that failed outside any test
// (a build error, a panic in TestMain, a timeout), which counts as one
// failed test. CI runs it:
//
//	go test -json -race ./... | go run ./cmd/testcount
//
// It is a tool of the repository, not of the service: nothing in
// cmd/dedup imports it.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output and build-fail events
}

// counts are the totals of one run.
type counts struct {
	Passed, Failed, Skipped int
}

func (c counts) String() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped", c.Passed, c.Failed, c.Skipped)
}

func main() {
	c, err := summarize(os.Stdin, os.Stdout)
	fmt.Println(c)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcount: %v\n", err)
		os.Exit(2)
	}
	if c.Failed > 0 {
		os.Exit(1)
	}
}

// summarize copies what a failure needs to w and counts the tests.
func summarize(r io.Reader, w io.Writer) (counts, error) {
	var c counts
	type key struct{ pkg, test string }
	buffered := map[key][]string{}  // output of a test still running
	failedTests := map[string]int{} // failed tests per package
	var skips []string              // "skipped pkg Test: reason", in order
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Not an event (go vet's or the toolchain's own words): pass it on.
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		k := key{e.Package, e.Test}
		switch {
		case e.Action == "build-output":
			fmt.Fprint(w, e.Output)
		case e.Action == "output" && e.Test != "":
			// "=== RUN" and its kin are what -v adds.
			if !strings.HasPrefix(e.Output, "=== ") {
				buffered[k] = append(buffered[k], e.Output)
			}
		case e.Action == "output":
			// Package-level: the ok/FAIL lines, panics outside tests. "PASS"
			// is what -v would show and go test without it does not.
			if e.Output != "PASS\n" && !strings.HasPrefix(e.Output, "=== ") {
				fmt.Fprint(w, e.Output)
			}
		case e.Action == "pass" && e.Test != "":
			c.Passed++
			delete(buffered, k)
		case e.Action == "skip" && e.Test != "":
			c.Skipped++
			skips = append(skips, fmt.Sprintf("skipped %s %s: %s", e.Package, e.Test, skipReason(buffered[k])))
			delete(buffered, k)
		case e.Action == "fail" && e.Test != "":
			c.Failed++
			failedTests[e.Package]++
			for _, out := range buffered[k] {
				fmt.Fprint(w, out)
			}
			delete(buffered, k)
		case e.Action == "fail":
			// The package failed; with no failed test, something else did.
			if failedTests[e.Package] == 0 {
				c.Failed++
			}
		}
	}
	for _, s := range skips {
		fmt.Fprintln(w, s)
	}
	return c, sc.Err()
}

var bareLocation = regexp.MustCompile(`^\S+\.go:\d+:$`)

// skipReason is what a skipped test logged (t.Skip's message, with its
// file and line), without go test's "--- SKIP" line.
func skipReason(out []string) string {
	var parts []string
	for _, line := range out {
		line = strings.TrimSpace(line)
		// t.Skip() without a message logs its bare "file.go:N:".
		if line == "" || strings.HasPrefix(line, "--- SKIP") || bareLocation.MatchString(line) {
			continue
		}
		parts = append(parts, line)
	}
	if len(parts) == 0 {
		return "no reason given"
	}
	return strings.Join(parts, " ")
}
