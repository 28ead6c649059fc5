package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
)

// The cluster watch: one metadata request for the topics the stage needs
// (hop 2: input, output and dead-letter; hop 1 alone: input and
// repartition topic; both hops in one process: all of them, in hop 2's
// watch), every clusterPollInterval while all is well, and with
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
// while a watched topic does not exist.
var ErrTopicMissing = errors.New("topic missing")

// ErrBrokersUnreachable is what Readiness reports (wrapped, with the last
// error) while no broker answers a metadata request.
var ErrBrokersUnreachable = errors.New("kafka brokers unreachable")

// Config is what the watch checks and whom it tells.
type Config struct {
	Brokers   []string
	Transport *kafka.Transport // settings (TLS, SASL) of each check's own transport; nil: defaults
	// The topics the stage cannot progress without; all but Input may be
	// empty. Hop 2 watches Input, Output, DeadLetter and Dropped; hop 1
	// run alone (REPARTITION_HOPS=rekey) Input and Repartition; both hops
	// in one process (REPARTITION_HOPS=both) all of them, hop 2's watch.
	Input, Output, DeadLetter, Repartition string
	Dropped                                string // DROPPED_TOPIC
	Log                                    *slog.Logger
	Connected                              prometheus.Gauge     // dedup_broker_connected
	Missing                                *prometheus.GaugeVec // dedup_topic_missing{topic}
	// Refresh drops the connections, and with them the cached metadata, of
	// the stage's clients: called when the brokers are lost or come back
	// and when a topic appears again.
	Refresh func()
}

// Watch is the cluster watch and what it last saw. Safe for concurrent use.
type Watch struct {
	c       Config
	mu      sync.Mutex
	checked bool      // one answer (or failure) seen
	down    time.Time // brokers unreachable since; zero while reachable
	downErr error
	missing map[string]time.Time // topic -> missing since
	ok      chan struct{}        // closed while the state is good; replaced when it turns bad
}

// New returns a watch that has not checked yet (not good); the series of
// dedup_topic_missing exist at 0 from here on, since alerts name them.
func New(c Config) *Watch {
	w := &Watch{c: c, missing: map[string]time.Time{}, ok: make(chan struct{})}
	for _, t := range w.Topics() {
		c.Missing.WithLabelValues(t)
	}
	return w
}

// Err is nil while the brokers answer and every watched topic exists, else the
// reason progress is blocked.
func (s *Watch) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errLocked()
}

func (s *Watch) errLocked() error {
	switch {
	case !s.checked:
		return errors.New("cluster not checked yet")
	case !s.down.IsZero():
		return fmt.Errorf("%w since %s: %w", ErrBrokersUnreachable, s.down.Format(time.RFC3339), s.downErr)
	case len(s.missing) > 0:
		return fmt.Errorf("%w: %v", ErrTopicMissing, slices.Sorted(maps.Keys(s.missing)))
	}
	return nil
}

// Wait blocks until the state is good or ctx ends; it returns ctx's error
// in that case.
func (s *Watch) Wait(ctx context.Context) error {
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

// Update records one check's outcome and returns whether the state is good.
// Transitions are logged here, once each.
func (s *Watch) Update(missing []string, reqErr error) bool {
	c := s.c
	s.mu.Lock()
	defer s.mu.Unlock()
	wasGood := s.checked && s.errLocked() == nil
	s.checked = true
	now := time.Now()
	if reqErr != nil {
		if s.down.IsZero() {
			s.down = now
			c.Refresh()
			c.Log.Warn("Kafka brokers unreachable: not ready, retrying with back-off; one line when they answer again",
				"brokers", c.Brokers, "err", reqErr)
		}
		s.downErr = reqErr
		c.Connected.Set(0)
	} else {
		if !s.down.IsZero() {
			c.Refresh()
			c.Log.Info("Kafka brokers reachable again", "brokers", c.Brokers, "unreachable_for", now.Sub(s.down).Round(time.Millisecond))
			s.down, s.downErr = time.Time{}, nil
		}
		c.Connected.Set(1)
		for _, t := range s.Topics() {
			_, was := s.missing[t]
			is := slices.Contains(missing, t)
			switch {
			case is && !was:
				s.missing[t] = now
				c.Log.Warn("topic missing: not ready, waiting for it to be created", "topic", t, "role", s.role(t))
				c.Missing.WithLabelValues(t).Set(1)
			case !is && was:
				c.Refresh()
				c.Log.Info("topic present again", "topic", t, "role", s.role(t), "missing_for", now.Sub(s.missing[t]).Round(time.Millisecond))
				delete(s.missing, t)
				c.Missing.WithLabelValues(t).Set(0)
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

// Topics are the topics the stage cannot progress without.
func (s *Watch) Topics() []string {
	ts := []string{s.c.Input}
	for _, t := range []string{s.c.Output, s.c.DeadLetter, s.c.Repartition, s.c.Dropped} {
		if t != "" {
			ts = append(ts, t)
		}
	}
	return ts
}

func (s *Watch) role(t string) string {
	switch t {
	case s.c.Input:
		return "input"
	case s.c.DeadLetter:
		return "dead-letter"
	case s.c.Repartition:
		return "repartition"
	case s.c.Dropped:
		return "dropped"
	}
	return "output"
}

// Check asks for the metadata of the watched topics once.
func (s *Watch) Check(ctx context.Context) (missing []string, err error) {
	ctx, cancel := context.WithTimeout(ctx, clusterRequestTimeout)
	defer cancel()
	// A transport of its own, new each time: a kafka.Transport answers
	// metadata requests from a cache it refreshes in the background, which
	// would hide both a lost broker and a deleted topic for a while.
	tr := NewTransport(s.c.Transport)
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(s.c.Brokers...), Transport: tr, Timeout: clusterRequestTimeout}
	res, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: s.Topics()})
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
	for _, t := range s.Topics() {
		if present, answered := seen[t]; answered && !present {
			missing = append(missing, t)
		}
	}
	return missing, nil
}

// Run checks the cluster until ctx ends.
func (s *Watch) Run(ctx context.Context) {
	backoff := clusterFirstBackoff
	for ctx.Err() == nil {
		missing, err := s.Check(ctx)
		if ctx.Err() != nil {
			return
		}
		wait := clusterPollInterval
		if s.Update(missing, err) {
			backoff = clusterFirstBackoff
		} else {
			wait = Jitter(backoff)
			backoff = min(2*backoff, clusterMaxBackoff)
		}
		Sleep(ctx, wait)
	}
}

// Jitter spreads d over [0.8d, 1.2d), so that stages started together do
// not retry in step.
func Jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}
