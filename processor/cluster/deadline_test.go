package cluster

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// recordingConn records the read deadlines that reach the connection.
type recordingConn struct {
	net.Conn
	applied []time.Time
}

func (c *recordingConn) SetReadDeadline(t time.Time) error {
	c.applied = append(c.applied, t)
	return c.Conn.SetReadDeadline(t)
}

func TestDeadlineConnAppliesOnlyWhatMatters(t *testing.T) {
	client, _ := tcpPair(t)
	rec := &recordingConn{Conn: client}
	c := &deadlineConn{Conn: rec, slack: time.Second}
	now := time.Now()
	steps := []struct {
		name    string
		t       time.Time
		applied bool
	}{
		{"first deadline", now.Add(10 * time.Second), true},
		{"a moment later", now.Add(10*time.Second + time.Millisecond), false},
		{"same again", now.Add(10*time.Second + time.Millisecond), false},
		{"later by slack", now.Add(11 * time.Second), false},
		{"later by more than slack", now.Add(11*time.Second + time.Millisecond), true},
		{"earlier", now.Add(5 * time.Second), true},
		{"none", time.Time{}, true},
		{"after none", now.Add(10 * time.Second), true},
		{"in the past", now.Add(-time.Second), true},
		{"a moment after a past one", now.Add(-time.Second + time.Millisecond), false},
	}
	for _, s := range steps {
		before := len(rec.applied)
		if err := c.SetReadDeadline(s.t); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		applied := len(rec.applied) > before
		if applied != s.applied {
			t.Fatalf("%s (%v from now): applied %v, want %v", s.name, s.t.Sub(now), applied, s.applied)
		}
		if last := rec.applied[len(rec.applied)-1]; applied && !last.Equal(s.t) {
			t.Fatalf("%s: applied %v, want exactly %v", s.name, last, s.t)
		}
	}

	// SetDeadline is applied as asked, and is the read deadline in force
	// afterwards.
	if err := c.SetDeadline(now.Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	before := len(rec.applied)
	if err := c.SetReadDeadline(now.Add(10*time.Second + time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if len(rec.applied) != before {
		t.Fatal("a read deadline just after SetDeadline's was applied")
	}
}

// With a timeout of 8 × slack, a kept deadline never makes a read time out
// before 7/8 of the timeout asked last, and one that has passed is never
// kept.
func TestDeadlineConnTimesOutNoEarlierThanSevenEighths(t *testing.T) {
	const timeout = 400 * time.Millisecond
	client, _ := tcpPair(t)
	c := &deadlineConn{Conn: client, slack: timeout / 8}
	applied := time.Now().Add(timeout)
	if err := c.SetReadDeadline(applied); err != nil {
		t.Fatal(err)
	}
	// Ask again until a deadline is kept (unless the clock jumped by more
	// than slack since the first ask, the first try is).
	var asked time.Time
	for {
		asked = time.Now()
		if err := c.SetReadDeadline(asked.Add(timeout)); err != nil {
			t.Fatal(err)
		}
		if c.read.Equal(applied) {
			break
		}
		applied = c.read
	}
	_, err := c.Read(make([]byte, 1))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read: %v, want a timeout", err)
	}
	if waited := time.Since(asked); waited < timeout*7/8 {
		t.Fatalf("timed out after %v, want at least %v", waited, timeout*7/8)
	}

	// The deadline in force has passed: a new one must be applied, or the
	// next read would fail at once.
	asked = time.Now()
	if err := c.SetReadDeadline(asked.Add(timeout)); err != nil {
		t.Fatal(err)
	}
	_, err = c.Read(make([]byte, 1))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read: %v, want a timeout", err)
	}
	if waited := time.Since(asked); waited < timeout*7/8 {
		t.Fatalf("after an expired deadline, timed out after %v, want at least %v", waited, timeout*7/8)
	}
}

func TestReadDeadlineSlack(t *testing.T) {
	for _, c := range []struct{ maxWait, want time.Duration }{
		{250 * time.Millisecond, 250 * time.Millisecond / 8},
		{0, 10 * time.Second / 8},                // kafka-go's default MaxWait
		{time.Minute, 10 * time.Second / 8},      // ReadBatchTimeout is shorter
		{time.Millisecond, time.Millisecond / 8}, // tests' short waits
	} {
		if got := ReadDeadlineSlack(c.maxWait); got != c.want {
			t.Errorf("ReadDeadlineSlack(%v) = %v, want %v", c.maxWait, got, c.want)
		}
	}
}

// Data that arrives before the deadline is read, whatever was kept.
func TestDeadlineConnReads(t *testing.T) {
	client, server := tcpPair(t)
	c := &deadlineConn{Conn: client, slack: time.Second}
	for i := range 100 {
		if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := server.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		if _, err := c.Read(b); err != nil || b[0] != byte(i) {
			t.Fatalf("read %d: %v %v", i, b, err)
		}
	}
}

func TestDeadlineConnConcurrentUse(t *testing.T) {
	client, _ := tcpPair(t)
	c := &deadlineConn{Conn: client, slack: time.Second}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 1000 {
				d := time.Now().Add(time.Duration(1+i%7) * time.Second)
				var err error
				if g == 0 {
					err = c.SetDeadline(d)
				} else {
					err = c.SetReadDeadline(d)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestCoalescingDialer(t *testing.T) {
	client, _ := tcpPair(t)
	dials := 0
	orig := &kafka.Dialer{
		ClientID: "x",
		Timeout:  3 * time.Second,
		DialFunc: func(context.Context, string, string) (net.Conn, error) {
			dials++
			return client, nil
		},
	}
	d := CoalescingDialer(orig, time.Second)
	if d == orig || d.ClientID != "x" || d.Timeout != 3*time.Second {
		t.Fatalf("dialer %+v: want a copy with the same settings", d)
	}
	conn, err := d.DialFunc(context.Background(), "tcp", "ignored:1")
	if err != nil {
		t.Fatal(err)
	}
	if dc, ok := conn.(*deadlineConn); !ok || dc.Conn != client || dc.slack != time.Second || dials != 1 {
		t.Fatalf("dialed %T after %d dials: want a deadlineConn around the original dial", conn, dials)
	}
	if orig.DialFunc == nil || dials != 1 {
		t.Fatal("the original dialer was changed")
	}

	// Without a DialFunc (nil: kafka.DefaultDialer) it dials for real.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d = CoalescingDialer(nil, time.Second)
	if d.Timeout != kafka.DefaultDialer.Timeout {
		t.Fatalf("timeout %v, want kafka.DefaultDialer's %v", d.Timeout, kafka.DefaultDialer.Timeout)
	}
	conn, err = d.DialFunc(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, ok := conn.(*deadlineConn); !ok {
		t.Fatalf("dialed %T, want a deadlineConn", conn)
	}
	if kafka.DefaultDialer.DialFunc != nil {
		t.Fatal("kafka.DefaultDialer was changed")
	}
}

// BenchmarkReadDeadline sets a read deadline the way kafka.Reader does
// before each record (now + 10 s) on a loopback TCP connection, directly
// and through deadlineConn, in one run, and reports both and their ratio.
//
//	go test ./processor -run '^$' -bench ReadDeadline -count 5
func BenchmarkReadDeadline(b *testing.B) {
	client, _ := tcpPair(b)
	set := func(c net.Conn) float64 {
		began := time.Now()
		for range b.N {
			if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
				b.Fatal(err)
			}
		}
		return float64(time.Since(began).Nanoseconds()) / float64(b.N)
	}
	direct := set(client)
	coalesced := set(&deadlineConn{Conn: client, slack: ReadDeadlineSlack(250 * time.Millisecond)})
	b.ReportMetric(direct, "direct-ns/set")
	b.ReportMetric(coalesced, "coalesced-ns/set")
	b.ReportMetric(coalesced/direct, "coalesced/direct")
	b.ReportMetric(0, "ns/op")
}
