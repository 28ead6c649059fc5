package main

import (
	"fmt"
	"io"

	"dedup/internal/buildinfo"
)

// version is set at link time by the image build (-X main.version=...);
// empty, the module version recorded by the Go toolchain is used.
var version string

// runVersion is `dedup version` (also --version, -v).
func runVersion(args []string, stdout, stderr io.Writer) int {
	if code, ok := noArgs("version", args, stdout, stderr); !ok {
		return code
	}
	b := buildinfo.Read(version)
	fmt.Fprintf(stdout, "dedup %s (commit %s, %s)\n", b.Version, b.Commit, b.GoVersion)
	return exitOK
}
