package output

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"dedup/internal/testkit"
	"dedup/processor/cluster"
)

const (
	inTopic  = "events"
	outTopic = "events-deduped"
)

// testEnv is an in-process kfake broker with an input and an output topic.
type testEnv struct {
	t       testing.TB
	cluster *kfake.Cluster
	brokers []string
}

func newTestEnv(t testing.TB, inParts, outParts int32) *testEnv {
	t.Helper()
	c := testkit.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(inParts, inTopic), kfake.SeedTopics(outParts, outTopic))
	return &testEnv{t: t, cluster: c, brokers: c.ListenAddrs()}
}

// config is an output's configuration on e with its own metrics.
func (e *testEnv) config(transport *kafka.Transport, fence func() error) Config {
	return Config{
		Brokers: e.brokers, Transport: transport, Topic: outTopic, InputTopic: inTopic,
		BatchSize: 1000, BatchBytes: 1 << 20, BatchTimeout: 5 * time.Millisecond,
		Admin:         cluster.Admin{Client: testkit.KafkaClient(e.t, e.brokers...), Input: inTopic, Output: outTopic},
		Fence:         fence,
		OutputErrors:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "output_errors"}, []string{"kind"}),
		ProduceErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "produce_errors"}),
		Latency:       prometheus.NewHistogram(prometheus.HistogramOpts{Name: "latency"}),
		Log:           slog.New(slog.NewTextHandler(io.Discard, nil)),
		Failures:      NewFailures(slog.New(slog.NewTextHandler(io.Discard, nil)), inTopic, outTopic, prometheus.NewGauge(prometheus.GaugeOpts{Name: "stalled"})),
	}
}
