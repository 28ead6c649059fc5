package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"dedup/internal/config"
	"dedup/internal/testkit"
)

func TestHelpListsSubcommandsAndVariables(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, testkit.Env{}.Lookup, &stdout, &stderr); code != exitOK {
			t.Fatalf("%q: exit %d, want 0", args, code)
		}
		out := stdout.String()
		for _, sub := range []string{"dedup [run]", "dedup demo", "--generate-only", "dedup inspect", "dedup check", "dedup size", "dedup healthcheck", "dedup version", "dedup help"} {
			if !strings.Contains(out, sub) {
				t.Errorf("%q: usage lacks %q", args, sub)
			}
		}
		for _, name := range config.VarNames() {
			if !strings.Contains(out, "  "+name+" ") {
				t.Errorf("%q: usage lacks variable %s", args, name)
			}
		}
		for _, code := range []string{"0 ok", "1 runtime failure", "2 configuration error"} {
			if !strings.Contains(out, code) {
				t.Errorf("%q: usage lacks exit code %q", args, code)
			}
		}
	}
}

func TestSubcommandHelpExits0(t *testing.T) {
	for _, args := range [][]string{{"run", "-h"}, {"inspect", "--help"}, {"demo", "-h"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, testkit.Env{}.Lookup, &stdout, &stderr); code != exitOK {
			t.Errorf("%q: exit %d, want 0; stderr: %s", args, code, stderr.String())
		}
		if stdout.Len()+stderr.Len() == 0 {
			t.Errorf("%q printed nothing", args)
		}
	}
}

func TestUnknownSubcommandIsOneLine(t *testing.T) {
	for _, arg := range []string{"bogus", "--bogus", "-x"} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{arg}, testkit.Env{}.Lookup, &stdout, &stderr); code != exitConfig {
			t.Errorf("%s: exit %d, want %d", arg, code, exitConfig)
		}
		want := fmt.Sprintf("dedup: unknown subcommand %q; run 'dedup help' for the list\n", arg)
		if stderr.String() != want || stdout.Len() != 0 {
			t.Errorf("%s: stderr %q, stdout %q; want only %q", arg, stderr.String(), stdout.String(), want)
		}
	}
}

// TestREADMEConfigurationTable holds the README's configuration table to
// the config.Config struct: one row per variable, in the form
// "| `VAR` | meaning | `default` |", the default in backticks where the
// struct has an envDefault and a phrase where the default is computed.
func TestREADMEConfigurationTable(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## Configuration\n")
	if !ok {
		t.Fatal("README.md has no '## Configuration' section")
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	row := regexp.MustCompile("^\\| `([A-Z0-9_]+)` \\| (.+) \\| (.+) \\|$")
	rows := map[string]string{}
	var order []string
	for _, line := range strings.Split(section, "\n") {
		m := row.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		if _, dup := rows[m[1]]; dup {
			t.Errorf("README lists %s twice", m[1])
		}
		rows[m[1]] = m[3]
		order = append(order, m[1])
	}
	docs := config.Docs()
	for _, d := range docs {
		got, ok := rows[d.Name]
		if !ok {
			t.Errorf("README's configuration table lacks %s (paste the output of 'dedup help --markdown')", d.Name)
			continue
		}
		if d.Literal {
			if got != "`"+d.Default+"`" {
				t.Errorf("README: %s default %s, the struct has `%s`", d.Name, got, d.Default)
			}
			continue
		}
		if strings.ReplaceAll(got, "`", "") != strings.ReplaceAll(d.Default, "'", "") {
			t.Errorf("README: %s default %q, the struct says %q", d.Name, got, d.Default)
		}
	}
	names := config.VarNames()
	for _, name := range order {
		if !slices.Contains(names, name) {
			t.Errorf("README's configuration table lists %s, which config.Config does not read", name)
		}
	}
}

func TestHelpMarkdownIsTheTable(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"help", "--markdown"}, testkit.Env{}.Lookup, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 2+len(config.VarNames()) {
		t.Fatalf("%d lines for %d variables:\n%s", len(lines), len(config.VarNames()), stdout.String())
	}
	for i, d := range config.Docs() {
		if !strings.HasPrefix(lines[2+i], "| `"+d.Name+"` | "+d.Meaning+" | ") {
			t.Errorf("line %d: %q", 2+i, lines[2+i])
		}
	}
}

// TestEverySubcommandHasItsOwnHelp: `dedup SUB -h`, `dedup SUB --help` and
// `dedup help SUB` print the same text, exit 0, and that text is SUB's own:
// its synopsis, every flag it defines and the variables it reads; not the
// general usage.
func TestEverySubcommandHasItsOwnHelp(t *testing.T) {
	allVarNames := config.VarNames()
	for _, c := range commands() {
		t.Run(c.name, func(t *testing.T) {
			var texts []string
			for _, args := range [][]string{{c.name, "-h"}, {c.name, "--help"}, {"help", c.name}} {
				var stdout, stderr bytes.Buffer
				if code := run(context.Background(), args, testkit.Env{}.Lookup, &stdout, &stderr); code != exitOK {
					t.Fatalf("%q: exit %d, want 0; stderr: %s", args, code, stderr.String())
				}
				texts = append(texts, stdout.String())
			}
			out := texts[0]
			for i, other := range texts[1:] {
				if other != out {
					t.Errorf("help text %d differs from `dedup %s -h`:\n%s", i+1, c.name, other)
				}
			}
			if want := "Usage: dedup " + c.synopsis + "\n"; !strings.HasPrefix(out, want) {
				t.Errorf("usage starts %q, want %q", firstLine(out), want)
			}
			if strings.Contains(out, "Usage:\n  dedup [run]") {
				t.Error("prints the general usage, not its own")
			}
			if c.flags != nil {
				c.flags().VisitAll(func(f *flag.Flag) {
					if !strings.Contains(out, "-"+f.Name) {
						t.Errorf("usage lacks flag -%s", f.Name)
					}
				})
			}
			var want []string
			switch c.env {
			case allVars:
				want = allVarNames
			case someVars:
				want = c.vars
			}
			for _, name := range want {
				if !strings.Contains(out, "  "+name+" ") {
					t.Errorf("usage lacks variable %s", name)
				}
			}
			if c.env != allVars && strings.Contains(out, "  INPUT_TOPIC ") {
				t.Error("lists the whole configuration, though it reads less")
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"help", "bogus"}, testkit.Env{}.Lookup, &stdout, &stderr); code != exitConfig {
		t.Errorf("dedup help bogus: exit %d, want %d", code, exitConfig)
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
