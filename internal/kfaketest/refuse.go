package kfaketest

import (
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Refusal is a control that refuses every request of one key until Lift.
type Refusal struct {
	on      atomic.Bool
	refused atomic.Int64
}

// Refuse makes c answer every Produce or OffsetCommit request (key) with
// the error code for all of its partitions (ErrorResponse,
// CommitErrorResponse) from now until Lift.
func Refuse(c *kfake.Cluster, key kmsg.Key, code int16) *Refusal {
	r := &Refusal{}
	r.on.Store(true)
	c.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !r.on.Load() {
			return nil, nil, false
		}
		r.refused.Add(1)
		switch req := req.(type) {
		case *kmsg.ProduceRequest:
			return ErrorResponse(req, code), nil, true
		case *kmsg.OffsetCommitRequest:
			return CommitErrorResponse(req, code), nil, true
		}
		panic(fmt.Sprintf("kfaketest: cannot refuse a %T", req))
	})
	return r
}

// Refused is how many requests were refused.
func (r *Refusal) Refused() int64 { return r.refused.Load() }

// Lift lets the requests through again.
func (r *Refusal) Lift() { r.on.Store(false) }
