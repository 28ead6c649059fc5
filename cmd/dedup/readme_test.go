package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"dedup/internal/testkit"
)

// The README's exit-code table and quick start, held to what the binary
// does. The configuration table is checked by TestREADMEConfigurationTable.

// readmeSection returns the body of the README's "## title" section.
func readmeSection(t *testing.T, title string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## "+title+"\n")
	if !ok {
		t.Fatalf("README.md has no '## %s' section", title)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	return section
}

// fencedBlocks returns the lines of each fenced code block of md, in order.
func fencedBlocks(md string) [][]string {
	var blocks [][]string
	var cur []string
	in := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "```") {
			if in {
				blocks = append(blocks, cur)
				cur = nil
			}
			in = !in
			continue
		}
		if in {
			cur = append(cur, line)
		}
	}
	return blocks
}

// testFuncs returns the names of the Test functions of this package.
func testFuncs(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") {
				names = append(names, fn.Name.Name)
			}
		}
	}
	return names
}

// TestREADMEExitCodes holds the exit-code table to the binary's constants
// and runs the binary (this test binary re-executed as dedup, a real
// process with a real exit status) for the quick exit-2 cases. The slower
// cases are the tests named in the table below, which must exist.
func TestREADMEExitCodes(t *testing.T) {
	section := readmeSection(t, "Exit codes")
	row := regexp.MustCompile(`^\| (\d+) \| (.+) \|$`)
	var codes []int
	meanings := map[int]string{}
	for _, line := range strings.Split(section, "\n") {
		m := row.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		code, err := strconv.Atoi(m[1])
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, code)
		meanings[code] = m[2]
	}
	if want := []int{0, 1, 2}; !slices.Equal(codes, want) {
		t.Fatalf("README's exit-code rows are %v, want exactly %v", codes, want)
	}

	have := testFuncs(t)
	for _, c := range []struct {
		code    int
		meaning string   // how the README's row begins
		cases   []string // what the row promises, each exercised by tests
		tests   []string
	}{
		{exitOK, "ok", []string{"SIGTERM during start-up", "SIGTERM while running", "Ctrl-C on go run"},
			[]string{"TestStartupSignalExits0", "TestStopBuiltBinaryWithSIGTERM", "TestStopGoRunWithCtrlC"}},
		{exitFailure, "runtime failure", []string{"no broker within KAFKA_STARTUP_TIMEOUT", "credentials or certificate refused", "a failed dedup check"},
			[]string{"TestStartupGivesUp", "TestStartupPermanentErrors", "TestSASLWrongPasswordFails", "TestCheckUnreachableBroker", "TestCheckListsEveryFailure"}},
		{exitConfig, "configuration error", []string{"every bad variable by name", "unknown subcommand", "bad flags"},
			[]string{"TestRunConfigErrorExits2BeforeKafka", "TestRunUnknownSubcommandExits2", "TestRunRefusesBeforeStarting"}},
	} {
		got, ok := meanings[c.code]
		if !ok {
			t.Errorf("README has no row for exit code %d (%s)", c.code, c.meaning)
			continue
		}
		if !strings.HasPrefix(got, c.meaning) {
			t.Errorf("README: exit code %d means %q, the binary uses it for %q", c.code, got, c.meaning)
		}
		for _, name := range c.tests {
			if !slices.Contains(have, name) {
				t.Errorf("exit code %d (%s): test %s, which exercises it, is gone", c.code, strings.Join(c.cases, ", "), name)
			}
		}
	}

	t.Run("configuration error as shown", func(t *testing.T) {
		// The README's example: the command's variables in, exactly the
		// shown lines out on stderr, exit 2.
		block := fencedBlocks(section)
		if len(block) == 0 || len(block[0]) < 2 || !strings.HasPrefix(block[0][0], "$ ") {
			t.Fatalf("the exit-code section's first block is not a '$ command' and its output: %q", block)
		}
		fields := strings.Fields(strings.TrimPrefix(block[0][0], "$ "))
		env := testkit.Env{}
		for len(fields) > 0 && strings.Contains(fields[0], "=") {
			k, v, _ := strings.Cut(fields[0], "=")
			env[k] = v
			fields = fields[1:]
		}
		if strings.Join(fields, " ") != "go run ./cmd/dedup" {
			t.Fatalf("the example runs %q, want go run ./cmd/dedup", strings.Join(fields, " "))
		}
		bin := startBinary(t, env)
		if code := bin.waitExit(t, 30*time.Second); code != exitConfig {
			t.Fatalf("exit %d, want %d", code, exitConfig)
		}
		// Line by line: the same heading, the same variables in the same
		// order, the same closing hint. A problem's wording is checked by
		// TestConfigBadValueNamesVariable, not here.
		got := strings.Split(strings.TrimSuffix(bin.stderr.String(), "\n"), "\n")
		want := block[0][1:]
		if len(got) != len(want) {
			t.Fatalf("stderr has %d lines, the README shows %d:\n%s", len(got), len(want), bin.stderr)
		}
		for i := range want {
			g, w := got[i], want[i]
			if strings.HasPrefix(w, "  ") {
				g, _, _ = strings.Cut(g, ":")
				w, _, _ = strings.Cut(w, ":")
			}
			if g != w {
				t.Errorf("stderr line %d is %q, the README shows %q", i+1, got[i], want[i])
			}
		}
	})
	for _, args := range [][]string{{"frobnicate"}, {"version", "--bogus"}, {"size", "--no-such-flag"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			bin := startBinary(t, testkit.Env{}, args...)
			if code := bin.waitExit(t, 30*time.Second); code != exitConfig {
				t.Fatalf("exit %d, want %d", code, exitConfig)
			}
		})
	}
}

// TestREADMEQuickStart holds the quick start to the repository: its first
// block is the two commands, CI runs the same test command, and the stop
// instructions are the ones cmd/dedup/stop_test.go carries out
// (TestStopGoRunWithCtrlC, TestStopBuiltBinaryWithSIGTERM).
func TestREADMEQuickStart(t *testing.T) {
	const runCmd, testCmd = "go run ./cmd/dedup", ".ci/gotest -race ./..."
	section := readmeSection(t, "Quick start")
	blocks := fencedBlocks(section)
	if len(blocks) == 0 {
		t.Fatal("the quick start has no code block")
	}
	var cmds []string
	for _, line := range blocks[0] {
		cmd, _, _ := strings.Cut(line, "#")
		if cmd = strings.TrimSpace(cmd); cmd != "" {
			cmds = append(cmds, cmd)
		}
	}
	if want := []string{runCmd, testCmd}; !slices.Equal(cmds, want) {
		t.Errorf("the quick start's first block runs %q, want %q", cmds, want)
	}

	ci, err := os.ReadFile(filepath.Join("..", "..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Split(string(ci), "\n"), testCmd) {
		t.Errorf(".ci/run does not run %q, the quick start's test command", testCmd)
	}
	if fi, err := os.Stat(filepath.Join("..", "..", ".ci", "gotest")); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf(".ci/gotest is not an executable file: %v", err)
	}

	// Outside the code blocks: how to stop it, as stop_test.go does.
	var prose strings.Builder
	in := false
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "```") {
			in = !in
			continue
		}
		if !in {
			prose.WriteString(line + "\n")
		}
	}
	for _, want := range []string{"Ctrl-C", "go build -o dedup ./cmd/dedup", "kill -TERM"} {
		if !strings.Contains(prose.String(), want) {
			t.Errorf("the quick start's stop instructions do not mention %q", want)
		}
	}
}
