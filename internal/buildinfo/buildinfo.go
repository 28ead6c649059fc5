// Package buildinfo reads what a binary was built from, for `dedup version`
// and the dedup_build_info metric.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Info is what `dedup version` reports, and the labels of dedup_build_info.
type Info struct {
	Version   string // module version, "(devel)" for a build from a work tree
	Commit    string // VCS revision, with "+dirty" when the tree had changes; "unknown" without VCS data
	GoVersion string
}

// Read reads the build's module and VCS stamps; linked, when set at link
// time (-X main.version=...), is the version instead of the module's.
func Read(linked string) Info {
	b := Info{Version: "(devel)", Commit: "unknown", GoVersion: runtime.Version()}
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
	if linked != "" {
		b.Version = linked
	}
	return b
}
