// Package leader keeps a kafka.Transport's routing current when partition
// leaders move.
//
// kafka.Transport routes each request by the cluster metadata it caches for
// MetadataTTL (6 s by default) and does not refresh that cache when a
// broker answers that it no longer leads a partition: every retry within
// the TTL goes to the old leader and fails the same way. A writer's few
// retries are spent in well under that time, so one leader election (a
// broker restart, a reassignment, a preferred-leader election) surfaced as
// a failed produce, failed offset lookups and failed checkpoints. Transport
// drops the cache on such an answer, so the next attempt asks the cluster
// where the partition lives now.
package leader

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	fetchAPI "github.com/segmentio/kafka-go/protocol/fetch"
	listOffsetsAPI "github.com/segmentio/kafka-go/protocol/listoffsets"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
)

// minRefresh spaces refreshes: the answers of every partition a leader
// lost arrive together, and one refresh serves them all.
const minRefresh = 100 * time.Millisecond

// Transport is a kafka.RoundTripper over a *kafka.Transport that drops the
// transport's cached metadata (kafka.Transport.CloseIdleConnections: its
// pools hold the cache; requests in flight complete) when an answer says a
// leader moved.
type Transport struct {
	t       *kafka.Transport
	last    atomic.Int64 // UnixNano of the last refresh
	renewed atomic.Int64 // refreshes, for tests
}

// Follow wraps t.
func Follow(t *kafka.Transport) *Transport { return &Transport{t: t} }

// Refreshes is how many times the cached metadata was dropped.
func (f *Transport) Refreshes() int64 { return f.renewed.Load() }

// RoundTrip sends req on the wrapped transport. A read (list offsets,
// fetch) that a moved leader refused is sent once more after the refresh:
// it changes nothing, and its callers (a checkpoint, a partition's start)
// would otherwise fail for a routine election. A produce is not: the
// writer retries it by its own rules.
func (f *Transport) RoundTrip(ctx context.Context, addr net.Addr, req kafka.Request) (kafka.Response, error) {
	res, err := f.t.RoundTrip(ctx, addr, req)
	if !refused(res, err) {
		return res, err
	}
	f.refresh()
	switch req.(type) {
	case *listOffsetsAPI.Request, *fetchAPI.Request:
	default:
		return res, err
	}
	if res, err = f.t.RoundTrip(ctx, addr, req); !refused(res, err) {
		return res, err
	}
	// Refused again: the leader moved after the last refresh, which may
	// have been another answer's moments before, within the spacing. The
	// read refreshes for itself and is sent once more.
	f.drop(time.Now().UnixNano())
	return f.t.RoundTrip(ctx, addr, req)
}

// refused reports whether a round trip's outcome says a leader moved.
func refused(res kafka.Response, err error) bool {
	return moved(err) || (err == nil && answeredMoved(res))
}

// refresh drops the cached metadata unless that was done within
// minRefresh.
func (f *Transport) refresh() {
	now := time.Now().UnixNano()
	last := f.last.Load()
	if now-last < int64(minRefresh) || !f.last.CompareAndSwap(last, now) {
		return
	}
	f.drop(now)
}

// drop drops the cached metadata now.
func (f *Transport) drop(now int64) {
	f.last.Store(now)
	f.renewed.Add(1)
	f.t.CloseIdleConnections()
}

// moved reports the error codes that mean the partition's leader is not
// where the metadata says.
func moved(err error) bool {
	return errors.Is(err, kafka.NotLeaderForPartition) ||
		errors.Is(err, kafka.LeaderNotAvailable) ||
		errors.Is(err, kafka.FencedLeaderEpoch) ||
		errors.Is(err, kafka.UnknownLeaderEpoch)
}

func movedCode(code int16) bool {
	return code != 0 && moved(kafka.Error(code))
}

// answeredMoved looks into the responses that carry per-partition errors:
// produce, list offsets and fetch (what the stage's writers and admin
// requests send through a transport).
func answeredMoved(res kafka.Response) bool {
	switch r := res.(type) {
	case *produceAPI.Response:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if movedCode(p.ErrorCode) {
					return true
				}
			}
		}
	case *listOffsetsAPI.Response:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if movedCode(p.ErrorCode) {
					return true
				}
			}
		}
	case *fetchAPI.Response:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if movedCode(p.ErrorCode) {
					return true
				}
			}
		}
	}
	return false
}
