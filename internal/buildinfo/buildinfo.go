// Package buildinfo says what a binary is, for `dedup version` and the
// dedup_build_info metric: the stage's semantic version, set in one place
// (the VERSION file beside this one, embedded at compile time), and the
// commit and Go version it was built from.
package buildinfo

import (
	_ "embed"
	"runtime"
	"runtime/debug"
	"strings"
)

// versionFile is VERSION: a plain file, so that the image build and the
// release steps read the same line the binary embeds (docs/releases.md).
//
//go:embed VERSION
var versionFile string

// Version is the stage's semantic version (MAJOR.MINOR.PATCH, no "v").
var Version = strings.TrimSpace(versionFile)

// Info is what `dedup version` reports, and the labels of dedup_build_info.
type Info struct {
	Version   string // Version
	Commit    string // VCS revision, with "+dirty" when the tree had changes; "unknown" when the build recorded none
	GoVersion string
}

// Read reports this binary. The commit is the toolchain's VCS stamp (go
// build in a git work tree with VCS stamping on), else linkedCommit: set at
// link time (-X main.commit=...) by builds without the stamp, such as the
// image's, whose context has no .git.
func Read(linkedCommit string) Info {
	b := Info{Version: Version, Commit: "unknown", GoVersion: runtime.Version()}
	if linkedCommit != "" {
		b.Commit = linkedCommit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	revision, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if revision != "" {
		b.Commit = revision
		if dirty {
			b.Commit += "+dirty"
		}
	}
	return b
}
