package testkit

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// connCounter is a kfake.ListenFn that counts the broker's connections
// still open.
type connCounter struct {
	mu             sync.Mutex
	accepted, open int
}

func (c *connCounter) listen(network, address string) (net.Listener, error) {
	ln, err := net.Listen(network, address)
	return countedListener{Listener: ln, c: c}, err
}

func (c *connCounter) counts() (accepted, open int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.accepted, c.open
}

type countedListener struct {
	net.Listener
	c *connCounter
}

func (l countedListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.c.mu.Lock()
	l.c.accepted++
	l.c.open++
	l.c.mu.Unlock()
	return &countedConn{Conn: conn, c: l.c}, nil
}

type countedConn struct {
	net.Conn
	c    *connCounter
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.c.mu.Lock()
		c.c.open--
		c.c.mu.Unlock()
	})
	return c.Conn.Close()
}

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
