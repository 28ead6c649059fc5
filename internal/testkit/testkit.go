package testkit

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/offsets"
)

// FreeAddr returns a 127.0.0.1 address with a port nothing listens on
// right now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatalf("close probe listener: %v", err)
	}
	return addr
}

// PollEvery is the period of every wait on an observable condition.
const PollEvery = 20 * time.Millisecond

// WaitFor polls cond every PollEvery until it holds, and fails the test
// with cond's last error when timeout passes first.
func WaitFor(t testing.TB, what string, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(PollEvery)
	defer tick.Stop()
	for {
		ok, err := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, err)
		}
		<-tick.C
	}
}

// SyncBuffer is a bytes.Buffer safe to write from a process's output
// copier while the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// ClusterOpts are the options of every test cluster: one broker, the
// topics "events" and "events-deduped" with partitions partitions each, a
// session-timeout floor low enough for short KAFKA_SESSION_TIMEOUTs, then
// extra (which may override any of these).
func ClusterOpts(partitions int, extra ...kfake.Opt) []kfake.Opt {
	return append([]kfake.Opt{
		kfake.NumBrokers(1),
		kfake.SeedTopics(int32(partitions), "events", "events-deduped"),
		kfake.GroupMinSessionTimeout(100 * time.Millisecond),
	}, extra...)
}

// Cluster starts a kfake cluster with ClusterOpts for the test, as
// NewCluster does.
func Cluster(t testing.TB, partitions int, extra ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	return NewCluster(t, ClusterOpts(partitions, extra...)...)
}

// NewCluster starts a kfake cluster with opts for the test; Cleanup closes
// it, after failing the test when a connection to any of its brokers is
// still open 15 s after the test's other cleanups (connCounter.checkClosed).
// A kfake.ListenFn in opts replaces the counting listener, and with it the
// check.
func NewCluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	conns := &connCounter{}
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.ListenFn(conns.listen)}, opts...)...)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	addr := c.ListenAddrs()[0]
	t.Cleanup(func() { conns.checkClosed(t, addr) })
	return c
}

// client is a franz-go client with opts; the caller closes it.
func client(t testing.TB, opts []kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// Produce writes records with a franz-go client (not the project's own).
func Produce(t testing.TB, opts []kgo.Opt, recs ...*kgo.Record) {
	t.Helper()
	cl := client(t, opts)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// ConsumeN reads topic from the start until n records arrived.
func ConsumeN(t testing.TB, opts []kgo.Opt, topic string, n int) []*kgo.Record {
	t.Helper()
	opts = append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	cl := client(t, opts)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records from %s before the deadline", len(out), n, topic)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		out = append(out, fs.Records()...)
	}
	return out
}

// HeaderValue returns the value of header name, and whether r has it.
func HeaderValue(r *kgo.Record, name string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == name {
			return string(h.Value), true
		}
	}
	return "", false
}

// EndOffsets sums the end offsets of every partition of topic.
func EndOffsets(t testing.TB, addr, topic string, partitions int) int64 {
	t.Helper()
	n, err := SumEndOffsets(addr, topic, partitions)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// SumEndOffsets is EndOffsets for a poll condition: it returns the error.
func SumEndOffsets(addr, topic string, partitions int) (int64, error) {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(addr), Transport: tr, Timeout: 10 * time.Second}
	return offsets.EndSum(context.Background(), client, topic, partitions)
}

// KafkaClient is a kafka-go client of addrs with a transport of its own,
// closed when the test ends (before its clusters, which were started
// first). A client on kafka.DefaultTransport would leave a connection pool
// behind for the life of the test process that dials addrs again and asks
// for metadata every few seconds with an empty client.id: once a later
// test's broker is given the same port, those requests reach it.
func KafkaClient(t testing.TB, addrs ...string) *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(addrs...), Transport: KafkaTransport(t), Timeout: 10 * time.Second}
}

// KafkaTransport is a kafka-go transport of the test's own, closed when
// the test ends, for the test's kafka.Writers and the options of code
// under test that takes one: see KafkaClient. A kafka.Writer closes only
// a transport it built itself, never its Transport.
func KafkaTransport(t testing.TB) *kafka.Transport {
	tr := &kafka.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

// HTTPStatus is the status code of GET url.
func HTTPStatus(url string) (int, error) {
	code, _, err := Get(url)
	return code, err
}

// Get is the status code and body of GET url.
func Get(url string) (int, string, error) {
	resp, err := httpClient.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)`)

// MetricSum scrapes addr/metrics and sums the samples of family whose
// labels include every label="value" pair in match.
func MetricSum(addr, family string, match ...string) (float64, error) {
	resp, err := httpClient.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	var sum float64
	found := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := sampleLine.FindStringSubmatch(sc.Text())
		if m == nil || m[1] != family {
			continue
		}
		ok := true
		for _, lv := range match {
			if !strings.Contains(m[2], lv) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return 0, err
		}
		sum += v
		found = true
	}
	if !found {
		return 0, fmt.Errorf("no sample of %s%v", family, match)
	}
	return sum, sc.Err()
}

// Listen accepts connections on a loopback port until the test ends and
// hands each to serve, in a goroutine of its own; Cleanup stops accepting
// and closes every connection accepted. It returns the address.
func Listen(t testing.TB, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go serve(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// Request sends req to the cluster at brokers (bootstrap servers,
// comma-separated) with a client of its own and returns the answer,
// failing the test when none comes within 15s; what names the request in
// the failure. The answer's error codes are the caller's to check.
func Request(t testing.TB, brokers, what string, req kmsg.Request) kmsg.Response {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		t.Fatalf("%s: create client: %v", what, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := cl.Request(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return resp
}

// Consistently checks cond every 200ms for d and fails the test at the
// first error: what must hold for a while, not become true.
func Consistently(t testing.TB, d time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := cond(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // polling interval, not synchronisation
	}
}

// Corrupt flips a byte a third into the file at path, as a bad disk or a
// torn write would, and returns the damaged contents.
func Corrupt(t testing.TB, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/3] ^= 0xff
	if err := os.WriteFile(path, raw, 0o644); err != nil { // the file exists: its mode is kept
		t.Fatal(err)
	}
	return raw
}

// DeleteRecords moves the log start of topic's partition p to offset, as
// retention or an operator's DeleteRecords does, and fails t unless the
// broker reports exactly that log start.
func DeleteRecords(t testing.TB, brokers, topic string, p int32, offset int64) {
	t.Helper()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 10_000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = p, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := Request(t, brokers, "delete records", req).(*kmsg.DeleteRecordsResponse)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 || rp.LowWatermark != offset {
				t.Fatalf("delete records of %s/%d to %d: error code %d, log start %d", topic, rp.Partition, offset, rp.ErrorCode, rp.LowWatermark)
			}
		}
	}
}

// SetTopicConfig sets one configuration of topic with
// IncrementalAlterConfigs and fails t unless the broker applies it.
func SetTopicConfig(t testing.TB, brokers, topic, name, value string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeTopic
	res.ResourceName = topic
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name = name
	c.Op = kmsg.IncrementalAlterConfigOpSet
	c.Value = kmsg.StringPtr(value)
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp := Request(t, brokers, fmt.Sprintf("alter %s %s=%s", topic, name, value), req).(*kmsg.IncrementalAlterConfigsResponse)
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			t.Fatalf("alter %s %s=%s: %v", topic, name, value, err)
		}
	}
}

// ForwardedOnce fails t for every name in want that got does not count
// exactly once; what goes before the name in the failure ("unkeyed ").
func ForwardedOnce(t testing.TB, what string, want map[string]bool, got map[string]int) {
	t.Helper()
	for name := range want {
		if got[name] != 1 {
			t.Errorf("%s%s forwarded %d times, want once", what, name, got[name])
		}
	}
}

// Subset reports whether every element of sub is in of.
func Subset(sub, of []int) bool {
	for _, v := range sub {
		if !slices.Contains(of, v) {
			return false
		}
	}
	return true
}
