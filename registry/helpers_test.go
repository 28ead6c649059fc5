package registry

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"dedup/registry/registrytest"
)

// logBuf captures a client's log lines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// count is how many lines have msg as their message.
func (l *logBuf) count(msg string) int {
	n := 0
	for line := range strings.Lines(l.String()) {
		if strings.Contains(line, `msg="`+msg) {
			n++
		}
	}
	return n
}

// fast is the back-off the tests use: retries within milliseconds.
func fast(o Options) Options {
	if o.BackoffFirst == 0 {
		o.BackoffFirst = 2 * time.Millisecond
	}
	if o.BackoffMax == 0 {
		o.BackoffMax = 20 * time.Millisecond
	}
	return o
}

// newClient is a client with fast back-off whose log lines are captured;
// it is closed when the test ends.
func newClient(t *testing.T, o Options) (*Client, *logBuf) {
	t.Helper()
	logs := &logBuf{}
	o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := New(fast(o))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		if t.Failed() {
			t.Logf("client log:\n%s", logs)
		}
	})
	return c, logs
}

// newRegistry is a test registry closed when the test ends.
func newRegistry(t *testing.T) *registrytest.Server {
	reg := registrytest.New()
	t.Cleanup(reg.Close)
	return reg
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func avro(name string) sr.Schema {
	return sr.Schema{Schema: fmt.Sprintf(`{"type":"record","name":%q,"fields":[{"name":"id","type":"string"}]}`, name)}
}

func idsPath(id int) string { return fmt.Sprintf("/schemas/ids/%d", id) }
