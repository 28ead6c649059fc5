package processor

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"dedup/key"
	"dedup/rotation"
)

// TestClusterStateTransitions: each change of the cluster's state is logged
// once, the gauges follow it, readiness names the cause, and a waiter is
// released when the state turns good.
func TestClusterStateTransitions(t *testing.T) {
	var log bytes.Buffer
	keys, err := key.Parse("key")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	p, err := New(Options{
		Brokers: []string{"127.0.0.1:1"}, GroupID: "g", InputTopic: "in", OutputTopic: "out", Key: keys,
		Filter:  rotation.Options{ExpectedKeys: 1000, FPRate: 0.01, Window: time.Hour},
		Metrics: NewMetrics(reg),
		Logger:  slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		t.Fatal(err)
	}
	m := p.metrics
	if err := p.cluster.Err(); err == nil {
		t.Fatal("ready before the first check")
	}
	lost := errors.New("dial tcp: connection refused")
	steps := []struct {
		missing   []string
		err       error
		good      bool
		cause     error
		connected float64
		outGone   float64
	}{
		{good: true, connected: 1},
		{err: lost, cause: ErrBrokersUnreachable},
		{err: lost, cause: ErrBrokersUnreachable},
		{err: lost, cause: ErrBrokersUnreachable},
		{good: true, connected: 1},
		{missing: []string{"out"}, cause: ErrTopicMissing, connected: 1, outGone: 1},
		{missing: []string{"out"}, cause: ErrTopicMissing, connected: 1, outGone: 1},
		{good: true, connected: 1},
	}
	for i, s := range steps {
		if good := p.cluster.Update(s.missing, s.err); good != s.good {
			t.Errorf("step %d: good %v, want %v", i, good, s.good)
		}
		err := p.cluster.Err()
		if s.cause == nil && err != nil || s.cause != nil && !errors.Is(err, s.cause) {
			t.Errorf("step %d: readiness %v, want %v", i, err, s.cause)
		}
		if s.cause == ErrTopicMissing && !strings.Contains(err.Error(), "out") {
			t.Errorf("step %d: readiness %q does not name the topic", i, err)
		}
		if got := metricValue(m.Connected); got != s.connected {
			t.Errorf("step %d: dedup_broker_connected %v, want %v", i, got, s.connected)
		}
		if got := metricValue(m.Missing.WithLabelValues("out")); got != s.outGone {
			t.Errorf("step %d: dedup_topic_missing{out} %v, want %v", i, got, s.outGone)
		}
	}
	for line, want := range map[string]int{
		"Kafka brokers unreachable":     1,
		"Kafka brokers reachable again": 1,
		"topic missing":                 1,
		"topic present again":           1,
	} {
		if n := strings.Count(log.String(), line); n != want {
			t.Errorf("%d lines %q, want %d:\n%s", n, line, want, log.String())
		}
	}
	if got := metricValue(m.Missing.WithLabelValues("in")); got != 0 {
		t.Errorf("dedup_topic_missing{in} %v, want 0", got)
	}

	// A waiter blocks while the state is bad and is released when it
	// turns good.
	p.cluster.Update([]string{"in"}, nil)
	released := make(chan error, 1)
	go func() { released <- p.cluster.Wait(context.Background()) }()
	select {
	case err := <-released:
		t.Fatalf("wait returned %v while the input topic is missing", err)
	case <-time.After(50 * time.Millisecond): // a wait that should not end
	}
	p.cluster.Update(nil, nil)
	select {
	case err := <-released:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("wait not released when the topic appeared")
	}
}
