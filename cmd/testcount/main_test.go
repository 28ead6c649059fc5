package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSummarizeRealRun runs `go test -json` on a small module with passing,
// failing and skipped tests and subtests, and a package that does not
// build, and checks the totals and that the failures' output is shown.
func TestSummarizeRealRun(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example\n\ngo 1.22\n",
		"a/a_test.go": `package a

import "testing"

func TestPass(t *testing.T) {}
func TestSkip(t *testing.T) { t.Skip("not here") }
func TestFail(t *testing.T) { t.Log("the reason it failed"); t.Fail() }
func TestSubs(t *testing.T) {
	t.Run("one", func(t *testing.T) {})
	t.Run("two", func(t *testing.T) { t.Error("second subtest broke") })
	t.Run("three", func(t *testing.T) { t.Skip() })
}
`,
		"b/b_test.go": `package b

import "testing"

func TestPass(t *testing.T) { t.Log("quiet on success") }
`,
		"c/c_test.go": `package c

import "testing"

func TestBroken(t *testing.T) { undefined() }
`,
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-json", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.Output()
	if err == nil {
		t.Fatal("go test of failing tests succeeded")
	}
	var shown bytes.Buffer
	c, err := summarize(bytes.NewReader(out), &shown)
	if err != nil {
		t.Fatal(err)
	}
	// Passed: a.TestPass, a.TestSubs/one, b.TestPass. Failed: a.TestFail,
	// a.TestSubs/two, a.TestSubs (its subtest failed), the package c that
	// does not build. Skipped: a.TestSkip, a.TestSubs/three.
	if want := (counts{Passed: 3, Failed: 4, Skipped: 2}); c != want {
		t.Errorf("counts %v, want %v\n%s", c, want, shown.String())
	}
	if got := c.String(); got != "3 passed, 4 failed, 2 skipped" {
		t.Errorf("line %q", got)
	}
	for _, want := range []string{"the reason it failed", "second subtest broke", "--- FAIL: TestFail", "undefined: undefined", "ok  \texample/b",
		"skipped example/a TestSkip: a_test.go:6: not here", "skipped example/a TestSubs/three: no reason given"} {
		if !strings.Contains(shown.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, shown.String())
		}
	}
	for _, unwanted := range []string{"quiet on success", "=== RUN", "--- PASS"} {
		if strings.Contains(shown.String(), unwanted) {
			t.Errorf("output shows %q, which go test without -v does not:\n%s", unwanted, shown.String())
		}
	}
}

// TestCIScript runs .ci/gotest, the test step of .ci/run, on a passing and
// a failing module: it ends with the total line and its exit status says
// whether anything failed.
func TestCIScript(t *testing.T) {
	script, err := filepath.Abs(filepath.Join("..", "..", ".ci", "gotest"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, test, last string
		fails            bool
	}{
		{"passing", "func TestOK(t *testing.T) {}\nfunc TestSkip(t *testing.T) { t.Skip() }\n", "1 passed, 0 failed, 1 skipped", false},
		{"failing", "func TestOK(t *testing.T) {}\nfunc TestBad(t *testing.T) { t.Fatal(\"bad\") }\n", "1 passed, 1 failed, 0 skipped", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example\n\ngo 1.22\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "x_test.go"), []byte("package x\n\nimport \"testing\"\n\n"+c.test), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(script, "./...")
			cmd.Dir = dir
			// .ci/run sets E2E_EXTERNAL_SUBSET for the repository's own
			// run; the sample module has no e2e tests.
			cmd.Env = append(os.Environ(), "GOWORK=off", "E2E_EXTERNAL_SUBSET=")
			out, err := cmd.Output()
			if (err != nil) != c.fails {
				t.Errorf("exit error %v, want failure %v\n%s", err, c.fails, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if got := lines[len(lines)-1]; got != c.last {
				t.Errorf("last line %q, want %q\n%s", got, c.last, out)
			}
		})
	}
}
