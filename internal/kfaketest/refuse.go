package kfaketest

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Refusal is a control that refuses every request of one key until Lift.
type Refusal struct {
	on      atomic.Bool
	refused atomic.Int64
	first   atomic.Int64 // unix nanos of the first refusal, 0 before it
}

// Refuse makes c answer every Produce, OffsetCommit or JoinGroup request
// (key) with the error code for all of its partitions (ErrorResponse,
// CommitErrorResponse) or the group (JoinErrorResponse) from now until
// Lift.
func Refuse(c *kfake.Cluster, key kmsg.Key, code int16) *Refusal {
	return refuse(c, key, code, func(kmsg.Request) bool { return true })
}

// RefuseProduceTo is Refuse for the Produce requests that write to topic
// (ProducesTo); the others pass.
func RefuseProduceTo(c *kfake.Cluster, topic string, code int16) *Refusal {
	return refuse(c, kmsg.Produce, code, func(req kmsg.Request) bool {
		return ProducesTo(req.(*kmsg.ProduceRequest), topic)
	})
}

// RefuseJoin is Refuse for the JoinGroup requests of group; the other
// groups' pass.
func RefuseJoin(c *kfake.Cluster, group string, code int16) *Refusal {
	return refuse(c, kmsg.JoinGroup, code, func(req kmsg.Request) bool {
		return req.(*kmsg.JoinGroupRequest).Group == group
	})
}

func refuse(c *kfake.Cluster, key kmsg.Key, code int16, match func(kmsg.Request) bool) *Refusal {
	r := &Refusal{}
	r.on.Store(true)
	c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !r.on.Load() || !match(req) {
			return nil, nil, false
		}
		r.refused.Add(1)
		r.first.CompareAndSwap(0, time.Now().UnixNano())
		switch req := req.(type) {
		case *kmsg.ProduceRequest:
			return ErrorResponse(req, code), nil, true
		case *kmsg.OffsetCommitRequest:
			return CommitErrorResponse(req, code), nil, true
		case *kmsg.JoinGroupRequest:
			return JoinErrorResponse(req, code), nil, true
		}
		panic(fmt.Sprintf("kfaketest: cannot refuse a %T", req))
	})
	return r
}

// Refused is how many requests were refused.
func (r *Refusal) Refused() int64 { return r.refused.Load() }

// FirstRefused is when the first request was refused; zero before any.
func (r *Refusal) FirstRefused() time.Time {
	if n := r.first.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Lift lets the requests through again.
func (r *Refusal) Lift() { r.on.Store(false) }
