package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/processor/cluster"
)

// ErrFenced is what a member that cannot prove its membership gets when
// it tries to produce or to save a checkpoint: its last confirmed
// heartbeat is too old, or the coordinator said its generation is over.
// See docs/fencing.md.
var ErrFenced = errors.New("membership not confirmed: fenced")

// Lease is a member's proof that it still belongs to one generation. The
// coordinator removes a member whose heartbeats stop for the session
// timeout (or, during a rebalance, the rebalance timeout), counted from the
// last heartbeat it received; a heartbeat answered without error was
// received after it was sent. So until the time of sending of the latest
// confirmed heartbeat plus the shorter of the two timeouts, no other member
// can own this member's partitions; the lease ends a margin before that.
// A member that stalls (GC pause, frozen VM, SIGSTOP) wakes up with an
// expired lease, whatever its goroutines had queued.
type Lease struct {
	client *kafka.Client
	group  string
	member string
	gen    int32
	window time.Duration // validity from a confirmed heartbeat's send time
	period time.Duration // between confirmations
	now    func() time.Duration
	log    *slog.Logger

	confirmed atomic.Int64 // now() at the send of the latest confirmed heartbeat, ns; -1: none yet
	revoked   atomic.Bool  // the coordinator answered that the generation is over

	mu    sync.Mutex // one confirmation at a time; guards coord
	coord net.Addr   // the group coordinator, nil until found
}

// Timing derives the window and period from the group's timeouts:
// the window ends a quarter before the coordinator could evict the member,
// and a confirmation is attempted every quarter, so a healthy member
// renews well before its lease ends even when one heartbeat is lost.
func Timing(session, rebalance time.Duration) (window, period time.Duration) {
	bound := min(session, rebalance)
	return bound - bound/4, bound / 4
}

// New returns the lease of generation gen, not yet confirmed: Confirm or
// Run confirms it. now is its monotonic clock (nil: the real one; tests
// move it).
func New(client *kafka.Client, gen *kafka.Generation, session, rebalance time.Duration, now func() time.Duration, log *slog.Logger) *Lease {
	if now == nil {
		base := time.Now() // carries the monotonic clock: wall-clock jumps do not move the lease
		now = func() time.Duration { return time.Since(base) }
	}
	window, period := Timing(session, rebalance)
	l := &Lease{client: client, group: gen.GroupID, member: gen.MemberID, gen: gen.ID,
		window: window, period: period, now: now, log: log}
	l.confirmed.Store(-1)
	return l
}

// Fence returns nil while the lease holds, else an error wrapping
// ErrFenced (partition.Membership).
func (l *Lease) Fence() error {
	if l.revoked.Load() {
		return fmt.Errorf("%w: generation %d is over", ErrFenced, l.gen)
	}
	c := l.confirmed.Load()
	if c < 0 {
		return fmt.Errorf("%w: generation %d not yet confirmed", ErrFenced, l.gen)
	}
	if age := l.now() - time.Duration(c); age >= l.window {
		return fmt.Errorf("%w: generation %d last confirmed %v ago (lease %v)", ErrFenced, l.gen, age.Round(time.Millisecond), l.window)
	}
	return nil
}

// Window is how long a confirmation keeps the lease valid.
func (l *Lease) Window() time.Duration { return l.window }

// Member and Generation name the membership the lease proves.
func (l *Lease) Member() string    { return l.member }
func (l *Lease) Generation() int32 { return l.gen }

// ConfirmedNow renews the lease as if a heartbeat sent now had been
// confirmed: for a lease whose membership is proven otherwise (tests).
func (l *Lease) ConfirmedNow() { l.confirmed.Store(int64(l.now())) }

// Confirm sends a heartbeat for the generation now and renews the lease
// from the time it was sent when the coordinator accepts it.
func (l *Lease) Confirm(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.coord == nil {
		res, err := l.client.FindCoordinator(ctx, &kafka.FindCoordinatorRequest{Key: l.group, KeyType: kafka.CoordinatorKeyTypeConsumer})
		if err == nil && res.Error != nil {
			err = res.Error
		}
		if err != nil {
			return fmt.Errorf("find coordinator of %s: %w", l.group, err)
		}
		l.coord = kafka.TCP(net.JoinHostPort(res.Coordinator.Host, strconv.Itoa(res.Coordinator.Port)))
	}
	sent := l.now()
	res, err := l.client.Heartbeat(ctx, &kafka.HeartbeatRequest{
		Addr: l.coord, GroupID: l.group, GenerationID: l.gen, MemberID: l.member,
	})
	if err == nil {
		err = heartbeatError(res)
	}
	switch {
	case err == nil:
		for {
			old := l.confirmed.Load()
			if int64(sent) <= old || l.confirmed.CompareAndSwap(old, int64(sent)) {
				return nil
			}
		}
	case errors.Is(err, kafka.IllegalGeneration), errors.Is(err, kafka.UnknownMemberId), errors.Is(err, kafka.FencedInstanceID):
		// A newer generation exists or the member was removed: nothing
		// this generation holds may be written any more.
		l.revoked.Store(true)
	case errors.Is(err, kafka.NotCoordinatorForGroup), errors.Is(err, kafka.GroupCoordinatorNotAvailable):
		l.coord = nil
	default:
		// Network errors and anything else: the connection may point to
		// a coordinator that moved.
		var kerr kafka.Error
		if !errors.As(err, &kerr) {
			l.coord = nil
		}
	}
	return fmt.Errorf("confirm generation %d of %s: %w", l.gen, l.group, err)
}

// heartbeatError is the error a Heartbeat response carries.
//
// kafka-go's Heartbeat response type declares ErrorCode before
// ThrottleTimeMs, but from version 1 on the broker writes the throttle
// time first. Decoded that way, ErrorCode is the throttle's upper half
// (0) and the error code ends up in the low 16 bits of the throttle
// milliseconds, so res.Error alone reads ILLEGAL_GENERATION or
// UNKNOWN_MEMBER_ID as a confirmation: a member that wakes up after
// being evicted would renew its lease with its first heartbeat and
// produce behind the new owner. A response confirms only when both
// places are clear. Should the decoding ever be right, a throttled
// answer is then not taken as a confirmation: that costs a renewal,
// never a duplicate.
func heartbeatError(res *kafka.HeartbeatResponse) error {
	if res.Error != nil {
		return res.Error
	}
	if code := int16(uint16(res.Throttle / time.Millisecond)); code != 0 {
		return kafka.Error(code)
	}
	return nil
}

// Run confirms the lease every period until ctx ends.
func (l *Lease) Run(ctx context.Context) {
	cluster.Every(ctx, l.period, func() bool {
		cctx, cancel := context.WithTimeout(ctx, l.period)
		err := l.Confirm(cctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			l.log.Debug("membership not confirmed", "err", err)
		}
		return true
	})
}
