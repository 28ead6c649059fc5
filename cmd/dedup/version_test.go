package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"dedup/internal/buildinfo"
	"dedup/internal/testkit"
)

// versionLine is `dedup version`'s one line: version, commit, Go version.
var versionLine = regexp.MustCompile(`^dedup (\S+) \(commit (\S+), (go\S+)\)\n$`)

// parseVersion splits `dedup version`'s output, failing the test when it
// is not that one line.
func parseVersion(t *testing.T, out string) (version, commit, goVersion string) {
	t.Helper()
	m := versionLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("dedup version printed %q, want one line %q", out, "dedup <version> (commit <commit>, <go version>)")
	}
	return m[1], m[2], m[3]
}

func TestVersion(t *testing.T) {
	var outs []string
	for _, arg := range []string{"version", "--version", "-v"} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{arg}, testkit.Env{}.Lookup, &stdout, &stderr); code != exitOK {
			t.Fatalf("%s: exit %d: %s", arg, code, stderr.String())
		}
		outs = append(outs, stdout.String())
	}
	if outs[0] != outs[1] || outs[0] != outs[2] {
		t.Errorf("version, --version and -v differ: %q", outs)
	}
	version, commit, goVersion := parseVersion(t, outs[0])
	if version != buildinfo.Version || commit != buildinfo.Read("").Commit || goVersion != runtime.Version() {
		t.Errorf("version printed %q; want version %s, commit %s, %s", outs[0], buildinfo.Version, buildinfo.Read("").Commit, runtime.Version())
	}
}

// buildWith builds cmd/dedup with the go build flags given and returns the
// binary's path.
func buildWith(t *testing.T, flags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dedup")
	cmd := exec.Command(testkit.GoTool(), append(append([]string{"build"}, flags...), "-o", bin, "dedup/cmd/dedup")...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build %s: %v", strings.Join(flags, " "), err)
	}
	return bin
}

// stamps is what the toolchain recorded in bin (`go version -m`): its Go
// version and VCS revision ("" without one).
func stamps(t *testing.T, bin string) (goVersion, revision string) {
	t.Helper()
	out, err := exec.Command(testkit.GoTool(), "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	goVersion = strings.Fields(strings.SplitN(string(out), "\n", 2)[0])[1]
	if m := regexp.MustCompile(`(?m)^\s+build\s+vcs\.revision=(\S+)$`).FindSubmatch(out); m != nil {
		revision = string(m[1])
	}
	return goVersion, revision
}

// runBuiltVersion runs bin version and checks the version and the Go
// version; it returns the commit printed.
func runBuiltVersion(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	version, commit, goVersion := parseVersion(t, string(out))
	if version != buildinfo.Version {
		t.Errorf("built binary reports version %s, want %s (internal/buildinfo/VERSION)", version, buildinfo.Version)
	}
	if want, _ := stamps(t, bin); goVersion != want {
		t.Errorf("built binary reports %s, built with %s", goVersion, want)
	}
	return commit
}

// linkedCommit stands for what the image build passes as COMMIT.
const linkedCommit = "0123456789abcdef0123456789abcdef01234567"

// TestVersionWithoutVCSStamps: a build without VCS stamps (-buildvcs=false,
// as GOFLAGS in many CI systems says, or a tree without .git such as the
// image's build context) reports the commit linked in with -X main.commit,
// and "unknown" without it; the version is VERSION's either way.
func TestVersionWithoutVCSStamps(t *testing.T) {
	if commit := runBuiltVersion(t, buildWith(t, "-buildvcs=false")); commit != "unknown" {
		t.Errorf("built with -buildvcs=false: commit %s, want unknown", commit)
	}
	bin := buildWith(t, "-buildvcs=false", "-trimpath", "-ldflags=-s -w -X main.commit="+linkedCommit)
	if commit := runBuiltVersion(t, bin); commit != linkedCommit {
		t.Errorf("built with -X main.commit=%s: commit %s", linkedCommit, commit)
	}
}

// TestVersionFromGitWorkTree: go build in a git work tree with VCS stamping
// on (the default, -buildvcs=auto, when GOFLAGS does not turn it off)
// reports the commit the toolchain stamped, a commit of the repository,
// with +dirty only when the tree has changes; the stamp wins over a
// commit linked in.
func TestVersionFromGitWorkTree(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) (string, error) {
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := git("rev-parse", "--is-inside-work-tree"); err != nil || out != "true" {
		t.Skipf("the module is not in a git work tree (%q, %v): nothing to stamp", out, err)
	}
	if fi, err := os.Stat(filepath.Join(root, ".git")); err != nil || !fi.IsDir() {
		// The go command stamps only a repository whose .git is a
		// directory; a linked worktree's is a file.
		t.Skipf("%s/.git is not a directory (a linked git worktree?): the go command does not stamp it", root)
	}
	before, err := git("status", "--porcelain")
	if err != nil {
		t.Fatal(err)
	}
	bin := buildWith(t, "-buildvcs=true", "-ldflags=-X main.commit="+linkedCommit)
	after, err := git("status", "--porcelain")
	if err != nil {
		t.Fatal(err)
	}
	commit := runBuiltVersion(t, bin)
	sha, dirty := strings.CutSuffix(commit, "+dirty")
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(sha) {
		t.Fatalf("built in a git work tree: commit %q, want the stamped revision", commit)
	}
	if _, revision := stamps(t, bin); revision != sha {
		t.Errorf("commit %s, the toolchain stamped %q", sha, revision)
	}
	if _, err := git("cat-file", "-e", sha+"^{commit}"); err != nil {
		t.Errorf("commit %s is not a commit of the repository: %v", sha, err)
	}
	// Others may edit the tree meanwhile: only a tree clean throughout
	// must give a clean commit, and one dirty throughout a dirty one.
	if before == "" && after == "" && dirty {
		t.Errorf("clean tree, commit %s", commit)
	}
	if before != "" && after != "" && !dirty {
		t.Errorf("tree with changes, commit %s without +dirty", commit)
	}
}
