package testkit

import (
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

// Process is one run of a binary under test: the dedup binary built by
// BuildBinary, or the test binary itself acting as it.
type Process struct {
	Cmd  *exec.Cmd
	done chan struct{} // closed once Wait returned
}

// Main is a package's TestMain: the test binary runs as another program
// (main, whose result is the exit code) when its environment sets env to
// "1", as a test that re-executes it does; otherwise it runs the tests as
// Run does (the program keeps kafka.DefaultTransport).
func Main(m *testing.M, env string, main func() int) {
	if os.Getenv(env) == "1" {
		os.Exit(main())
	}
	os.Exit(Run(m))
}

// EnvList is env as an exec environment: exactly env's variables, sorted,
// plus PATH and HOME from the test's own environment.
func EnvList(env map[string]string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, Vars(env)...)
}

// Vars is env as "NAME=value" strings, sorted by name.
func Vars(env map[string]string) []string {
	var list []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		list = append(list, k+"="+env[k])
	}
	return list
}

// StartProcess runs path with args and the environment EnvList(env),
// writing its output to stdout and stderr. Cleanup kills it if it still
// runs and, when the test failed, logs what output(), if given, returns.
func StartProcess(t testing.TB, path string, args []string, env map[string]string, stdout, stderr io.Writer, output func() string) *Process {
	t.Helper()
	return StartProcessEnv(t, path, args, EnvList(env), stdout, stderr, output)
}

// StartProcessEnv is StartProcess with the environment as exec takes it.
func StartProcessEnv(t testing.TB, path string, args, env []string, stdout, stderr io.Writer, output func() string) *Process {
	t.Helper()
	p := &Process{Cmd: exec.Command(path, args...), done: make(chan struct{})}
	p.Cmd.Env = env
	p.Cmd.Stdout, p.Cmd.Stderr = stdout, stderr
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	go func() {
		_ = p.Cmd.Wait() // the exit status is read from ProcessState
		close(p.done)
	}()
	t.Cleanup(func() {
		if _, ok := p.Exited(); !ok {
			_ = p.Cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() && output != nil {
			t.Logf("---- %s (pid %d, %s) output:\n%s", filepath.Base(path), p.Cmd.Process.Pid, p.Status(), output())
		}
	})
	return p
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports the exit code once the process has exited (-1 when a
// signal ended it).
func (p *Process) Exited() (int, bool) {
	select {
	case <-p.done:
		return p.Cmd.ProcessState.ExitCode(), true
	default:
		return 0, false
	}
}

// Status says how the process is: running, or how it ended.
func (p *Process) Status() string {
	if _, ok := p.Exited(); !ok {
		return "running"
	}
	return p.Cmd.ProcessState.String()
}

// BuildBinary builds dedup/cmd/dedup into dir and returns its path. It is
// built without -race on purpose: the binary is the subject, not the test
// process, and a race-instrumented binary is several times slower.
func BuildBinary(dir string, ldflags ...string) (string, error) {
	bin := filepath.Join(dir, "dedup")
	args := []string{"build"}
	for _, f := range ldflags {
		args = append(args, "-ldflags", f)
	}
	cmd := exec.Command(GoTool(), append(args, "-o", bin, "dedup/cmd/dedup")...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build dedup/cmd/dedup: %w", err)
	}
	return bin, nil
}

// GoTool is the go command running the tests.
func GoTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}
