package main

import (
	"context"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/internal/testkit"
)

// requestSniffer sits in the broker's listener and reads every request
// the clients send, as the broker receives it: the client.id of its
// header and, for produce requests, the codec of each record batch.
type requestSniffer struct {
	mu     sync.Mutex
	keys   map[string][]int16           // client.id → API keys it sent
	codecs map[string]map[string][]int8 // client.id → topic → codec of each batch
}

func newRequestSniffer() *requestSniffer {
	return &requestSniffer{keys: map[string][]int16{}, codecs: map[string]map[string][]int8{}}
}

// sniffHost is a loopback address of the sniffed broker's own. kfake
// listens on a free port of 127.0.0.1, and the port of a broker that has
// closed is free again: a kafka-go connection pool another test (in this
// process or in another package's, run alongside) left open keeps dialing
// it and asking for metadata, with its own client.id or none, and the
// kernel may hand that port to this broker. On 127.0.0.2 only the stage
// and the harness, given its address, reach it.
const sniffHost = "127.0.0.2"

// listen is a kfake.ListenFn; it binds sniffHost, or address where that
// loopback address is not configured (Linux routes all of 127/8 to lo).
func (s *requestSniffer) listen(network, address string) (net.Listener, error) {
	_, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen(network, net.JoinHostPort(sniffHost, port))
	if err != nil {
		ln, err = net.Listen(network, address)
	}
	if err != nil {
		return nil, err
	}
	return testkit.WrapListener(ln, func(c net.Conn) net.Conn { return &sniffedConn{Conn: c, s: s} }), nil
}

// sniffedConn parses the request frames read from the client.
type sniffedConn struct {
	net.Conn
	s   *requestSniffer
	buf []byte
}

func (c *sniffedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.buf = append(c.buf, p[:n]...)
	for len(c.buf) >= 4 {
		size := int(int32(uint32(c.buf[0])<<24 | uint32(c.buf[1])<<16 | uint32(c.buf[2])<<8 | uint32(c.buf[3])))
		if len(c.buf) < 4+size {
			break
		}
		c.s.record(c.buf[4 : 4+size])
		c.buf = c.buf[4+size:]
	}
	return n, err
}

func (s *requestSniffer) record(frame []byte) {
	r := kbin.Reader{Src: frame}
	key, version := r.Int16(), r.Int16()
	r.Int32() // correlation id
	id := r.NullableString()
	cid := "<null>"
	if id != nil {
		cid = *id
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[cid] = append(s.keys[cid], key)
	if key != kmsg.Produce.Int16() {
		return
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	if req.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if err := req.ReadFrom(r.Src); err != nil {
		return
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			var b kmsg.RecordBatch
			if err := b.ReadFrom(p.Records); err != nil {
				continue
			}
			if s.codecs[cid] == nil {
				s.codecs[cid] = map[string][]int8{}
			}
			s.codecs[cid][t.Topic] = append(s.codecs[cid][t.Topic], int8(b.Attributes&0x07))
		}
	}
}

func (s *requestSniffer) snapshot() (map[string][]int16, map[string]map[string][]int8) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := map[string][]int16{}
	for k, v := range s.keys {
		keys[k] = slices.Clone(v)
	}
	codecs := map[string]map[string][]int8{}
	for k, v := range s.codecs {
		codecs[k] = map[string][]int8{}
		for t, c := range v {
			codecs[k][t] = slices.Clone(c)
		}
	}
	return keys, codecs
}

// TestSnifferOwnAddress: a client still dialing the 127.0.0.1 port of a
// broker that has closed (a connection pool another test left open) does
// not reach a sniffed broker given the same port; its requests would count
// as the stage's.
func TestSnifferOwnAddress(t *testing.T) {
	old := testkit.Cluster(t, 2)
	addr := old.ListenAddrs()[0]
	_, p, _ := net.SplitHostPort(addr)
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	old.Close()
	sniffer := newRequestSniffer()
	sniffed := testkit.Cluster(t, 2, kfake.Ports(port), kfake.ListenFn(sniffer.listen))
	if host, _, _ := net.SplitHostPort(sniffed.ListenAddrs()[0]); host != sniffHost {
		t.Skipf("loopback address %s not configured: the sniffed broker listens on %s", sniffHost, host)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := testkit.KafkaClient(t, addr).Metadata(ctx, &kafka.MetadataRequest{}); err == nil {
		t.Errorf("a broker answered metadata on %s", addr)
	}
	if keys, _ := sniffer.snapshot(); len(keys) != 0 {
		t.Errorf("the sniffed broker took requests %v of a client of %s", keys, addr)
	}
}

// TestClientIDAndCompression: every request the stage sends (group,
// readers, output writer, checkpoint store, admin) carries KAFKA_CLIENT_ID
// (default dedup), and the output's batches reach the broker compressed
// with PRODUCE_COMPRESSION; the checkpoint store's batches, whose snapshots
// are compressed already, are not compressed again. The output is still
// every first occurrence once.
func TestClientIDAndCompression(t *testing.T) {
	for _, c := range []struct {
		name, clientID, compression string
		codec                       int8 // Kafka's record batch codec id
	}{
		{"defaults", "", "", 0},
		{"zstd", "orders-dedup", "zstd", 4},
		{"lz4", "orders-dedup", "lz4", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			sniffer := newRequestSniffer()
			cluster := testkit.Cluster(t, 2, kfake.ListenFn(sniffer.listen))
			extra := testkit.Env{}
			want := "dedup"
			if c.clientID != "" {
				extra["KAFKA_CLIENT_ID"], want = c.clientID, c.clientID
			}
			if c.compression != "" {
				extra["PRODUCE_COMPRESSION"] = c.compression
			}
			bin, env := stageAgainst(t, cluster, extra)
			addr := cluster.ListenAddrs()[0]
			const harness = "test-harness"
			client := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID(harness)}
			const keys = 30
			testkit.Produce(t, client, keyedWithDuplicates("events", keys, 2)...)
			checkForwarded(t, testkit.ConsumeN(t, client, "events-deduped", keys), keys)
			testkit.WaitFor(t, "a checkpoint saved", 15*time.Second, func() (bool, error) {
				n, err := testkit.MetricSum(env["METRICS_ADDR"], "dedup_checkpoints_total")
				return n >= 1, err
			})
			bin.stopOK(t, "")

			keysByID, codecs := sniffer.snapshot()
			// Read after the snapshot: endOffsets' client sends no client.id.
			if n := testkit.EndOffsets(t, addr, "events-deduped", 2); n != keys {
				t.Errorf("output holds %d records, want %d", n, keys)
			}
			for id := range keysByID {
				if id != want && id != harness {
					t.Errorf("requests %v sent with client.id %q, want every request of the stage with %q", keysByID[id], id, want)
				}
			}
			for _, k := range []kmsg.Key{kmsg.Metadata, kmsg.JoinGroup, kmsg.Fetch, kmsg.Produce, kmsg.OffsetCommit} {
				if !slices.Contains(keysByID[want], k.Int16()) {
					t.Errorf("no %s request with client.id %q (sent: %v)", k.Name(), want, keysByID[want])
				}
			}
			out := codecs[want]["events-deduped"]
			if len(out) == 0 {
				t.Fatalf("no output batch seen from client.id %q", want)
			}
			for _, got := range out {
				if got != c.codec {
					t.Fatalf("output batch codec %d, want %d (%s): %v", got, c.codec, c.name, out)
				}
			}
			var state int
			for topic, cs := range codecs[want] {
				if topic == "events-deduped" {
					continue
				}
				state += len(cs)
				for _, got := range cs {
					if got != 0 {
						t.Errorf("checkpoint batch in %s compressed with codec %d, want none", topic, got)
					}
				}
			}
			if state == 0 {
				t.Error("no checkpoint batch seen")
			}
		})
	}
}
