package assignment

import (
	"log/slog"
	"slices"
	"sync"

	"github.com/segmentio/kafka-go"
)

// ProtocolName is the name the group protocol is registered under. It is
// not Kafka's "sticky": the user data format is this package's own, and a
// Java client offering "sticky" in the same group must not be decoded as
// one of ours.
const ProtocolName = "dedup-sticky"

// Sticky is a kafka.GroupBalancer that keeps each partition with its
// previous owner where balance allows. Each topic's partitions are shared
// among its subscribers n/m or n/m+1 each (max − min ≤ 1 per topic), and
// the partitions that change owner are the fewest any such assignment
// allows. Of two members reporting the same partition the one with the
// higher generation is its previous owner. The assignment depends only on
// the members, their reports and the partitions, not on their order.
// Every member of the
// group needs its own Sticky, fed by Record at the start of each
// generation; the zero value is ready to use and reports no previous
// assignment. It is safe for concurrent use.
type Sticky struct {
	// Log receives a warning for each member whose user data is ignored;
	// nil means slog.Default().
	Log *slog.Logger

	mu    sync.Mutex
	owned ownership
	known bool
}

var _ kafka.GroupBalancer = (*Sticky)(nil)

// ProtocolName implements kafka.GroupBalancer.
func (s *Sticky) ProtocolName() string { return ProtocolName }

// Record notes the partitions this member holds in gen, for UserData to
// report when the member joins the next generation. Call it once per
// generation, before its partitions are processed.
func (s *Sticky) Record(gen *kafka.Generation) {
	topics := make(map[string][]int, len(gen.Assignments))
	for t, as := range gen.Assignments {
		ps := make([]int, 0, len(as))
		for _, a := range as {
			ps = append(ps, a.ID)
		}
		slices.Sort(ps)
		topics[t] = slices.Compact(ps)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owned = ownership{gen: gen.ID, topics: topics}
	s.known = true
}

// UserData implements kafka.GroupBalancer: the last recorded assignment,
// or nothing before the first generation.
func (s *Sticky) UserData() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.known {
		return nil, nil
	}
	return s.owned.appendTo(nil), nil
}

// AssignGroups implements kafka.GroupBalancer; it runs on the member the
// coordinator elected leader.
func (s *Sticky) AssignGroups(members []kafka.GroupMember, partitions []kafka.Partition) kafka.GroupMemberAssignments {
	log := s.Log
	if log == nil {
		log = slog.Default()
	}
	reports := make(map[string]ownership, len(members))
	for _, m := range members {
		if len(m.UserData) == 0 {
			continue
		}
		o, err := decodeOwnership(m.UserData)
		if err != nil {
			log.Warn("ignore previous assignment", "member", m.ID, "err", err)
			continue
		}
		reports[m.ID] = o
	}
	return assign(members, partitions, reports)
}
