package assignment

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"dedup/internal/testkit"
)

// groupMember is one kafka-go consumer group member wired as the processor
// wires Sticky: the balancer records each generation as it starts.
type groupMember struct {
	cg   *kafka.ConsumerGroup
	done chan struct{}

	mu   sync.Mutex
	gen  int32
	owns []int
}

func startMember(t *testing.T, brokers []string, topic string) *groupMember {
	t.Helper()
	balancers, sticky, err := Balancers(NameSticky, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                "sticky-test",
		Brokers:           brokers,
		Topics:            []string{topic},
		GroupBalancers:    balancers,
		SessionTimeout:    time.Second,
		RebalanceTimeout:  2 * time.Second,
		HeartbeatInterval: 100 * time.Millisecond,
		JoinGroupBackoff:  100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	m := &groupMember{cg: cg, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			gen, err := cg.Next(context.Background())
			if errors.Is(err, kafka.ErrGroupClosed) {
				return
			}
			if err != nil {
				continue
			}
			sticky.Record(gen)
			var owns []int
			for _, a := range gen.Assignments[topic] {
				owns = append(owns, a.ID)
			}
			slices.Sort(owns)
			m.mu.Lock()
			m.gen, m.owns = gen.ID, owns
			m.mu.Unlock()
		}
	}()
	t.Cleanup(func() { m.stop(t) })
	return m
}

func (m *groupMember) stop(t *testing.T) {
	select {
	case <-m.done:
		return
	default:
	}
	if err := m.cg.Close(); err != nil {
		t.Error(err)
	}
	<-m.done
}

func (m *groupMember) state() (int32, []int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gen, m.owns
}

// settled waits until every member is in the same generation and together
// they own all n partitions, and returns what each owns.
func settled(t *testing.T, n int, ms ...*groupMember) [][]int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var owns [][]int
		gens := map[int32]bool{}
		all := map[int]bool{}
		for _, m := range ms {
			g, o := m.state()
			gens[g] = true
			owns = append(owns, o)
			for _, p := range o {
				all[p] = true
			}
		}
		if len(gens) == 1 && len(all) == n {
			return owns
		}
		if time.Now().After(deadline) {
			t.Fatalf("group did not settle: generations %v, partitions %v", slices.Collect(maps.Keys(gens)), owns)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}

// TestStickyConsumerGroup runs real kafka-go members against kfake: a member
// joining takes its share from the others without moving anything else, and
// a member leaving hands over only its own partitions.
func TestStickyConsumerGroup(t *testing.T) {
	const topic, n = "in", 12
	c := testkit.NewCluster(t, kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(100*time.Millisecond), kfake.SeedTopics(n, topic))
	brokers := c.ListenAddrs()

	a := startMember(t, brokers, topic)
	b := startMember(t, brokers, topic)
	before := settled(t, n, a, b)

	// Joins: each earlier member keeps a subset of what it had.
	c3 := startMember(t, brokers, topic)
	after := settled(t, n, a, b, c3)
	for i := range before {
		if !testkit.Subset(after[i], before[i]) {
			t.Fatalf("member %d had %v, got %v after a join", i, before[i], after[i])
		}
	}
	d := startMember(t, brokers, topic)
	before = after
	after = settled(t, n, a, b, c3, d)
	for i := range before {
		if !testkit.Subset(after[i], before[i]) || len(after[i]) != n/4 {
			t.Fatalf("member %d had %v, got %v after a second join", i, before[i], after[i])
		}
	}

	// A departure: the others keep everything they had.
	b.stop(t)
	before = [][]int{after[0], after[2], after[3]}
	after = settled(t, n, a, c3, d)
	for i := range before {
		if !testkit.Subset(before[i], after[i]) || len(after[i]) != n/3 {
			t.Fatalf("member %d had %v, got %v after a departure", i, before[i], after[i])
		}
	}
}
