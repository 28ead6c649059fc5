package assignment

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"
)

func member(id string, report []byte, topics ...string) kafka.GroupMember {
	return kafka.GroupMember{ID: id, Topics: topics, UserData: report}
}

func report(gen int32, topics map[string][]int) []byte {
	return ownership{gen: gen, topics: topics}.appendTo(nil)
}

func parts(topic string, n int) []kafka.Partition {
	ps := make([]kafka.Partition, n)
	for i := range ps {
		ps[i] = kafka.Partition{Topic: topic, ID: i}
	}
	return ps
}

func TestStickyAssignGroups(t *testing.T) {
	cases := []struct {
		name       string
		members    []kafka.GroupMember
		partitions []kafka.Partition
		want       kafka.GroupMemberAssignments
	}{
		{
			name:       "no reports: shares in member order",
			members:    []kafka.GroupMember{member("m3", nil, "in"), member("m1", nil, "in"), member("m2", nil, "in")},
			partitions: parts("in", 7),
			want: kafka.GroupMemberAssignments{
				"m1": {"in": {0, 1, 2}}, "m2": {"in": {3, 4}}, "m3": {"in": {5, 6}},
			},
		},
		{
			name: "a member joins: each keeps what its share allows",
			members: []kafka.GroupMember{
				member("m1", report(5, map[string][]int{"in": {0, 2, 4}}), "in"),
				member("m2", report(5, map[string][]int{"in": {1, 3, 5}}), "in"),
				member("m0", nil, "in"),
			},
			partitions: parts("in", 6),
			want: kafka.GroupMemberAssignments{
				"m0": {"in": {4, 5}}, "m1": {"in": {0, 2}}, "m2": {"in": {1, 3}},
			},
		},
		{
			name: "a member leaves: its partitions are shared, nothing else moves",
			members: []kafka.GroupMember{
				member("m1", report(5, map[string][]int{"in": {0, 5}}), "in"),
				member("m3", report(5, map[string][]int{"in": {1, 4}}), "in"),
			},
			partitions: parts("in", 6),
			want: kafka.GroupMemberAssignments{
				"m1": {"in": {0, 2, 5}}, "m3": {"in": {1, 3, 4}},
			},
		},
		{
			name: "the larger share goes to the member that held more",
			members: []kafka.GroupMember{
				member("m1", report(5, map[string][]int{"in": {0}}), "in"),
				member("m2", report(5, map[string][]int{"in": {1, 2, 3, 4}}), "in"),
			},
			partitions: parts("in", 5),
			want: kafka.GroupMemberAssignments{
				"m1": {"in": {0, 4}}, "m2": {"in": {1, 2, 3}},
			},
		},
		{
			name: "a fresher report wins over a stale one",
			members: []kafka.GroupMember{
				member("m1", report(3, map[string][]int{"in": {0, 1, 2, 3}}), "in"),
				member("m2", report(4, map[string][]int{"in": {0, 1}}), "in"),
			},
			partitions: parts("in", 4),
			want: kafka.GroupMemberAssignments{
				"m1": {"in": {2, 3}}, "m2": {"in": {0, 1}},
			},
		},
		{
			name: "equal generations: the lowest member ID wins",
			members: []kafka.GroupMember{
				member("m2", report(4, map[string][]int{"in": {0, 1}}), "in"),
				member("m1", report(4, map[string][]int{"in": {1}}), "in"),
			},
			partitions: parts("in", 2),
			want: kafka.GroupMemberAssignments{
				"m1": {"in": {1}}, "m2": {"in": {0}},
			},
		},
		{
			name: "malformed and unknown reports are ignored",
			members: []kafka.GroupMember{
				member("m1", []byte{0xff, 1, 2}, "in"),
				member("m2", report(9, map[string][]int{"in": {0, 1, 2}})[:7], "in"),
				member("m3", append([]byte{2}, report(9, map[string][]int{"in": {0, 1, 2}})[1:]...), "in"),
			},
			partitions: parts("in", 3),
			want: kafka.GroupMemberAssignments{
				"m1": {"in": {0}}, "m2": {"in": {1}}, "m3": {"in": {2}},
			},
		},
		{
			name: "claims on vanished partitions and unsubscribed topics are ignored",
			members: []kafka.GroupMember{
				member("m1", report(2, map[string][]int{"in": {7, 8}, "other": {0}}), "in"),
				member("m2", report(2, map[string][]int{"in": {1}}), "in"),
			},
			partitions: append(parts("in", 2), parts("other", 1)...),
			want: kafka.GroupMemberAssignments{
				"m1": {"in": {0}}, "m2": {"in": {1}},
			},
		},
		{
			name: "several topics: each balanced among its subscribers",
			members: []kafka.GroupMember{
				member("m1", nil, "a", "b"),
				member("m2", nil, "a"),
				member("m3", nil, "b"),
				member("m4", nil),
			},
			partitions: append(parts("a", 3), parts("b", 3)...),
			want: kafka.GroupMemberAssignments{
				// a: m1 and m2 hold nothing yet, m1 first by ID. b: m3
				// holds less than m1, so it takes the larger share.
				"m1": {"a": {0, 1}, "b": {0}}, "m2": {"a": {2}}, "m3": {"b": {1, 2}}, "m4": {},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var log bytes.Buffer
			s := &Sticky{Log: slog.New(slog.NewTextHandler(&log, nil))}
			got := s.AssignGroups(c.members, c.partitions)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got  %v\nwant %v", got, c.want)
			}
			// Each ignored report is logged, naming its member.
			for _, m := range c.members {
				_, err := decodeOwnership(m.UserData)
				logged := strings.Contains(log.String(), "member="+m.ID+" ")
				if ignored := len(m.UserData) > 0 && err != nil; logged != ignored {
					t.Errorf("member %s: report ignored %v, logged %v:\n%s", m.ID, ignored, logged, log.String())
				}
			}
		})
	}
}

// TestStickyReportsRecordedAssignment: UserData reports nothing before the
// first generation, then the generation Record saw.
func TestStickyReportsRecordedAssignment(t *testing.T) {
	var s Sticky
	if b, err := s.UserData(); err != nil || b != nil {
		t.Fatalf("before any generation: %x, %v", b, err)
	}
	s.Record(&kafka.Generation{ID: 12, Assignments: map[string][]kafka.PartitionAssignment{
		"in": {{ID: 4, Offset: 100}, {ID: 1, Offset: -2}},
	}})
	b, err := s.UserData()
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeOwnership(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := (ownership{gen: 12, topics: map[string][]int{"in": {1, 4}}}); !reflect.DeepEqual(got, want) {
		t.Fatalf("reported %+v, want %+v", got, want)
	}
}

// group simulates a consumer group: each member has its own Sticky, the
// leader assigns from the members' user data, and every member records
// what it got, as the processor does at the start of a generation.
type group struct {
	rng        *rand.Rand
	gen        int32
	members    map[string]*simMember
	partitions map[string]int // topic → partition count
	last       kafka.GroupMemberAssignments
	next       int
}

type simMember struct {
	topics []string
	bal    *Sticky
	stale  bool // missed the start of the last generation
}

var subscriptions = [][]string{{"a"}, {"a"}, {"a", "b"}, {"b"}}

func (g *group) join() {
	g.next++
	id := fmt.Sprintf("%04x-%d", g.rng.IntN(1<<16), g.next) // random ID order
	g.members[id] = &simMember{
		topics: subscriptions[g.rng.IntN(len(subscriptions))],
		bal:    &Sticky{Log: slog.New(slog.DiscardHandler)},
	}
}

func (g *group) leave() {
	ids := g.ids()
	delete(g.members, ids[g.rng.IntN(len(ids))])
}

func (g *group) ids() []string {
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// step runs one generation and checks its assignment.
func (g *group) step(t *testing.T, i int) {
	g.gen++
	fresh := true
	var members []kafka.GroupMember
	for _, id := range g.ids() {
		m := g.members[id]
		fresh = fresh && !m.stale
		ud, err := m.bal.UserData()
		if err != nil {
			t.Fatal(err)
		}
		switch g.rng.IntN(20) {
		case 0: // garbage
			ud = []byte(fmt.Sprintf("garbage %d", g.rng.IntN(1000)))
			fresh = false
		case 1: // truncated
			if len(ud) > 1 {
				ud = ud[:g.rng.IntN(len(ud))]
				fresh = false
			}
		}
		members = append(members, kafka.GroupMember{ID: id, Topics: m.topics, UserData: ud})
	}
	var partitions []kafka.Partition
	for tp, n := range g.partitions {
		partitions = append(partitions, parts(tp, n)...)
	}
	g.rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	g.rng.Shuffle(len(partitions), func(i, j int) { partitions[i], partitions[j] = partitions[j], partitions[i] })
	ids := g.ids()
	leader := g.members[ids[g.rng.IntN(len(ids))]].bal
	got := leader.AssignGroups(members, partitions)

	// Deterministic: another member, other orders, the same assignment.
	slices.Reverse(members)
	slices.Reverse(partitions)
	if again := g.members[ids[0]].bal.AssignGroups(members, partitions); !reflect.DeepEqual(got, again) {
		t.Fatalf("step %d: assignment depends on the leader or the order:\n%v\n%v", i, got, again)
	}
	g.check(t, i, members, got, fresh)

	for _, id := range ids {
		// Now and then a member misses the start of a generation (its
		// session expired, say): its next report is stale.
		g.members[id].stale = g.rng.IntN(25) == 0
		if g.members[id].stale {
			continue
		}
		as := map[string][]kafka.PartitionAssignment{}
		for tp, ps := range got[id] {
			for _, p := range ps {
				as[tp] = append(as[tp], kafka.PartitionAssignment{ID: p})
			}
		}
		g.members[id].bal.Record(&kafka.Generation{ID: g.gen, Assignments: as})
	}
	g.last = got
}

func (g *group) check(t *testing.T, i int, members []kafka.GroupMember, got kafka.GroupMemberAssignments, fresh bool) {
	for tp, n := range g.partitions {
		var subs []string
		for _, m := range members {
			if slices.Contains(m.Topics, tp) {
				subs = append(subs, m.ID)
			}
		}
		if len(subs) == 0 {
			continue
		}
		// Exactly once, to subscribers only.
		owner := make([]string, n)
		for id, byTopic := range got {
			for _, p := range byTopic[tp] {
				if !slices.Contains(subs, id) {
					t.Fatalf("step %d: %s/%d to %s, which does not subscribe to it", i, tp, p, id)
				}
				if p < 0 || p >= n || owner[p] != "" {
					t.Fatalf("step %d: %s/%d assigned twice or does not exist: %v", i, tp, p, got)
				}
				owner[p] = id
			}
		}
		counts := make([]int, 0, len(subs))
		for p, id := range owner {
			if id == "" {
				t.Fatalf("step %d: %s/%d unassigned: %v", i, tp, p, got)
			}
		}
		for _, id := range subs {
			counts = append(counts, len(got[id][tp]))
		}
		if slices.Max(counts)-slices.Min(counts) > 1 {
			t.Fatalf("step %d: %s unbalanced: %v", i, tp, got)
		}
		if !fresh || g.last == nil {
			continue
		}
		// Least movement: no balanced assignment keeps more partitions
		// with their previous owner (found by trying every choice of the
		// members that get the larger shares).
		prev := map[string]int{}
		kept := 0
		for _, id := range subs {
			for _, p := range g.last[id][tp] {
				if p < n {
					prev[id]++
					if slices.Contains(got[id][tp], p) {
						kept++
					}
				}
			}
		}
		base, extra := n/len(subs), n%len(subs)
		best := 0
		for mask := 0; mask < 1<<len(subs); mask++ {
			if popcount(mask) != extra {
				continue
			}
			k := 0
			for j, id := range subs {
				share := base
				if mask&(1<<j) != 0 {
					share++
				}
				k += min(prev[id], share)
			}
			best = max(best, k)
		}
		if kept != best {
			t.Fatalf("step %d: %s kept %d partitions with their owner, a balanced assignment keeps %d\nprevious %v\ngot %v", i, tp, kept, best, g.last, got)
		}
	}
}

func popcount(x int) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// TestStickyMembershipChanges drives groups through random sequences of
// joins, departures, growing topics, garbled and stale reports, checking
// at every generation that each partition is assigned exactly once, that
// each topic is balanced, that the assignment is deterministic, and, when
// every report is current, that no balanced assignment moves fewer
// partitions.
func TestStickyMembershipChanges(t *testing.T) {
	for seed := range uint64(150) {
		g := &group{
			rng:        rand.New(rand.NewPCG(seed, 16)),
			members:    map[string]*simMember{},
			partitions: map[string]int{"a": 1 + int(seed%12), "b": int(seed % 5)},
		}
		g.join()
		for i := range 40 {
			switch r := g.rng.IntN(10); {
			case r < 3 && len(g.members) < 8:
				g.join()
			case r < 5 && len(g.members) > 1:
				g.leave()
			case r == 5:
				g.partitions["a"] += 1 + g.rng.IntN(3)
			case r == 6 && len(g.members) < 7:
				g.join() // two changes in one generation
				g.leave()
			}
			g.step(t, i)
		}
	}
}
