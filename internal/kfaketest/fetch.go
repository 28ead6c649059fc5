package kfaketest

import "github.com/twmb/franz-go/pkg/kmsg"

// FetchResponse answers every partition of req without records, each
// partition's answer filled in by fill (an error code, the watermarks).
func FetchResponse(req *kmsg.FetchRequest, fill func(rp *kmsg.FetchRequestTopicPartition, p *kmsg.FetchResponseTopicPartition)) *kmsg.FetchResponse {
	res := req.ResponseKind().(*kmsg.FetchResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		for i := range rt.Partitions {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = rt.Partitions[i].Partition
			fill(&rt.Partitions[i], &p)
			t.Partitions = append(t.Partitions, p)
		}
		res.Topics = append(res.Topics, t)
	}
	return res
}
