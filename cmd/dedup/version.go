package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is set at link time by the image build (-X main.version=...);
// empty, the module version recorded by the Go toolchain is used.
var version string

// buildInfo is what `dedup version` reports, and the labels of
// dedup_build_info (newRegistry).
type buildInfo struct {
	Version   string // module version, "(devel)" for a build from a work tree
	Commit    string // VCS revision, with "+dirty" when the tree had changes; "unknown" without VCS data
	GoVersion string
}

// readBuildInfo reads the build's module and VCS stamps.
func readBuildInfo() buildInfo {
	b := buildInfo{Version: "(devel)", Commit: "unknown", GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" {
			b.Version = v
		}
		var dirty bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && b.Commit != "unknown" {
			b.Commit += "+dirty"
		}
	}
	if version != "" {
		b.Version = version
	}
	return b
}

// runVersion is `dedup version` (also --version, -v).
func runVersion(args []string, stdout, stderr io.Writer) int {
	if code, ok := noArgs("version", args, stdout, stderr); !ok {
		return code
	}
	b := readBuildInfo()
	fmt.Fprintf(stdout, "dedup %s (commit %s, %s)\n", b.Version, b.Commit, b.GoVersion)
	return exitOK
}
