package testkit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"testing"

	"github.com/segmentio/kafka-go"
)

// ErrDefaultTransport is what a kafka-go client without a transport of its
// own gets in a test run by Run or Main.
var ErrDefaultTransport = errors.New("kafka.DefaultTransport is refused in tests: give the client a transport of its own (testkit.KafkaClient, testkit.KafkaTransport)")

// DefaultTransportGuard is a kafka.RoundTripper that refuses every request
// and remembers where the first ones came from.
type DefaultTransportGuard struct {
	mu    sync.Mutex
	count int
	first []string // the first few uses: request, address and stack
}

// maxRecorded bounds the uses whose stacks the report shows.
const maxRecorded = 3

// RoundTrip refuses req without dialing addr.
func (g *DefaultTransportGuard) RoundTrip(_ context.Context, addr net.Addr, req kafka.Request) (kafka.Response, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.count++
	if len(g.first) < maxRecorded {
		g.first = append(g.first, fmt.Sprintf("%T to %v from\n%s", req, addr, debug.Stack()))
	}
	return nil, ErrDefaultTransport
}

// Uses is how many requests the guard refused.
func (g *DefaultTransportGuard) Uses() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.count
}

// Report describes the refused requests, or is empty when there were none.
func (g *DefaultTransportGuard) Report() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.count == 0 {
		return ""
	}
	s := fmt.Sprintf("%d request(s) reached kafka.DefaultTransport (refused: %v); the first:\n", g.count, ErrDefaultTransport)
	for _, u := range g.first {
		s += u + "\n"
	}
	return s
}

// Run runs m's tests with kafka.DefaultTransport replaced by a
// DefaultTransportGuard and returns the exit code, which fails the package
// when any request reached the guard, also one whose error no test saw (a
// writer's background batch, a poll that retries). kafka.DefaultTransport
// keeps a connection pool per address for the life of the process, and
// each pool goes on dialing its address and asking for metadata with an
// empty client.id after the test and its broker are gone: a later test's
// broker given the same free port takes those requests for its own
// clients'. Test clients therefore own their transports and close them
// when the test ends (KafkaClient, KafkaTransport).
func Run(m *testing.M) int {
	g := &DefaultTransportGuard{}
	kafka.DefaultTransport = g
	code := m.Run()
	if r := g.Report(); r != "" {
		fmt.Fprint(os.Stderr, "FAIL: "+r)
		if code == 0 {
			code = 1
		}
	}
	return code
}
