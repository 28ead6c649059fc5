// Package kfaketest holds what fault-injecting tests do to the stage's
// requests in kfake's control functions: recognise the Produce requests
// for a topic and answer them with an error (produce.go), refuse an
// offset commit (commit.go) or a group join (join.go), refuse every
// such request until lifted (refuse.go), or refuse every request below a
// Kafka release's lowest versions (floors.go). Tests only; the stage's
// packages do not import it.
package kfaketest

import "github.com/twmb/franz-go/pkg/kmsg"

// ProducesTo reports whether req writes to topic. It matches by name: the
// stage's kafka-go writer sends Produce versions that name topics, where
// newer versions (and franz-go's clients) name them by ID.
func ProducesTo(req *kmsg.ProduceRequest, topic string) bool {
	for _, t := range req.Topics {
		if t.Topic == topic {
			return true
		}
	}
	return false
}

// ErrorResponse answers every partition of req with the error code, as a
// broker that refused the whole request before appending anything.
func ErrorResponse(req *kmsg.ProduceRequest, code int16) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	resp.Version = req.Version
	for _, rt := range req.Topics {
		t := kmsg.NewProduceResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition = rp.Partition
			p.ErrorCode = code
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
