package testkit

import (
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// connCounter is a kfake.ListenFn that counts the broker's connections
// still open and notes who opened each: the client.id of its first
// request and the first requests' keys.
type connCounter struct {
	mu       sync.Mutex
	accepted int
	open     map[*countedConn]struct{}
}

func (c *connCounter) listen(network, address string) (net.Listener, error) {
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	return WrapListener(ln, c.track), nil
}

func (c *connCounter) counts() (accepted, open int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.accepted, len(c.open)
}

// describeOpen says who opened each connection still open.
func (c *connCounter) describeOpen() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ds []string
	for conn := range c.open {
		ds = append(ds, conn.log.String())
	}
	return strings.Join(ds, "; ")
}

// track counts conn as open until it is closed.
func (c *connCounter) track(conn net.Conn) net.Conn {
	cc := &countedConn{Conn: conn, c: c}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.accepted++
	if c.open == nil {
		c.open = map[*countedConn]struct{}{}
	}
	c.open[cc] = struct{}{}
	return cc
}

// WrapListener returns ln with each accepted connection handed through
// wrap, which returns the connection the broker is to use (counting or
// sniffing its requests).
func WrapListener(ln net.Listener, wrap func(net.Conn) net.Conn) net.Listener {
	return wrappedListener{Listener: ln, wrap: wrap}
}

type wrappedListener struct {
	net.Listener
	wrap func(net.Conn) net.Conn
}

func (l wrappedListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.wrap(conn), nil
}

type countedConn struct {
	net.Conn
	c    *connCounter
	log  requestLog // the broker's one reader writes it; read under c.mu
	once sync.Once
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.c.mu.Lock()
	c.log.feed(p[:n])
	c.c.mu.Unlock()
	return n, err
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.c.mu.Lock()
		delete(c.c.open, c)
		c.c.mu.Unlock()
	})
	return c.Conn.Close()
}

// requestLog follows the request frames of one connection: size, key,
// version, correlation id, client.id.
type requestLog struct {
	buf      []byte // the current frame's header so far
	skip     int    // bytes of the current frame past its header still to come
	clientID string
	keys     []int16 // of the first maxLoggedRequests requests
	requests int
}

const (
	headerFixed       = 14 // size, key, version, correlation id, client.id length
	maxLoggedRequests = 6
)

func (l *requestLog) feed(p []byte) {
	for len(p) > 0 {
		if l.skip > 0 {
			n := min(l.skip, len(p))
			l.skip -= n
			p = p[n:]
			continue
		}
		want := headerFixed
		if len(l.buf) >= headerFixed {
			if n := int16(binary.BigEndian.Uint16(l.buf[12:14])); n > 0 {
				want += int(n)
			}
		}
		take := min(want-len(l.buf), len(p))
		l.buf = append(l.buf, p[:take]...)
		p = p[take:]
		if len(l.buf) < want {
			continue
		}
		if want == headerFixed && int16(binary.BigEndian.Uint16(l.buf[12:14])) > 0 {
			continue // the client.id's bytes are still to come
		}
		if l.requests == 0 {
			l.clientID = string(l.buf[headerFixed:])
		}
		l.requests++
		if len(l.keys) < maxLoggedRequests {
			l.keys = append(l.keys, int16(binary.BigEndian.Uint16(l.buf[4:6])))
		}
		l.skip = max(0, int(int32(binary.BigEndian.Uint32(l.buf[0:4])))+4-len(l.buf))
		l.buf = l.buf[:0]
	}
}

func (l *requestLog) String() string {
	if l.requests == 0 {
		return "no request"
	}
	names := make([]string, len(l.keys))
	for i, k := range l.keys {
		names[i] = kmsg.NameForKey(k)
	}
	return fmt.Sprintf("client.id %q, %d requests: %s", l.clientID, l.requests, strings.Join(names, " "))
}

// connsCloseWithin is how long Cluster's cleanup waits for its broker to
// see every connection closed: a closed kafka-go transport, a closed
// franz-go client or a killed process closes its connections at once, but
// under -race on a loaded machine the broker's goroutines may see it late.
const connsCloseWithin = 15 * time.Second

// checkClosed fails t unless every connection the cluster at addr accepted
// is closed within connsCloseWithin. It runs in the cleanup of the
// cluster's test, after the cleanups registered later (the test's clients
// and processes) and before the cluster closes; a failed test is not
// checked again.
func (c *connCounter) checkClosed(t testing.TB, addr string) {
	if t.Failed() {
		return
	}
	deadline := time.Now().Add(connsCloseWithin)
	for {
		accepted, open := c.counts()
		if open == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d of the %d connections to the cluster at %s still open %s after the test ended (%s): a client left behind (a kafka-go transport not closed, a franz-go client not closed, a process not stopped) keeps dialing that port, which a later test's broker may be given",
				open, accepted, addr, connsCloseWithin, c.describeOpen())
			return
		}
		time.Sleep(PollEvery) // polling interval, not synchronisation
	}
}
