package output

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"github.com/segmentio/kafka-go"

	"dedup/processor/cluster"
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
// counting bytes; a write holding several requests is fenced if any of them
// is a Produce. A header cut across writes loses the framing, and from then
// on every write is fenced. A refused write fails the request and poisons the connection:
// no later write may continue a request the broker got only part of, and a
// Produce request cut short is never appended.
type fencedConn struct {
	net.Conn
	fence func() error

	// remaining is the count of bytes of the request being written (-1:
	// the framing is lost, every write is fenced); a request starts when
	// it is 0. produce tells whether that request is a Produce. refused
	// is the refusal that poisoned the connection. Writes come from the
	// connection's one goroutine.
	remaining int64
	produce   bool
	refused   error
}

func (c *fencedConn) Write(b []byte) (int, error) {
	if c.refused != nil {
		return 0, c.refused
	}
	if c.scan(b) {
		if err := c.fence(); err != nil {
			c.refused = fmt.Errorf("produce not sent: %w", err)
			return 0, c.refused
		}
	}
	n, err := c.Conn.Write(b)
	if n < len(b) {
		c.remaining = -1 // where the next request starts is unknown
	}
	return n, err
}

// scan moves the framing past b and reports whether b holds bytes of a
// Produce request, or the framing is lost.
func (c *fencedConn) scan(b []byte) bool {
	produce := false
	for len(b) > 0 {
		if c.remaining < 0 {
			return true
		}
		if c.remaining == 0 {
			if len(b) < 6 {
				c.remaining = -1
				return true
			}
			c.remaining = 4 + int64(binary.BigEndian.Uint32(b[:4]))
			c.produce = int16(binary.BigEndian.Uint16(b[4:6])) == produceKey
		}
		k := min(int64(len(b)), c.remaining)
		produce = produce || c.produce
		c.remaining -= k
		b = b[k:]
	}
	return produce
}

// fenceConns makes every connection t dials a fencedConn asking fence. TLS
// moves from the transport into the dial (with the host as server name when
// none is set, as kafka.Transport does), so that the fence reads requests in
// the clear, and the handshake is done in the dial, so that only the write
// itself lies between a check and the send.
func fenceConns(t *kafka.Transport, fence func() error) {
	dial := t.Dial
	if dial == nil {
		dial = cluster.DefaultDial
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
			tc := tls.Client(conn, c)
			if err := tc.HandshakeContext(ctx); err != nil {
				return nil, errors.Join(fmt.Errorf("tls handshake with %s: %w", address, err), conn.Close())
			}
			conn = tc
		}
		return &fencedConn{Conn: conn, fence: fence}, nil
	}
}
