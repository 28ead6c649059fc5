package output

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/internal/testkit"
	"dedup/offsets"
	"dedup/processor/lease"
)

// stallConn lets a test stall the member (move the lease's clock) after
// the first write of a Produce request, where the writer transport's own
// fence check lies far behind.
type stallConn struct {
	net.Conn
	afterFirstWrite func()
}

func (c *stallConn) Write(b []byte) (int, error) {
	first := len(b) >= 6 && binary.BigEndian.Uint16(b[4:6]) == produceKey
	n, err := c.Conn.Write(b)
	if first {
		c.afterFirstWrite()
	}
	return n, err
}

// stallAfterCheck sits between the writer transport's fence check and
// kafka.Transport: once armed, it stalls the member right after a Produce
// request passed the check.
type stallAfterCheck struct {
	next  kafka.RoundTripper
	armed atomic.Bool
	stall func()
}

func (s *stallAfterCheck) RoundTrip(ctx context.Context, addr net.Addr, req kafka.Request) (kafka.Response, error) {
	if s.armed.CompareAndSwap(true, false) {
		s.stall()
	}
	return s.next.RoundTrip(ctx, addr, req)
}

// TestProduceStalledPastFenceNotSent: a produce request that passed the
// writer transport's fence check, and whose member then stalled past its
// lease before the request reached the broker, is not appended. The stall
// is injected at three points of the request's way to the socket: before
// it takes an idle connection, while a new connection to the leader is
// dialled, and between two writes of one request (a record larger than
// one write).
func TestProduceStalledPastFenceNotSent(t *testing.T) {
	for _, point := range []string{"idle", "dial", "mid-request"} {
		t.Run(point, func(t *testing.T) {
			e := newTestEnv(t, 1, 1)
			var clock atomic.Int64 // the lease's clock: moving it stalls the member, as the lease sees it
			now := func() time.Duration { return time.Duration(clock.Load()) }
			l := lease.New(nil, &kafka.Generation{GroupID: "stall", ID: 1}, time.Second, time.Second, now, slog.New(slog.DiscardHandler))
			l.ConfirmedNow()
			stall := func() { clock.Add(int64(l.Window())) }

			var (
				mu        sync.Mutex
				gate      chan struct{} // non-nil: dials wait for it
				dialing   = make(chan struct{}, 16)
				midStall  atomic.Bool
				netDialer = &net.Dialer{Timeout: 3 * time.Second}
			)
			transport := &kafka.Transport{Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
				mu.Lock()
				g := gate
				mu.Unlock()
				if g != nil {
					dialing <- struct{}{}
					<-g
				}
				c, err := netDialer.DialContext(ctx, network, address)
				if err != nil {
					return nil, err
				}
				return &stallConn{Conn: c, afterFirstWrite: func() {
					if midStall.CompareAndSwap(true, false) {
						stall()
					}
				}}, nil
			}}
			o := New(e.config(transport, l.Fence))
			t.Cleanup(func() { _ = o.Close() })
			out := o.Writer()
			afterCheck := &stallAfterCheck{next: out.rt.next, stall: stall}
			out.rt.next = afterCheck
			client := &kafka.Client{Addr: kafka.TCP(e.brokers...), Transport: out.rt, Timeout: 10 * time.Second}
			produce := func(value []byte) error {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				res, err := client.Produce(ctx, &kafka.ProduceRequest{
					Topic: outTopic, Partition: 0, RequiredAcks: kafka.RequireAll,
					Records: kafka.NewRecordReader(kafka.Record{Value: kafka.NewBytes(value)}),
				})
				if err == nil && res.Error != nil {
					err = res.Error
				}
				return err
			}
			if err := produce([]byte("before")); err != nil {
				t.Fatalf("produce under a valid lease: %v", err)
			}

			value := []byte("after")
			errc := make(chan error, 1)
			switch point {
			case "idle":
				afterCheck.armed.Store(true)
				go func() { errc <- produce(value) }()
			case "dial":
				// Only new connections from here on, and they wait.
				out.transport.CloseIdleConnections()
				release := make(chan struct{})
				mu.Lock()
				gate = release
				mu.Unlock()
				go func() { errc <- produce(value) }()
				select {
				case <-dialing: // past the transport's fence check
				case err := <-errc:
					t.Fatalf("produce returned before dialling: %v", err)
				}
				stall()
				close(release)
			case "mid-request":
				value = bytes.Repeat([]byte{'x'}, 200<<10) // several writes
				midStall.Store(true)
				go func() { errc <- produce(value) }()
			}
			if err := <-errc; err == nil {
				t.Fatal("produce after the lease ended: succeeded, want it refused")
			}
			if afterCheck.armed.Load() || midStall.Load() {
				t.Fatal("the stall was not injected")
			}
			if err := l.Fence(); !errors.Is(err, lease.ErrFenced) {
				t.Fatalf("lease after the stall: %v, want lease.ErrFenced", err)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			offs, err := offsets.List(ctx, testkit.KafkaClient(t, e.brokers...), outTopic, []int{0})
			if err != nil {
				t.Fatal(err)
			}
			if end := offs[0].End; end != 1 {
				t.Fatalf("output holds %d records, want 1: the request sent after the lease ended was appended", end)
			}
		})
	}
}

// recordConn is a connection that keeps what is written to it.
type recordConn struct {
	net.Conn
	written []byte
}

func (c *recordConn) Write(b []byte) (int, error) {
	c.written = append(c.written, b...)
	return len(b), nil
}

// request frames a request of API key key with body bytes, as kafka-go
// writes it: size, key, then the rest.
func request(key int16, body int) []byte {
	b := make([]byte, 6+body)
	binary.BigEndian.PutUint32(b, uint32(2+body))
	binary.BigEndian.PutUint16(b[4:], uint16(key))
	return b
}

// TestFencedConnFraming: the connection tells requests apart by their size
// prefix however they are cut into writes, fences every write of a
// Produce request and no write of any other, and fences everything once a
// request's header is cut (the framing is lost).
func TestFencedConnFraming(t *testing.T) {
	const metadataKey = 3
	meta, prod := request(metadataKey, 40), request(produceKey, 100)
	for _, tc := range []struct {
		name   string
		writes [][]byte
		fenced []bool // per write: whether the fence was asked
	}{
		{"whole requests", [][]byte{meta, prod, meta}, []bool{false, true, false}},
		{"produce in pieces", [][]byte{meta, prod[:50], prod[50:99], prod[99:], meta}, []bool{false, true, true, true, false}},
		{"metadata in pieces", [][]byte{meta[:6], meta[6:], prod}, []bool{false, false, true}},
		{"header cut", [][]byte{meta[:3], meta[3:], meta}, []bool{true, true, true}},
		{"two requests in one write", [][]byte{cat(meta, prod), meta, cat(meta, meta), prod}, []bool{true, false, false, true}},
		{"write runs into the next request", [][]byte{cat(meta, prod[:20]), prod[20:], meta}, []bool{true, true, false}},
		{"produce ends, metadata starts", [][]byte{prod[:50], cat(prod[50:], meta[:10]), meta[10:], meta}, []bool{true, true, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := &recordConn{}
			var asked int
			c := &fencedConn{Conn: rc, fence: func() error { asked++; return nil }}
			var want []byte
			for i, w := range tc.writes {
				before := asked
				if _, err := c.Write(w); err != nil {
					t.Fatal(err)
				}
				if got := asked > before; got != tc.fenced[i] {
					t.Fatalf("write %d (%d bytes): fence asked %v, want %v", i, len(w), got, tc.fenced[i])
				}
				want = append(want, w...)
			}
			if !bytes.Equal(rc.written, want) {
				t.Fatal("the connection did not pass every byte through unchanged")
			}
		})
	}
	t.Run("refused", func(t *testing.T) {
		rc := &recordConn{}
		c := &fencedConn{Conn: rc, fence: func() error { return lease.ErrFenced }}
		if _, err := c.Write(meta); err != nil {
			t.Fatalf("metadata while fenced: %v", err)
		}
		if n, err := c.Write(prod); !errors.Is(err, lease.ErrFenced) || n != 0 {
			t.Fatalf("produce while fenced: wrote %d, %v; want 0 bytes and lease.ErrFenced", n, err)
		}
		if !bytes.Equal(rc.written, meta) {
			t.Fatal("a byte of the refused produce request reached the connection")
		}
	})
	// A refusal midway through a Produce request poisons the connection:
	// once the lease is valid again, no write may continue the request
	// the broker got only part of.
	t.Run("refused midway poisons", func(t *testing.T) {
		rc := &recordConn{}
		valid := true
		c := &fencedConn{Conn: rc, fence: func() error {
			if valid {
				return nil
			}
			return lease.ErrFenced
		}}
		if _, err := c.Write(prod[:50]); err != nil {
			t.Fatal(err)
		}
		valid = false
		if _, err := c.Write(prod[50:]); !errors.Is(err, lease.ErrFenced) {
			t.Fatalf("rest of the produce while fenced: %v, want lease.ErrFenced", err)
		}
		valid = true
		for _, w := range [][]byte{prod[50:], meta} {
			if n, err := c.Write(w); !errors.Is(err, lease.ErrFenced) || n != 0 {
				t.Fatalf("write of %d bytes after a refusal: wrote %d, %v; want 0 bytes and lease.ErrFenced", len(w), n, err)
			}
		}
		if !bytes.Equal(rc.written, prod[:50]) {
			t.Fatal("bytes after the refusal reached the connection")
		}
	})
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
