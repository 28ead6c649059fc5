package processor

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"

	"github.com/segmentio/kafka-go"
)

// produceKey is the Kafka API key of Produce requests.
const produceKey = 0

// fencedConn is a connection of the writer's transport that asks the lease
// right before each write of a Produce request's bytes to the socket.
//
// The check in metadataCache.RoundTrip alone leaves a gap: between it and
// the socket, kafka.Transport may dial the leader, wait for a connection,
// or wait for the connection's goroutine to finish the previous round
// trip. A member stalled in there (SIGSTOP, a frozen VM) would send the
// request on waking, after the new owner's replay scan, and the new owner
// would forward the same inputs again. Here only the write itself lies
// between the check and the send.
//
// kafka-go writes one request at a time per connection, each starting with
// its 4-byte size and 2-byte API key, so writes are split into requests by
// counting bytes. A refused write fails the request and its connection;
// a Produce request cut short is never appended by the broker.
type fencedConn struct {
	net.Conn
	fence func() error

	// remaining is the count of bytes of the request being written (-1:
	// the framing is lost, every write is fenced); a request starts when
	// it is 0. produce tells whether that request is a Produce. Writes
	// come from the connection's one goroutine.
	remaining int64
	produce   bool
}

func (c *fencedConn) Write(b []byte) (int, error) {
	if c.remaining == 0 {
		if len(b) < 6 {
			// A request's header split across writes (kafka-go writes it
			// whole): fence every write from here on.
			c.produce, c.remaining = true, -1
		} else {
			c.remaining = 4 + int64(binary.BigEndian.Uint32(b[:4]))
			c.produce = int16(binary.BigEndian.Uint16(b[4:6])) == produceKey
		}
	}
	if c.produce {
		if err := c.fence(); err != nil {
			return 0, fmt.Errorf("produce not sent: %w", err)
		}
	}
	n, err := c.Conn.Write(b)
	if c.remaining > 0 {
		c.remaining = max(c.remaining-int64(n), 0)
	}
	return n, err
}

// fenceConns makes every connection t dials a fencedConn asking fence. The
// TLS handshake moves from the transport into the dial (as kafka.Transport
// does it, with the host as server name when none is set), so that the
// fence reads the requests in the clear.
func fenceConns(t *kafka.Transport, fence func() error) {
	dial := t.Dial
	if dial == nil {
		dial = defaultDial
	}
	cfg := t.TLS
	t.TLS = nil
	t.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		if cfg != nil {
			c := cfg
			if c.ServerName == "" {
				host, _, err := net.SplitHostPort(address)
				if err != nil {
					host = address
				}
				c = cfg.Clone()
				c.ServerName = host
			}
			conn = tls.Client(conn, c)
		}
		return &fencedConn{Conn: conn, fence: fence}, nil
	}
}
