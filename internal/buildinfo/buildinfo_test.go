package buildinfo

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// semver is semver.org 2.0.0's grammar, without a leading "v".
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(-(0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*)?` +
	`(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

func TestVersionIsSemantic(t *testing.T) {
	if !semver.MatchString(Version) {
		t.Errorf("VERSION holds %q, not a semantic version (MAJOR.MINOR.PATCH)", Version)
	}
	if versionFile != Version+"\n" {
		t.Errorf("VERSION is %q: want the version on one line, nothing else", versionFile)
	}
}

// TestChangelogHasTheVersion: CHANGELOG.md keeps an Unreleased section on
// top and has a dated section for the version the binary reports, so a
// release is never cut without its entry.
func TestChangelogHasTheVersion(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	var sections []string
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "## ") {
			sections = append(sections, line)
		}
	}
	if len(sections) == 0 || sections[0] != "## [Unreleased]" {
		t.Errorf("CHANGELOG.md's first section is %q, want ## [Unreleased]", sections)
	}
	dated := regexp.MustCompile(`^## \[` + regexp.QuoteMeta(Version) + `\] - \d{4}-\d{2}-\d{2}$`)
	found := false
	for _, s := range sections {
		found = found || dated.MatchString(s)
	}
	if !found {
		t.Errorf("CHANGELOG.md has no section \"## [%s] - YYYY-MM-DD\" for VERSION", Version)
	}
}

// TestReadCommit: without a VCS stamp (a test binary never has one) the
// commit is the one linked in, else "unknown"; the version is VERSION's.
func TestReadCommit(t *testing.T) {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				t.Skipf("this test binary carries a VCS stamp (%s)", s.Value)
			}
		}
	}
	for linked, want := range map[string]string{"": "unknown", "0123abc": "0123abc"} {
		got := Read(linked)
		if got != (Info{Version: Version, Commit: want, GoVersion: runtime.Version()}) {
			t.Errorf("Read(%q) = %+v, want version %s, commit %s", linked, got, Version, want)
		}
	}
}
