package partition

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"
)

// humanOffset stands for kafka-go's offset type of the same name: an
// int64 that prints logical offsets by name.
type humanOffset int64

func readerLogTest(t *testing.T) (*Worker, prometheus.Counter, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "skipped"})
	w := &Worker{
		d:   Deps{Metrics: &Metrics{SkippedOffsets: c}},
		log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	w.pastEnd.Store(-1)
	return w, c, &buf
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func levelLines(log, level string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level="+level) {
			out = append(out, l)
		}
	}
	return out
}

// TestReaderLogSkips: the reader's two ways of jumping to the log start
// (an out-of-range fetch, a seek clamped when it connects) are each named
// once at warn and counted; a seek where it was asked is not a skip.
func TestReaderLogSkips(t *testing.T) {
	w, c, buf := readerLogTest(t)
	logger, errorLogger := newReaderLoggers(w)

	errorLogger.Printf(fmtSkipping, 0, "events", humanOffset(100), int64(250), int64(150))
	logger.Printf(fmtInit, 0, "events", humanOffset(300))
	logger.Printf(fmtSeek, 0, "events", humanOffset(300)) // no skip
	logger.Printf(fmtInit, 0, "events", humanOffset(-2))  // first offset: nothing expected
	logger.Printf(fmtSeek, 0, "events", humanOffset(0))
	logger.Printf(fmtInit, 0, "events", humanOffset(300))
	logger.Printf(fmtSeek, 0, "events", humanOffset(340))

	if got := counterValue(t, c); got != 190 {
		t.Errorf("counted %v skipped offsets, want 150+40", got)
	}
	warns := levelLines(buf.String(), "WARN")
	if len(warns) != 2 {
		t.Fatalf("%d warnings, want 2:\n%s", len(warns), buf)
	}
	for i, want := range []string{
		"expected_offset=100 log_start_offset=250 skipped_offsets=150",
		"expected_offset=300 log_start_offset=340 skipped_offsets=40",
	} {
		if !strings.Contains(warns[i], want) {
			t.Errorf("warning %d lacks %q: %s", i, want, warns[i])
		}
	}
}

// TestReaderLogLevels: the chatty logger and the error logger's retried
// conditions go to debug; another error-logger message goes to warn once a
// minute while it repeats.
func TestReaderLogLevels(t *testing.T) {
	w, c, buf := readerLogTest(t)
	logger, errorLogger := newReaderLoggers(w)
	for range 3 {
		logger.Printf("no messages received from kafka within the allocated time for partition %d of %s at offset %d: %v", 0, "events", humanOffset(5), "timeout")
		errorLogger.Printf("error initializing the kafka reader for partition %d of %s: %s", 0, "events", "connection refused")
		errorLogger.Printf("the kafka reader met something new at offset %d", humanOffset(900))
	}
	if got := counterValue(t, c); got != 0 {
		t.Errorf("counted %v skipped offsets, want none", got)
	}
	warns := levelLines(buf.String(), "WARN")
	if len(warns) != 1 || !strings.Contains(warns[0], "met something new") {
		t.Errorf("warnings %q, want one about the message this version does not know", warns)
	}
	if n := len(levelLines(buf.String(), "DEBUG")); n != 8 {
		t.Errorf("%d debug lines, want 8:\n%s", n, buf)
	}
}

// TestReaderPastEnd: the reader finding its offset past the log's end (the
// log truncated under it), in a fetch or when it (re)connects and cannot
// seek there, hands the offset to the worker, which reads the log's end
// before it names and counts anything (Worker.readPastEnd;
// TestTruncatedAtRuntime in processor runs it against a broker). Nothing is
// counted as skipped or truncated by the logger itself, and the reader's
// retries add no line above debug.
func TestReaderPastEnd(t *testing.T) {
	oor := fmt.Errorf("[1] Offset Out Of Range: %w", kafka.OffsetOutOfRange)
	for _, tc := range []struct {
		name  string
		lines func(logger, errorLogger readerLog)
		want  int64
	}{
		{"fetch", func(_, e readerLog) {
			for _, off := range []int64{900, 900, 950} {
				e.Printf(fmtPastEnd, 0, "events", humanOffset(off))
			}
		}, 950},
		{"reconnect", func(l, e readerLog) {
			l.Printf(fmtInit, 0, "events", humanOffset(900))
			l.Printf(fmtSeek, 0, "events", humanOffset(900))
			e.Printf(fmtInitError, 0, "events", oor)
		}, 900},
		{"reconnect, other error", func(l, e readerLog) {
			l.Printf(fmtInit, 0, "events", humanOffset(900))
			l.Printf(fmtSeek, 0, "events", humanOffset(900))
			e.Printf(fmtInitError, 0, "events", errors.New("dial tcp: connection refused"))
		}, -1},
		{"no seek yet", func(_, e readerLog) {
			e.Printf(fmtInitError, 0, "events", oor)
		}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, skipped, buf := readerLogTest(t)
			truncations := prometheus.NewCounter(prometheus.CounterOpts{Name: "truncations"})
			w.d.Metrics.InputTruncations = truncations
			tc.lines(newReaderLoggers(w))
			if got := w.pastEnd.Load(); got != tc.want {
				t.Errorf("offset handed to the worker %d, want %d", got, tc.want)
			}
			if got := counterValue(t, truncations) + counterValue(t, skipped); got != 0 {
				t.Errorf("counted %v truncations and skips, want none before the worker reads the log's end", got)
			}
			for _, level := range []string{"INFO", "WARN", "ERROR"} {
				if lines := levelLines(buf.String(), level); len(lines) != 0 {
					t.Errorf("%s lines %q, want none", level, lines)
				}
			}
		})
	}
}

// TestReaderFormatsMatchKafkaGo: every kafka-go message readerLog
// recognises is, verbatim, a format string of the kafka-go version in
// go.mod, so an upgrade that rewords one fails here instead of making a
// skip silent or a retry loud.
func TestReaderFormatsMatchKafkaGo(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/segmentio/kafka-go").Output()
	if err != nil {
		t.Skipf("locate kafka-go's source with the go command: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "reader.go"))
	if err != nil {
		t.Fatal(err)
	}
	formats := []string{fmtSkipping, fmtInit, fmtSeek, fmtPastEnd}
	for f := range transient {
		formats = append(formats, f)
	}
	for _, f := range formats {
		if !bytes.Contains(src, []byte(strconv.Quote(f))) {
			t.Errorf("kafka-go's reader.go has no format %q", f)
		}
	}
}
