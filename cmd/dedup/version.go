package main

import (
	"fmt"
	"io"

	"dedup/internal/buildinfo"
)

// commit is set at link time (-X main.commit=...) by builds that carry no
// VCS stamp of their own: the image build, or go build -buildvcs=false.
// The version is never set here: it is internal/buildinfo's VERSION.
var commit string

// runVersion is `dedup version` (also --version, -v): one line,
// "dedup <version> (commit <commit>, <go version>)".
func runVersion(args []string, stdout, stderr io.Writer) int {
	if code, ok := noArgs("version", args, stdout, stderr); !ok {
		return code
	}
	b := buildinfo.Read(commit)
	fmt.Fprintf(stdout, "dedup %s (commit %s, %s)\n", b.Version, b.Commit, b.GoVersion)
	return exitOK
}
