package tcpproxy

import (
	"bufio"
	"net"
	"testing"
	"time"

	"dedup/internal/testkit"
)

// echo serves lines back to the sender.
func echo(t *testing.T) string {
	t.Helper()
	return testkit.Listen(t, func(c net.Conn) {
		defer c.Close()
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if _, err := c.Write([]byte(line)); err != nil {
				return
			}
		}
	})
}

// dial connects to p; the connection is closed when the test ends.
func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func roundTrip(c net.Conn) error {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	_, err := bufio.NewReader(c).ReadString('\n')
	return err
}

func TestCutAndRestore(t *testing.T) {
	p, err := Listen("127.0.0.1:0", echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := dial(t, p)
	if err := roundTrip(c); err != nil {
		t.Fatalf("before the cut: %v", err)
	}
	p.Cut()
	if err := roundTrip(c); err == nil {
		t.Fatal("a connection open at the cut still answers")
	}
	c2, err := net.Dial("tcp", p.Addr().String())
	if err == nil {
		if err := roundTrip(c2); err == nil {
			t.Fatal("a connection made during the cut answers")
		}
		c2.Close()
	}
	p.Restore()
	if err := roundTrip(dial(t, p)); err != nil {
		t.Fatalf("after the restore: %v", err)
	}
}
