package kfaketest_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"dedup/internal/kfaketest"
	"dedup/internal/testkit"
)

func TestFloorsFromKversion(t *testing.T) {
	v40 := kfaketest.Floors(kversion.V4_0_0())
	// KIP-896's removals as Kafka 4.0.0 shipped them.
	for key, want := range map[kmsg.Key]int16{kmsg.Fetch: 4, kmsg.ListOffsets: 1, kmsg.OffsetCommit: 2, kmsg.OffsetFetch: 1, kmsg.JoinGroup: 2, kmsg.CreateTopics: 2, kmsg.DescribeConfigs: 1} {
		if got := v40[int16(key)]; got != want {
			t.Errorf("4.0 floor of %s: v%d, want v%d", key.Name(), got, want)
		}
	}
	for _, key := range []kmsg.Key{kmsg.Produce, kmsg.Metadata, kmsg.FindCoordinator, kmsg.SyncGroup, kmsg.Heartbeat, kmsg.LeaveGroup, kmsg.ApiVersions} {
		if got, ok := v40[int16(key)]; ok {
			t.Errorf("4.0 floor of %s: v%d, want none", key.Name(), got)
		}
	}
	if f := kfaketest.Floors(kversion.V3_9_0()); len(f) != 0 {
		t.Errorf("3.9 floors %v, want none: 3.x removed no version", f)
	}
	// KAFKA-19444 took JoinGroup v0 and v1 back in 4.1.
	if got, ok := kfaketest.Floors(kversion.V4_1_0())[int16(kmsg.JoinGroup)]; ok {
		t.Errorf("4.1 floor of JoinGroup: v%d, want none", got)
	}
}

// TestEnforceFloorsRefuses sends requests the way an old client does,
// below and at their floors, to a cluster with 4.0's floors enforced.
func TestEnforceFloorsRefuses(t *testing.T) {
	c := testkit.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"), kfake.MaxVersions(kversion.V4_0_0()))
	v := kfaketest.EnforceFloors(c, kfaketest.Floors(kversion.V4_0_0()))
	addr := c.ListenAddrs()[0]

	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 1
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "g", "consumer", 10000, 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	if _, err := roundTrip(addr, join); !errors.Is(err, io.EOF) {
		t.Errorf("JoinGroup v1: %v, want the connection closed unanswered", err)
	}

	list := func(version int16) error {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = version
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		_, err := roundTrip(addr, req)
		return err
	}
	if err := list(0); !errors.Is(err, io.EOF) {
		t.Errorf("ListOffsets v0: %v, want the connection closed unanswered", err)
	}
	if err := list(1); err != nil {
		t.Errorf("ListOffsets v1, at its floor: %v, want an answer", err)
	}

	want := map[kfaketest.KeyVersion]int64{{Key: int16(kmsg.JoinGroup), Version: 1}: 1, {Key: int16(kmsg.ListOffsets), Version: 0}: 1}
	got := v.Refused()
	if len(got) != len(want) {
		t.Errorf("refused %v, want %v", got, want)
	}
	for kv, n := range want {
		if got[kv] != n {
			t.Errorf("refused %d of %s, want %d", got[kv], kv, n)
		}
	}
	if n := v.Seen()[kfaketest.KeyVersion{Key: int16(kmsg.ListOffsets), Version: 1}]; n != 1 {
		t.Errorf("let %d ListOffsets v1 through, want 1", n)
	}
}

// roundTrip sends req on a connection of its own, framed as any client
// frames it, and reads the answer; io.EOF when the broker closed the
// connection instead.
func roundTrip(addr string, req kmsg.Request) (kmsg.Response, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return nil, err
	}
	const corr = 7
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("floors-test")).AppendRequest(nil, req, corr)
	if _, err := conn.Write(frame); err != nil {
		return nil, err
	}
	size := make([]byte, 4)
	if _, err := io.ReadFull(conn, size); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size))
	if _, err := io.ReadFull(conn, body); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		return nil, errors.New("answer to another request")
	}
	body = body[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() {
		body = body[1:] // the header's empty tag section
	}
	return resp, resp.ReadFrom(body)
}
