//go:build unix

package main

import (
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"dedup/internal/testkit"
)

// The quick start's ways to stop what it started, each checked to leave no
// process behind: Ctrl-C in the terminal of `go run ./cmd/dedup` (the
// terminal sends SIGINT to the whole foreground process group: the go
// command and the binary it built), and SIGTERM to a binary built with
// `go build`.

// startGroup starts cmd as the leader of a process group of its own, as a
// shell does for a foreground job, and returns the group id.
func startGroup(t *testing.T, cmd *exec.Cmd, env testkit.Env) int {
	t.Helper()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for _, k := range []string{"GOCACHE", "GOPATH", "GOMODCACHE", "GOFLAGS", "GOTOOLCHAIN", "GOPROXY"} {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	return pgid
}

// groupGone reports whether no process of the group is left.
func groupGone(pgid int) bool {
	return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// waitHealthy waits for /healthz 200 on addr while cmd runs.
func waitHealthy(t *testing.T, addr string, exited <-chan struct{}) {
	t.Helper()
	testkit.WaitFor(t, "/healthz 200", 3*time.Minute, func() (bool, error) {
		select {
		case <-exited:
			t.Fatal("exited before it was healthy")
		default:
		}
		code, err := testkit.HTTPStatus("http://" + addr + "/healthz")
		return code == http.StatusOK, err
	})
}

// checkStopped waits for the command to exit, checks that the stage
// stopped cleanly (its last log line), that nothing of its process group
// remains and that its ports are free again.
func checkStopped(t *testing.T, cmd *exec.Cmd, exited <-chan struct{}, pgid int, env testkit.Env, stderr *testkit.SyncBuffer) {
	t.Helper()
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		t.Fatal("not stopped within 60s")
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "msg=stopped") {
		t.Errorf("the stage did not log a clean stop last: %q", last)
	}
	testkit.WaitFor(t, "no process of the group left", 10*time.Second, func() (bool, error) { return groupGone(pgid), nil })
	for _, addr := range []string{env["METRICS_ADDR"], env["EMBEDDED_BROKER_ADDR"]} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("%s still taken after the stop: %v", addr, err)
			continue
		}
		ln.Close()
	}
}

func stopEnv(t *testing.T) testkit.Env {
	return testkit.Env{
		"DATA_DIR":             t.TempDir(),
		"METRICS_ADDR":         testkit.FreeAddr(t),
		"EMBEDDED_BROKER_ADDR": testkit.FreeAddr(t),
		"EMBEDDED_PARTITIONS":  "1",
	}
}

// startHealthy starts cmd in a process group of its own with stopEnv and
// waits until the stage answers /healthz 200.
func startHealthy(t *testing.T, cmd *exec.Cmd) (env testkit.Env, pgid int, exited chan struct{}, stderr *testkit.SyncBuffer) {
	t.Helper()
	env = stopEnv(t)
	stderr = &testkit.SyncBuffer{}
	cmd.Stderr = stderr
	pgid = startGroup(t, cmd, env)
	exited = make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	waitHealthy(t, env["METRICS_ADDR"], exited)
	return env, pgid, exited, stderr
}

func TestStopGoRunWithCtrlC(t *testing.T) {
	cmd := exec.Command("go", "run", "./cmd/dedup")
	cmd.Dir = filepath.Join("..", "..")
	env, pgid, exited, stderr := startHealthy(t, cmd)
	// Ctrl-C: SIGINT to the foreground process group. The go command
	// exits 1 after an interrupt whatever the binary's status, so the
	// binary's clean stop is read from its log.
	if err := syscall.Kill(-pgid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	checkStopped(t, cmd, exited, pgid, env, stderr)
}

func TestStopBuiltBinaryWithSIGTERM(t *testing.T) {
	bin, err := testkit.BuildBinary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	env, pgid, exited, stderr := startHealthy(t, cmd)
	// kill -TERM <pid of the binary>
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	checkStopped(t, cmd, exited, pgid, env, stderr)
	if code := cmd.ProcessState.ExitCode(); code != exitOK {
		t.Errorf("exit %d, want 0", code)
	}
}
