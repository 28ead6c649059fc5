package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestHelpListsSubcommandsAndVariables(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, envMap{}.lookup, &stdout, &stderr); code != exitOK {
			t.Fatalf("%q: exit %d, want 0", args, code)
		}
		out := stdout.String()
		for _, sub := range []string{"dedup [run]", "dedup demo", "--generate-only", "dedup inspect", "dedup size", "dedup healthcheck", "dedup help"} {
			if !strings.Contains(out, sub) {
				t.Errorf("%q: usage lacks %q", args, sub)
			}
		}
		for _, name := range ConfigVarNames() {
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
		if code := run(context.Background(), args, envMap{}.lookup, &stdout, &stderr); code != exitOK {
			t.Errorf("%q: exit %d, want 0; stderr: %s", args, code, stderr.String())
		}
		if stdout.Len()+stderr.Len() == 0 {
			t.Errorf("%q printed nothing", args)
		}
	}
}
