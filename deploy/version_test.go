package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"dedup/internal/buildinfo"
	"dedup/internal/testkit"
)

// TestImageVersion: the image says the version the binary says. The final
// stage labels org.opencontainers.image.version with the VERSION build
// argument; the build stage's check refuses any VERSION but
// internal/buildinfo/VERSION; docker-compose.yml passes that version; and
// the commit linked in as the Dockerfile links it is the one `dedup
// version` reports.
func TestImageVersion(t *testing.T) {
	d := parseDockerfile(t)
	for _, arg := range []string{"VERSION", "COMMIT"} {
		if !slices.Contains(d.Args, arg) {
			t.Errorf("the final stage declares no ARG %s: its LABEL would read it empty", arg)
		}
	}
	for label, want := range map[string]string{"org.opencontainers.image.version": "${VERSION}", "org.opencontainers.image.revision": "${COMMIT}"} {
		if got := d.Labels[label]; got != want {
			t.Errorf("LABEL %s=%q, want %q", label, got, want)
		}
	}

	var build string
	for _, r := range d.Runs {
		if strings.Contains(r, "go build") {
			build = r
		}
	}
	check, _, ok := strings.Cut(build, "&& go build")
	if !ok {
		t.Fatalf("no RUN line with a check before `&& go build` in the Dockerfile: %q", build)
	}
	for strings.HasPrefix(check, "--") { // RUN's own flags (--mount=...)
		_, check, _ = strings.Cut(check, " ")
		check = strings.TrimSpace(check)
	}
	// The check as the build stage runs it, in /src: the repository root.
	for _, version := range []string{buildinfo.Version, "", "99.0.0"} {
		sh := exec.Command("sh", "-c", check)
		sh.Dir, sh.Env = root, []string{"VERSION=" + version, "PATH=" + os.Getenv("PATH")}
		out, err := sh.CombinedOutput()
		if pass := err == nil; pass != (version == buildinfo.Version) {
			t.Errorf("the image build's check with VERSION=%q: passes %v, want %v (%v: %s)", version, pass, version == buildinfo.Version, err, out)
		}
	}

	ldflags := regexp.MustCompile(`-ldflags="([^"]*)"`).FindStringSubmatch(build)
	if ldflags == nil {
		t.Fatalf("the Dockerfile's go build has no -ldflags=\"...\": %q", build)
	}
	const commit = "0123456789abcdef0123456789abcdef01234567"
	bin := filepath.Join(t.TempDir(), "dedup")
	// -buildvcs=false: the image's build context has no .git.
	gobuild := exec.Command(testkit.GoTool(), "build", "-buildvcs=false", "-trimpath",
		"-ldflags="+strings.ReplaceAll(ldflags[1], "${COMMIT}", commit), "-o", bin, "dedup/cmd/dedup")
	gobuild.Stdout, gobuild.Stderr = os.Stderr, os.Stderr
	if err := gobuild.Run(); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "dedup " + buildinfo.Version + " (commit " + commit + ", "; !strings.HasPrefix(string(out), want) {
		t.Errorf("built as the image builds it, `dedup version` printed %q, want %q...", out, want)
	}

	n := 0
	for name, s := range loadCompose(t).Services {
		if s.Build == nil || !s.isDedup() {
			continue
		}
		n++
		if got := s.Build.Args["VERSION"]; got != buildinfo.Version {
			t.Errorf("docker-compose.yml service %s builds with VERSION %q, want %s (internal/buildinfo/VERSION)", name, got, buildinfo.Version)
		}
	}
	if n == 0 {
		t.Error("no docker-compose.yml service builds deploy/Dockerfile")
	}
}
