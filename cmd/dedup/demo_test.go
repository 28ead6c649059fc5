package main

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"dedup/internal/testkit"
)

// TestDemo runs `dedup demo` as a new user would and checks that within
// seconds the stage drops generated duplicates and the progress line says so.
func TestDemo(t *testing.T) {
	env := embeddedEnv(t, testkit.Env{"LOG_LEVEL": "info"})
	metrics := env["METRICS_ADDR"]
	demo := startInProcess(t, env, "demo", "--rate", "400", "--dup", "0.4", "--retract", "0.05", "--unkeyed", "0.05")
	testkit.WaitFor(t, "duplicates, retractions and unkeyed records counted", 60*time.Second, func() (bool, error) {
		if code, ok := demo.exited(); ok {
			t.Fatalf("demo exited early with %d", code)
		}
		for _, outcome := range []string{"duplicate", "forwarded", "retraction", "unkeyed"} {
			n, err := testkit.MetricSum(metrics, "dedup_messages_total", `outcome="`+outcome+`"`)
			if err != nil || n == 0 {
				return false, err
			}
		}
		return true, nil
	})
	// The demo names its status page, served at / beside /metrics and
	// showing the stage's counts; other paths stay unanswered.
	if want := "Status page: http://" + metrics + "/\n"; !strings.Contains(demo.stdout.String(), want) {
		t.Errorf("stdout does not name the status page (%q):\n%s", want, demo.stdout)
	}
	if code, page, err := testkit.Get("http://" + metrics + "/"); err != nil || code != http.StatusOK || !strings.Contains(page, `id="total-in"`) {
		t.Errorf("GET /: %d, %v; want the status page with the records read", code, err)
	}
	if code, err := testkit.HTTPStatus("http://" + metrics + "/status"); err != nil || code != http.StatusNotFound {
		t.Errorf("GET /status: %d, %v; want 404", code, err)
	}
	if code := demo.stop(t); code != exitOK {
		t.Fatalf("demo exit code = %d, want 0", code)
	}
	// stdout is not a terminal here, so the progress goes out as whole lines;
	// the last one is drawn at the stop.
	m := regexp.MustCompile(`sent (\d+) \| in (\d+) \| out (\d+) \| dropped (\d+) \(`).FindAllStringSubmatch(demo.stdout.String(), -1)
	if len(m) == 0 {
		t.Fatalf("no progress line on stdout:\n%s", demo.stdout)
	}
	last := m[len(m)-1]
	num := func(i int) int { n, _ := strconv.Atoi(last[i]); return n }
	sent, in, out, dropped := num(1), num(2), num(3), num(4)
	// "sent" counts what the generator has seen acknowledged, so the stage
	// may already have read a few records more than that: in and sent are
	// not ordered. What the stage itself did is: every record read is either
	// written out or dropped, and never both.
	if sent == 0 || in == 0 || dropped == 0 || out == 0 || out+dropped > in {
		t.Errorf("progress line %q: want sent > 0, in > 0, dropped > 0, out > 0, out+dropped <= in", last[0])
	}
	// The last line is the summary, drawn once the stage has stopped: at
	// least the counts of the last progress line, and consistent.
	lines := strings.Split(strings.TrimSpace(demo.stdout.String()), "\n")
	sum := regexp.MustCompile(`^demo summary: \S+: sent (\d+) records; the stage read (\d+), forwarded (\d+) \(\d+ first occurrences, \d+ retractions, \d+ unkeyed\) and dropped (\d+) duplicates \(`).
		FindStringSubmatch(lines[len(lines)-1])
	if sum == nil {
		t.Fatalf("last line is not the summary: %q", lines[len(lines)-1])
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	sSent, sIn, sOut, sDropped := atoi(sum[1]), atoi(sum[2]), atoi(sum[3]), atoi(sum[4])
	if sSent < sent || sIn < in || sOut < out || sDropped < dropped || sOut+sDropped > sIn {
		t.Errorf("summary %q: want counts at least those of the last progress line %q, and out+dropped <= read", sum[0], last[0])
	}
}
