package processor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
)

// The cluster watch: one metadata request for the input, output and
// dead-letter topics, every clusterPollInterval while all is well, and with
// a jittered, doubling back-off (clusterFirstBackoff to clusterMaxBackoff) while the
// brokers cannot be reached or a topic is missing. It is the one place
// that decides whether an outside reason blocks progress: it logs each
// change of state once, sets the gauges and makes the member not ready.
// The back-off stays short: the group waits for the watch before it joins
// again, so the watch's pause is how late the stage resumes after a fault.
// The stage waits for a missing topic rather than exiting: topics created
// after the stage is deployed are ordinary (deploy ordering), and a
// restart cannot create them.
const (
	clusterPollInterval   = 2 * time.Second
	clusterFirstBackoff   = 500 * time.Millisecond
	clusterMaxBackoff     = 5 * time.Second
	clusterRequestTimeout = 5 * time.Second
)

// ErrTopicMissing is what Readiness reports (wrapped, naming the topics)
// while the input, output or dead-letter topic does not exist.
var ErrTopicMissing = errors.New("topic missing")

// ErrBrokersUnreachable is what Readiness reports (wrapped, with the last
// error) while no broker answers a metadata request.
var ErrBrokersUnreachable = errors.New("kafka brokers unreachable")

// clusterMetrics are the families of the cluster watch.
type clusterMetrics struct {
	connected   prometheus.Gauge
	missing     *prometheus.GaugeVec
	generations prometheus.Counter
	joinFails   prometheus.Counter
}

func newClusterMetrics(reg prometheus.Registerer) *clusterMetrics {
	m := &clusterMetrics{
		connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "dedup_broker_connected",
			Help: "1 while the brokers answer the stage's metadata requests, 0 while none does.",
		}),
		missing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dedup_topic_missing",
			Help: "1 while the input, output or dead-letter topic named by the label does not exist; the stage waits for it, not ready.",
		}, []string{"topic"}),
		generations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dedup_group_generations_total",
			Help: "Consumer-group generations this member joined; a steady rise without partition changes is a rebalance loop.",
		}),
		joinFails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dedup_group_join_failures_total",
			Help: "Attempts to join the consumer group that failed (coordinator errors, rejected joins); a member that keeps failing holds no partition.",
		}),
	}
	reg.MustRegister(m.connected, m.missing, m.generations, m.joinFails)
	return m
}

// clusterState is what the watch last saw. Safe for concurrent use.
type clusterState struct {
	mu      sync.Mutex
	checked bool      // one answer (or failure) seen
	down    time.Time // brokers unreachable since; zero while reachable
	downErr error
	missing map[string]time.Time // topic -> missing since
	ok      chan struct{}        // closed while the state is good; replaced when it turns bad
}

func newClusterState() *clusterState {
	return &clusterState{missing: map[string]time.Time{}, ok: make(chan struct{})}
}

// err is nil while the brokers answer and both topics exist, else the
// reason progress is blocked.
func (s *clusterState) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errLocked()
}

func (s *clusterState) errLocked() error {
	switch {
	case !s.checked:
		return errors.New("cluster not checked yet")
	case !s.down.IsZero():
		return fmt.Errorf("%w since %s: %w", ErrBrokersUnreachable, s.down.Format(time.RFC3339), s.downErr)
	case len(s.missing) > 0:
		topics := make([]string, 0, len(s.missing))
		for t := range s.missing {
			topics = append(topics, t)
		}
		slices.Sort(topics)
		return fmt.Errorf("%w: %v", ErrTopicMissing, topics)
	}
	return nil
}

// wait blocks until the state is good or ctx ends; it returns ctx's error
// in that case.
func (s *clusterState) wait(ctx context.Context) error {
	s.mu.Lock()
	ok := s.ok
	s.mu.Unlock()
	select {
	case <-ok:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// updateCluster records one check's outcome and returns whether the state is good.
// Transitions are logged here, once each.
func (p *Processor) updateCluster(missing []string, reqErr error) bool {
	s := p.cluster
	m := p.metrics.cluster
	s.mu.Lock()
	defer s.mu.Unlock()
	wasGood := s.checked && s.errLocked() == nil
	s.checked = true
	now := time.Now()
	if reqErr != nil {
		if s.down.IsZero() {
			s.down = now
			p.refreshClients()
			p.log.Warn("Kafka brokers unreachable: not ready, retrying with back-off; one line when they answer again",
				"brokers", p.o.Brokers, "err", reqErr)
		}
		s.downErr = reqErr
		m.connected.Set(0)
	} else {
		if !s.down.IsZero() {
			p.refreshClients()
			p.log.Info("Kafka brokers reachable again", "brokers", p.o.Brokers, "unreachable_for", now.Sub(s.down).Round(time.Millisecond))
			s.down, s.downErr = time.Time{}, nil
		}
		m.connected.Set(1)
		for _, t := range p.watchedTopics() {
			_, was := s.missing[t]
			is := slices.Contains(missing, t)
			switch {
			case is && !was:
				s.missing[t] = now
				p.log.Warn("topic missing: not ready, waiting for it to be created", "topic", t, "role", p.topicRole(t))
				m.missing.WithLabelValues(t).Set(1)
			case !is && was:
				p.refreshClients()
				p.log.Info("topic present again", "topic", t, "role", p.topicRole(t), "missing_for", now.Sub(s.missing[t]).Round(time.Millisecond))
				delete(s.missing, t)
				m.missing.WithLabelValues(t).Set(0)
			}
		}
	}
	good := s.errLocked() == nil
	switch {
	case good && !wasGood:
		close(s.ok)
	case !good && wasGood:
		s.ok = make(chan struct{})
	}
	return good
}

// refreshClients drops the connections, and with them the cached metadata,
// of the admin client, the writer and the transport shared with the
// checkpoint store: after the brokers return or a topic appears, a
// kafka.Transport would go on answering from metadata up to 6 s old (a
// topic still unknown, connections that died with the brokers). Nothing
// succeeds through them while the fault lasts, so nothing is cut short.
func (p *Processor) refreshClients() {
	p.admin.CloseIdleConnections()
	if t := p.outTransport.Load(); t != nil {
		t.CloseIdleConnections()
	}
	if p.o.Transport != nil {
		p.o.Transport.CloseIdleConnections()
	}
}

// watchedTopics are the topics the stage cannot progress without.
func (p *Processor) watchedTopics() []string {
	ts := []string{p.o.InputTopic, p.o.OutputTopic}
	if p.o.DeadLetterTopic != "" {
		ts = append(ts, p.o.DeadLetterTopic)
	}
	return ts
}

func (p *Processor) topicRole(t string) string {
	switch t {
	case p.o.InputTopic:
		return "input"
	case p.o.DeadLetterTopic:
		return "dead-letter"
	}
	return "output"
}

// checkCluster asks for the metadata of the input and output topics once.
func (p *Processor) checkCluster(ctx context.Context) (missing []string, err error) {
	ctx, cancel := context.WithTimeout(ctx, clusterRequestTimeout)
	defer cancel()
	// A transport of its own, new each time: a kafka.Transport answers
	// metadata requests from a cache it refreshes in the background, which
	// would hide both a lost broker and a deleted topic for a while.
	tr := newTransport(p.o)
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(p.o.Brokers...), Transport: tr, Timeout: clusterRequestTimeout}
	res, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: p.watchedTopics()})
	if err != nil {
		return nil, fmt.Errorf("read metadata: %w", err)
	}
	if len(res.Brokers) == 0 {
		return nil, errors.New("read metadata: the cluster lists no brokers")
	}
	seen := map[string]bool{}
	for _, t := range res.Topics {
		if t.Error != nil && !errors.Is(t.Error, kafka.UnknownTopicOrPartition) {
			continue // another error says nothing about the topic's existence
		}
		seen[t.Name] = t.Error == nil && len(t.Partitions) > 0
	}
	for _, t := range p.watchedTopics() {
		if present, answered := seen[t]; answered && !present {
			missing = append(missing, t)
		}
	}
	return missing, nil
}

// watchCluster checks the cluster until ctx ends.
func (p *Processor) watchCluster(ctx context.Context) {
	backoff := clusterFirstBackoff
	for ctx.Err() == nil {
		missing, err := p.checkCluster(ctx)
		if ctx.Err() != nil {
			return
		}
		wait := clusterPollInterval
		if p.updateCluster(missing, err) {
			backoff = clusterFirstBackoff
		} else {
			wait = jitter(backoff)
			backoff = min(2*backoff, clusterMaxBackoff)
		}
		sleep(ctx, wait)
	}
}

// jitter spreads d over [0.8d, 1.2d), so that stages started together do
// not retry in step.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}
