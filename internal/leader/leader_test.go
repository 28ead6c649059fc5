package leader

import (
	"context"
	"dedup/internal/testkit"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// moveLeader moves partition 0 of topic to another broker of c.
func moveLeader(t *testing.T, c *kfake.Cluster, topic string) {
	t.Helper()
	from := c.LeaderFor(topic, 0)
	to := (from + 1) % 3
	if err := c.MoveTopicPartition(topic, 0, to); err != nil {
		t.Fatal(err)
	}
	if got := c.LeaderFor(topic, 0); got != to {
		t.Fatalf("leader %d after the move, want %d", got, to)
	}
}

func newCluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c := testkit.NewCluster(t, kfake.NumBrokers(3), kfake.SeedTopics(1, "t"))
	return c
}

// followingClient is a client of a new cluster on a Follow transport.
func followingClient(t *testing.T) (*kfake.Cluster, *Transport, *kafka.Client) {
	t.Helper()
	c := newCluster(t)
	tr := Follow(&kafka.Transport{})
	t.Cleanup(tr.t.CloseIdleConnections)
	return c, tr, &kafka.Client{Addr: kafka.TCP(c.ListenAddrs()...), Transport: tr, Timeout: 5 * time.Second}
}

// TestProduceAfterLeaderMove: after the partition's leader moves, the
// first produce reaches the old leader and is refused; Transport drops the
// cached metadata, so the next one (a writer's retry) reaches the new
// leader, well within kafka.Transport's 6 s metadata TTL.
func TestProduceAfterLeaderMove(t *testing.T) {
	c, tr, client := followingClient(t)
	produce := func() error {
		res, err := client.Produce(context.Background(), &kafka.ProduceRequest{
			Topic: "t", Partition: 0, RequiredAcks: kafka.RequireAll,
			Records: kafka.NewRecordReader(kafka.Record{Value: kafka.NewBytes([]byte("v"))}),
		})
		if err != nil {
			return err
		}
		return res.Error
	}
	if err := produce(); err != nil {
		t.Fatalf("produce before the move: %v", err)
	}
	moveLeader(t, c, "t")
	err := produce()
	if !errors.Is(err, kafka.NotLeaderForPartition) {
		t.Fatalf("first produce after the move: %v, want NOT_LEADER_OR_FOLLOWER from the old leader", err)
	}
	if err := produce(); err != nil {
		t.Fatalf("second produce after the move: %v, want it at the new leader", err)
	}
	if n := tr.Refreshes(); n != 1 {
		t.Errorf("%d metadata refreshes, want 1", n)
	}
}

// TestListOffsetsAfterLeaderMoves: an offset lookup (the stage makes them
// at every checkpoint and partition start) refused by the old leader is
// sent again after the refresh: the caller sees no error. A second move
// right after that refresh (within the spacing of refreshes) does not fail
// a lookup either: refused again, it refreshes for itself.
func TestListOffsetsAfterLeaderMoves(t *testing.T) {
	for _, moves := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d moves", moves), func(t *testing.T) {
			c, tr, client := followingClient(t)
			if err := listEnd(client); err != nil {
				t.Fatalf("list before the move: %v", err)
			}
			for i := range moves {
				moveLeader(t, c, "t")
				if err := listEnd(client); err != nil {
					t.Fatalf("list after move %d: %v, want it answered by the new leader", i+1, err)
				}
			}
			if n := tr.Refreshes(); n != int64(moves) {
				t.Errorf("%d metadata refreshes, want %d (one per move)", n, moves)
			}
		})
	}
}

// listEnd asks for the end offset of t/0, and returns what failed.
func listEnd(client *kafka.Client) error {
	res, err := client.ListOffsets(context.Background(), &kafka.ListOffsetsRequest{
		Topics: map[string][]kafka.OffsetRequest{"t": {kafka.LastOffsetOf(0)}},
	})
	if err != nil {
		return err
	}
	return res.Topics["t"][0].Error
}

// TestRefreshesAreSpaced: answers that arrive together cost one refresh.
func TestRefreshesAreSpaced(t *testing.T) {
	tr := Follow(&kafka.Transport{})
	for range 10 {
		tr.refresh()
	}
	if n := tr.Refreshes(); n != 1 {
		t.Errorf("%d refreshes for 10 answers at once, want 1", n)
	}
}
