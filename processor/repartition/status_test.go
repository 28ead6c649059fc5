package repartition

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/internal/kfaketest"
	"dedup/internal/testkit"
	"dedup/key"
	"dedup/processor/cluster"
)

const (
	inTopic = "events"
	reTopic = "events-repartition"
)

func testLogger() *slog.Logger {
	if os.Getenv("DEDUP_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// member is one running hop 1 with its status and metrics.
type member struct {
	status  *Status
	metrics Metrics
	done    chan error
}

func startMember(t *testing.T, brokers []string, recovery time.Duration) *member {
	t.Helper()
	labels := []string{"topic", "partition"}
	m := &member{status: &Status{}, done: make(chan error, 1), metrics: Metrics{
		Rekeyed:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rekeyed"}, labels),
		Restarts:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "restarts"}, labels),
		Lag:       prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lag"}, labels),
		Unhealthy: prometheus.NewGauge(prometheus.GaugeOpts{Name: "unhealthy"}),
	}}
	keys, _ := key.Parse("key")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		m.done <- Run(ctx, Options{
			Brokers: brokers, GroupID: "dedup-repartition", InputTopic: inTopic, Topic: reTopic, Key: keys,
			SessionTimeout: time.Second, RebalanceTimeout: 2 * time.Second, HeartbeatInterval: 100 * time.Millisecond,
			BatchSize: 10, FetchMaxWait: 50 * time.Millisecond, CommitInterval: 50 * time.Millisecond,
			RetryBackoff: 20 * time.Millisecond, RecoveryTimeout: recovery,
			Status: m.status, Metrics: m.metrics, Logger: testLogger(),
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-m.done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return m
}

func newCluster(t *testing.T, inParts int32) (*kfake.Cluster, *kgo.Client) {
	t.Helper()
	c := testkit.NewCluster(t, kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(100*time.Millisecond),
		kfake.SeedTopics(inParts, inTopic), kfake.SeedTopics(2, reTopic))
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(inTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	return c, prod
}

// TestStatusFailingBatches: hop 1 is not ready while its group refuses it,
// ready once it joined; while the repartition topic refuses every produce
// it stays healthy for the recovery timeout, then Healthy fails with
// ErrFailing and the gauge is 1; once the fault is lifted the batches are
// acknowledged and it is healthy again.
func TestStatusFailingBatches(t *testing.T) {
	c, prod := newCluster(t, 2)
	joins := kfaketest.RefuseJoin(c, "dedup-repartition", kerr.CoordinatorLoadInProgress.Code)

	const recovery = 1500 * time.Millisecond
	m := startMember(t, c.ListenAddrs(), recovery)
	eventually(t, 20*time.Second, "hop 1 asked to join twice", func() bool { return joins.Refused() >= 2 })
	if err := m.status.Readiness(); err == nil {
		t.Fatal("ready while its group refuses it")
	}
	joins.Lift()
	eventually(t, 20*time.Second, "ready once joined", func() bool { return m.status.Readiness() == nil })
	if err := m.status.Healthy(); err != nil {
		t.Fatalf("healthy before any failure: %v", err)
	}

	produces := kfaketest.RefuseProduceTo(c, reTopic, kerr.NotEnoughReplicas.Code)
	const n = 40
	for i := range n {
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Partition: int32(i % 2), Key: []byte(fmt.Sprint("id-", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 20*time.Second, "a batch refused", func() bool { return produces.Refused() != 0 })
	eventually(t, 20*time.Second, "unhealthy", func() bool { return m.status.Healthy() != nil })
	failingFor := time.Since(produces.FirstRefused())
	if failingFor < recovery {
		t.Errorf("unhealthy %s after the first refusal, before the recovery timeout %s", failingFor, recovery)
	}
	if err := m.status.Healthy(); !errors.Is(err, ErrFailing) || !errors.Is(err, kafka.NotEnoughReplicas) {
		t.Errorf("Healthy() = %v, want ErrFailing naming the refusal", err)
	}
	eventually(t, 10*time.Second, "unhealthy gauge 1", func() bool { return sum(m.metrics.Unhealthy) == 1 })
	if err := m.status.Readiness(); err != nil {
		t.Errorf("not ready while failing (it holds its partitions): %v", err)
	}

	produces.Lift()
	eventually(t, 20*time.Second, "healthy again", func() bool { return m.status.Healthy() == nil })
	eventually(t, 10*time.Second, "unhealthy gauge 0", func() bool { return sum(m.metrics.Unhealthy) == 0 })
	eventually(t, 20*time.Second, "every record acknowledged", func() bool {
		return sum(m.metrics.Rekeyed) >= n
	})
}

// TestStatusIdleAfterFetchFaults: hop 1's fetches of an idle input lose
// their connection three times; each session fails and starts again, and
// once it is caught up with nothing to send, hop 1 stays healthy past the
// recovery timeout: a failure it recovered from does not count against it
// while no records come.
func TestStatusIdleAfterFetchFaults(t *testing.T) {
	c, _ := newCluster(t, 1)
	var seen atomic.Int32
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		if len(req.Topics) == 0 || req.Topics[0].Topic != inTopic || seen.Load() >= 3 {
			return nil, nil, false
		}
		seen.Add(1)
		return nil, errors.New("connection closed by the test"), true
	})
	const recovery = 500 * time.Millisecond
	m := startMember(t, c.ListenAddrs(), recovery)
	eventually(t, 20*time.Second, "three fetches failed and hop 1 restarted after each", func() bool {
		return seen.Load() == 3 && sum(m.metrics.Restarts) >= 3
	})
	for until := time.Now().Add(3 * recovery); time.Now().Before(until); time.Sleep(20 * time.Millisecond) {
		if err := m.status.Healthy(); err != nil {
			t.Fatalf("idle after recovered fetch faults, yet unhealthy: %v", err)
		}
	}
}

// TestStatusReadyWithoutPartitions: of two members of a group over one
// input partition, the one the group gave nothing is ready as well.
func TestStatusReadyWithoutPartitions(t *testing.T) {
	c, _ := newCluster(t, 1)
	a := startMember(t, c.ListenAddrs(), time.Minute)
	eventually(t, 20*time.Second, "a ready", func() bool { return a.status.Readiness() == nil })
	b := startMember(t, c.ListenAddrs(), time.Minute)
	eventually(t, 20*time.Second, "both ready, one holding the partition", func() bool {
		return a.status.Readiness() == nil && b.status.Readiness() == nil && held(a)+held(b) == 1 && gen(a) == gen(b)
	})
}

func held(m *member) int {
	m.status.mu.Lock()
	defer m.status.mu.Unlock()
	return m.status.held
}

func gen(m *member) int32 {
	m.status.mu.Lock()
	defer m.status.mu.Unlock()
	return m.status.gen
}

// TestStatusRunFailed: Run's error is the status's.
func TestStatusRunFailed(t *testing.T) {
	st := &Status{}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "unhealthy"})
	err := Run(context.Background(), Options{Status: st, Metrics: Metrics{Unhealthy: g}, Logger: testLogger()})
	if err == nil {
		t.Fatal("Run without brokers or topics: no error")
	}
	if h := st.Healthy(); h == nil || !errors.Is(h, err) {
		t.Errorf("Healthy() = %v, want Run's error %v", h, err)
	}
	if st.Readiness() == nil {
		t.Error("ready after Run failed")
	}
	if v := sum(g); v != 1 {
		t.Errorf("unhealthy gauge = %v, want 1", v)
	}
}

// sum adds up the values of c's series.
func sum(c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	var total float64
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			panic(err)
		}
		total += d.GetCounter().GetValue() + d.GetGauge().GetValue()
	}
	return total
}

// TestStatusReadinessNamesClusterCause: with a cluster watch, Readiness
// names what the watch saw (brokers lost, a topic missing) before the
// generation, and Run's error before either; the watch's gauges follow.
func TestStatusReadinessNamesClusterCause(t *testing.T) {
	connected := prometheus.NewGauge(prometheus.GaugeOpts{Name: "connected"})
	missing := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "missing"}, []string{"topic"})
	w := cluster.New(cluster.Config{
		Brokers: []string{"127.0.0.1:1"}, Input: inTopic, Repartition: reTopic,
		Log: testLogger(), Connected: connected, Missing: missing, Refresh: func() {},
	})
	if got := w.Topics(); len(got) != 2 || got[0] != inTopic || got[1] != reTopic {
		t.Fatalf("watched topics %v, want [%s %s]", got, inTopic, reTopic)
	}
	s := &Status{cluster: w}
	s.joined(1, 2)

	w.Update(nil, errors.New("dial: connection refused"))
	if err := s.Readiness(); !errors.Is(err, cluster.ErrBrokersUnreachable) {
		t.Errorf("Readiness with the brokers lost = %v, want ErrBrokersUnreachable", err)
	}
	if v := sum(connected); v != 0 {
		t.Errorf("connected = %v with the brokers lost, want 0", v)
	}

	w.Update([]string{reTopic}, nil)
	err := s.Readiness()
	if !errors.Is(err, cluster.ErrTopicMissing) || !strings.Contains(err.Error(), reTopic) {
		t.Errorf("Readiness with the repartition topic missing = %v, want ErrTopicMissing naming %s", err, reTopic)
	}
	if v := sum(connected); v != 1 {
		t.Errorf("connected = %v with the brokers answering, want 1", v)
	}
	if v := sum(missing.WithLabelValues(reTopic)); v != 1 {
		t.Errorf("missing{%s} = %v, want 1", reTopic, v)
	}

	w.Update(nil, nil)
	if err := s.Readiness(); err != nil {
		t.Errorf("Readiness with all well = %v, want nil", err)
	}
	w.Update([]string{inTopic}, nil)
	s.stopped(errors.New("boom"))
	if err := s.Readiness(); err == nil || !strings.Contains(err.Error(), "re-key hop stopped") {
		t.Errorf("Readiness after Run failed = %v, want Run's error first", err)
	}
}
