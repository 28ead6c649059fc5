package lease

import (
	"context"
	"dedup/internal/testkit"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestLeaseRefusedHeartbeat: the coordinator's refusals of a heartbeat
// (an earlier generation, a member it removed) end the lease; only the
// current generation's member renews it. A refusal read as a
// confirmation would let a member that woke after its eviction produce
// behind the new owner.
func TestLeaseRefusedHeartbeat(t *testing.T) {
	c := testkit.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "events"))
	brokers := c.ListenAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID: "lease", Brokers: brokers, Topics: []string{"events"},
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	gen, err := g.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	client := testkit.KafkaClient(t, brokers...)
	for _, tc := range []struct {
		name    string
		member  string
		gen     int32
		refused error // nil: confirmed
	}{
		{"current", gen.MemberID, gen.ID, nil},
		{"earlier generation", gen.MemberID, gen.ID - 1, kafka.IllegalGeneration},
		{"removed member", gen.MemberID + "-gone", gen.ID, kafka.UnknownMemberId},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(client, &kafka.Generation{GroupID: "lease", MemberID: tc.member, ID: tc.gen},
				10*time.Second, 10*time.Second, nil, slog.New(slog.DiscardHandler))
			err := l.Confirm(ctx)
			if tc.refused == nil {
				if err != nil {
					t.Fatalf("confirm: %v", err)
				}
				if err := l.Fence(); err != nil {
					t.Fatalf("lease after a confirmation: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.refused) {
				t.Fatalf("confirm: %v, want %v", err, tc.refused)
			}
			if err := l.Fence(); !errors.Is(err, ErrFenced) {
				t.Fatalf("lease after a refused heartbeat: %v, want ErrFenced", err)
			}
		})
	}
}

// TestHeartbeatError: the error code wherever kafka-go's decoding of the
// response leaves it.
func TestHeartbeatError(t *testing.T) {
	for _, tc := range []struct {
		res  kafka.HeartbeatResponse
		want error
	}{
		{kafka.HeartbeatResponse{}, nil},
		{kafka.HeartbeatResponse{Error: kafka.RebalanceInProgress}, kafka.RebalanceInProgress},
		{kafka.HeartbeatResponse{Throttle: 22 * time.Millisecond}, kafka.IllegalGeneration},
		{kafka.HeartbeatResponse{Throttle: (5<<16 + 25) * time.Millisecond}, kafka.UnknownMemberId},
		{kafka.HeartbeatResponse{Throttle: (5 << 16) * time.Millisecond}, nil},
	} {
		if got := heartbeatError(&tc.res); !errors.Is(got, tc.want) || (tc.want == nil) != (got == nil) {
			t.Errorf("heartbeatError(%+v) = %v, want %v", tc.res, got, tc.want)
		}
	}
}
