package cluster

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// deadlineConn is a connection whose read deadline moves only when that
// matters. kafka.Reader sets its connection's read deadline before every
// record it decodes from a fetch (now + ReadBatchTimeout, 10 s by default),
// and each set re-arms the runtime poller's timer for the socket, a cost
// that stands out in the stage's CPU profiles (docs/benchmarks.md). Such a
// deadline is a few microseconds later than the one already in force,
// which protects the read just as well.
//
// So a read deadline that is later than the one in force by at most slack
// is not applied: the one in force, at most slack earlier, stands in for
// it. An earlier deadline, no deadline, a deadline set by SetDeadline and
// every write deadline are applied at once, exactly as asked. The check
// reads no clock (a clock read costs half of what it would save), and it
// is safe for any timeout of at least 8 × slack: a kept deadline then
// leaves at least 7/8 of the asked timeout, and one in force that has
// passed is never kept (the new deadline is later than it by more than
// the timeout asked). CoalescingDialer sets slack to 1/8 of the shortest
// timeout kafka.Reader asks for.
//
// Like every net.Conn it is safe for concurrent use.
type deadlineConn struct {
	net.Conn
	slack time.Duration

	mu   sync.Mutex
	read time.Time // the read deadline in force on Conn (zero: none)
}

// SetReadDeadline applies t unless the deadline in force, at most slack
// earlier, stands in for it.
func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !t.IsZero() && !c.read.IsZero() && !t.Before(c.read) && t.Sub(c.read) <= c.slack {
		return nil
	}
	if err := c.Conn.SetReadDeadline(t); err != nil {
		return err
	}
	c.read = t
	return nil
}

// SetDeadline applies t to reads and writes as asked.
func (c *deadlineConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.Conn.SetDeadline(t); err != nil {
		return err
	}
	c.read = t
	return nil
}

// ReadDeadlineSlack is the slack of the partition readers' deadlineConns:
// 1/8 of the shortest timeout kafka.Reader sets as a read deadline, the
// fetch wait (its MaxWait; 10 s when zero) or the wait for each record of a
// fetch (its ReadBatchTimeout, 10 s).
func ReadDeadlineSlack(maxWait time.Duration) time.Duration {
	const readerDefault = 10 * time.Second // kafka-go's MaxWait and ReadBatchTimeout defaults
	if maxWait <= 0 {
		maxWait = readerDefault
	}
	return min(maxWait, readerDefault) / 8
}

// CoalescingDialer returns a copy of d (kafka.DefaultDialer when nil) whose
// connections are deadlineConns with the given slack, for the partition
// readers. TLS, SASL, the resolver and every other setting of d apply
// unchanged: kafka-go wraps the connection this returns, and a TLS
// connection passes its deadlines on to it.
func CoalescingDialer(d *kafka.Dialer, slack time.Duration) *kafka.Dialer {
	if d == nil {
		d = kafka.DefaultDialer
	}
	c := *d
	dial := d.DialFunc
	if dial == nil {
		// What kafka.Dialer dials with when DialFunc is nil.
		dial = (&net.Dialer{
			LocalAddr:     d.LocalAddr,
			DualStack:     d.DualStack, //nolint:staticcheck // kept as kafka-go passes it
			FallbackDelay: d.FallbackDelay,
			KeepAlive:     d.KeepAlive,
		}).DialContext
	}
	c.DialFunc = func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return &deadlineConn{Conn: conn, slack: slack}, nil
	}
	return &c
}
