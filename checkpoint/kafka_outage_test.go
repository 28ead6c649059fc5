package checkpoint

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/internal/kfaketest"
	"dedup/internal/testkit"
)

// TestKafkaSaveFailsWithinAnInterval: while the checkpoint topic's leader
// refuses every produce with a retriable error, Save gives up within about
// one default CHECKPOINT_INTERVAL (10s) budget, well before kafka-go's
// default ten attempts, so the first failure is logged and counted soon;
// once the broker answers again the next Save goes through.
func TestKafkaSaveFailsWithinAnInterval(t *testing.T) {
	c := testkit.NewCluster(t, kfake.NumBrokers(1))
	s := newKafkaStore(t, c.ListenAddrs(), KafkaOptions{})

	refusal := kfaketest.Refuse(c, kmsg.Produce, kerr.NotLeaderForPartition.Code)

	start := time.Now()
	_, err := s.Save(testContext(t), testMeta("in", 0, 100), newState(1, 1000))
	took := time.Since(start)
	if err == nil {
		t.Fatal("Save succeeded while every produce was refused")
	}
	if n := refusal.Refused(); n < 2 {
		t.Errorf("%d produce attempts, want the writer to retry at least once", n)
	}
	if took > 3*time.Second {
		t.Errorf("Save failed after %v, want within 3s", took)
	}

	refusal.Lift()
	mustSave(t, s, testMeta("in", 0, 200), newState(2, 1000))
}
