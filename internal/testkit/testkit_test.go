package testkit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestKafkaHelpersLeaveNoConnections: the kafka-go helpers close their
// connections once done (the broker sees each closed), well before
// kafka-go's 30 s idle timeout. A pool left open keeps dialing its address
// and asking for metadata with an empty client.id after the test, and a
// later test's broker given the same port takes those requests for its
// client's (TestClientIDAndCompression).
func TestKafkaHelpersLeaveNoConnections(t *testing.T) {
	for _, h := range []struct {
		name string
		use  func(t *testing.T, addr string) error
	}{
		{"SumEndOffsets", func(t *testing.T, addr string) error {
			_, err := SumEndOffsets(addr, "events", 2)
			return err
		}},
		{"KafkaClient", func(t *testing.T, addr string) error {
			// Cleanup closes it: a subtest of its own ends first.
			var err error
			t.Run("client", func(t *testing.T) {
				_, err = KafkaClient(t, addr).Metadata(context.Background(), &kafka.MetadataRequest{})
			})
			return err
		}},
	} {
		t.Run(h.name, func(t *testing.T) {
			counter := &connCounter{}
			addr := Cluster(t, 2, kfake.ListenFn(counter.listen)).ListenAddrs()[0]
			if err := h.use(t, addr); err != nil {
				t.Fatal(err)
			}
			if accepted, _ := counter.counts(); accepted == 0 {
				t.Fatal("the broker accepted no connection")
			}
			WaitFor(t, "the helper's connections closed", 5*time.Second, func() (bool, error) {
				_, open := counter.counts()
				return open == 0, nil
			})
		})
	}
}

func TestMain(m *testing.M) { os.Exit(Run(m)) }

// TestDefaultTransportRefused: tests run by Run have kafka.DefaultTransport
// replaced by the guard, which refuses a request before it dials (the
// broker accepts no connection) and reports where it came from.
func TestDefaultTransportRefused(t *testing.T) {
	if _, ok := kafka.DefaultTransport.(*DefaultTransportGuard); !ok {
		t.Fatalf("kafka.DefaultTransport is %T, want the guard", kafka.DefaultTransport)
	}
	counter := &connCounter{}
	addr := Cluster(t, 2, kfake.ListenFn(counter.listen)).ListenAddrs()[0]
	// A guard of its own: a request to the installed one fails the package.
	g := &DefaultTransportGuard{}
	client := &kafka.Client{Addr: kafka.TCP(addr), Transport: g, Timeout: 5 * time.Second}
	if _, err := client.Metadata(context.Background(), &kafka.MetadataRequest{}); !errors.Is(err, ErrDefaultTransport) {
		t.Fatalf("metadata through the guard: %v, want ErrDefaultTransport", err)
	}
	if n := g.Uses(); n != 1 {
		t.Errorf("%d uses counted, want 1", n)
	}
	if r := g.Report(); !strings.Contains(r, "TestDefaultTransportRefused") || !strings.Contains(r, addr) {
		t.Errorf("report names neither the test nor the address:\n%s", r)
	}
	if accepted, _ := counter.counts(); accepted != 0 {
		t.Errorf("the broker accepted %d connections, want none", accepted)
	}
}

// recordingTB is a testing.TB whose cleanups run when the test says and
// whose failures are recorded, not reported.
type recordingTB struct {
	testing.TB
	cleanups []func()
	errs     []string
}

func (r *recordingTB) Helper()          {}
func (r *recordingTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recordingTB) Failed() bool     { return len(r.errs) > 0 }
func (r *recordingTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recordingTB) runCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// TestClusterChecksConnectionsClosed: Cluster's cleanup fails the test
// when a connection to its broker is still open after the test's other
// cleanups, and not when every one was closed.
func TestClusterChecksConnectionsClosed(t *testing.T) {
	for _, leave := range []bool{false, true} {
		t.Run(fmt.Sprintf("left open %v", leave), func(t *testing.T) {
			rec := &recordingTB{TB: t}
			addr := Cluster(rec, 2).ListenAddrs()[0]
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// The broker accepts in order: it has accepted conn once it
			// answers a client dialing after it.
			tr := &kafka.Transport{}
			client := &kafka.Client{Addr: kafka.TCP(addr), Transport: tr, Timeout: 5 * time.Second}
			_, err = client.Metadata(context.Background(), &kafka.MetadataRequest{})
			tr.CloseIdleConnections()
			if err != nil {
				t.Fatal(err)
			}
			if !leave {
				conn.Close()
			}
			rec.runCleanups()
			switch {
			case leave && (len(rec.errs) != 1 || !strings.Contains(rec.errs[0], "1 of the ")):
				t.Errorf("a connection left open: reported %q, want 1 still open", rec.errs)
			case !leave && len(rec.errs) != 0:
				t.Errorf("every connection closed: reported %q", rec.errs)
			}
		})
	}
}
