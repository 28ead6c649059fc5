package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/internal/config"
	"dedup/internal/testkit"
)

// listeningPorts returns the TCP ports pid listens on: the LISTEN rows of
// /proc/<pid>/net/tcp{,6} whose socket inode is one of pid's descriptors.
func listeningPorts(t *testing.T, pid int) []int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	var ports []int
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			if len(fields) < 10 || fields[3] != "0A" || !inodes[fields[9]] {
				continue
			}
			_, hexPort, _ := strings.Cut(fields[1], ":")
			port, err := strconv.ParseInt(hexPort, 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			ports = append(ports, int(port))
		}
		f.Close()
	}
	return ports
}

// TestMetricsAddrEmptyNoServer: METRICS_ADDR set to empty starts no HTTP
// server: while the stage forwards, the only socket the process listens on
// is the embedded broker's. The same check with METRICS_ADDR set finds
// the status server's port too, so the check can see one.
func TestMetricsAddrEmptyNoServer(t *testing.T) {
	if _, err := os.Stat("/proc/self/net/tcp"); err != nil {
		t.Skip("needs /proc/<pid>/net/tcp")
	}
	for _, c := range []struct {
		name    string
		metrics bool
	}{{"set", true}, {"empty", false}} {
		t.Run(c.name, func(t *testing.T) {
			env := embeddedEnv(t, nil)
			brokerAddr, metricsAddr := env["EMBEDDED_BROKER_ADDR"], env["METRICS_ADDR"]
			if !c.metrics {
				env["METRICS_ADDR"] = ""
			}
			bin := startBinary(t, env)
			client := []kgo.Opt{kgo.SeedBrokers(brokerAddr)}
			testkit.WaitFor(t, "the embedded broker", 30*time.Second, func() (bool, error) {
				if code, done := bin.exited(); done {
					t.Fatalf("dedup exited with %d", code)
				}
				conn, err := net.DialTimeout("tcp", brokerAddr, time.Second)
				if err != nil {
					return false, nil
				}
				return true, conn.Close()
			})
			const keys = 5
			testkit.Produce(t, client, keyedWithDuplicates("events", keys, 2)...)
			checkForwarded(t, testkit.ConsumeN(t, client, "events-deduped", keys), keys)

			_, brokerPort, _ := net.SplitHostPort(brokerAddr)
			_, statusPort, _ := net.SplitHostPort(metricsAddr)
			want := map[string]bool{brokerPort: true}
			if c.metrics {
				want[statusPort] = true
			}
			got := map[string]bool{}
			for _, p := range listeningPorts(t, bin.Cmd.Process.Pid) {
				got[strconv.Itoa(p)] = true
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("listening ports = %v, want %v", got, want)
			}
			if code := bin.stop(t, 30*time.Second); code != 0 {
				t.Errorf("exit code %d, want 0", code)
			}
		})
	}
}

// TestMetricsAddrUnsetOrEmpty: unset takes the default, set to empty
// turns the server off (caarlos0/env alone would give both the default).
func TestMetricsAddrUnsetOrEmpty(t *testing.T) {
	unset, err := config.Load(testkit.Env{}.Lookup)
	if err != nil {
		t.Fatal(err)
	}
	if unset.MetricsAddr != config.Default("METRICS_ADDR") || unset.MetricsAddr == "" {
		t.Errorf("unset METRICS_ADDR = %q, want the default %q", unset.MetricsAddr, config.Default("METRICS_ADDR"))
	}
	empty, err := config.Load(testkit.Env{"METRICS_ADDR": ""}.Lookup)
	if err != nil {
		t.Fatal(err)
	}
	if empty.MetricsAddr != "" {
		t.Errorf("METRICS_ADDR= gives %q, want empty (no server)", empty.MetricsAddr)
	}
}
