package assignment

import (
	"cmp"
	"slices"

	"github.com/segmentio/kafka-go"
)

// assign gives every partition of every topic a member subscribes to to
// exactly one of its subscribers, topic by topic:
//
//   - Balance: a topic's n partitions over its m subscribers give each
//     n/m or n/m+1 of them (max − min ≤ 1 per topic).
//   - Stickiness: a partition stays with its previous owner unless that
//     owner holds more than its share; the owners that held more than n/m
//     get the n%m larger shares first, so the number of partitions that
//     change owner is the least any balanced assignment allows.
//   - The previous owner of a partition is the subscriber whose report
//     names it with the highest generation (the lowest member ID among
//     equals): a stale report loses to a fresher one.
//   - Where stickiness does not decide, the larger shares go to the
//     members holding the fewest partitions of the topics before it (by
//     name), then to the lowest member IDs, and free partitions fill the
//     members in ID order, lowest partitions first.
//
// The result depends only on the sets given, not on their order. Every
// member appears in it, with an empty map when it gets nothing.
func assign(members []kafka.GroupMember, partitions []kafka.Partition, reports map[string]ownership) kafka.GroupMemberAssignments {
	members = slices.SortedFunc(slices.Values(members), func(a, b kafka.GroupMember) int { return cmp.Compare(a.ID, b.ID) })
	members = slices.CompactFunc(members, func(a, b kafka.GroupMember) bool { return a.ID == b.ID })

	subscribers := map[string][]string{} // topic → member IDs, sorted
	for _, m := range members {
		for _, t := range m.Topics {
			if !slices.Contains(subscribers[t], m.ID) {
				subscribers[t] = append(subscribers[t], m.ID)
			}
		}
	}
	byTopic := map[string][]int{}
	for _, p := range partitions {
		if _, ok := subscribers[p.Topic]; ok {
			byTopic[p.Topic] = append(byTopic[p.Topic], p.ID)
		}
	}

	out := make(kafka.GroupMemberAssignments, len(members))
	held := make(map[string]int, len(members)) // partitions so far, all topics
	for _, m := range members {
		out[m.ID] = map[string][]int{}
	}
	topics := make([]string, 0, len(byTopic))
	for t := range byTopic {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	for _, t := range topics {
		ps := slices.Compact(slices.Sorted(slices.Values(byTopic[t])))
		for id, got := range assignTopic(t, ps, subscribers[t], reports, held) {
			out[id][t] = got
			held[id] += len(got)
		}
	}
	return out
}

// assignTopic shares the sorted partitions ps of topic t among its sorted
// subscribers subs.
func assignTopic(t string, ps []int, subs []string, reports map[string]ownership, held map[string]int) map[string][]int {
	// The previous owner of each partition that still exists, among the
	// subscribers.
	type claim struct {
		member string
		gen    int32
	}
	exists := make(map[int]bool, len(ps))
	for _, p := range ps {
		exists[p] = true
	}
	owner := map[int]claim{}
	for _, id := range subs {
		r, ok := reports[id]
		if !ok {
			continue
		}
		for _, p := range r.topics[t] {
			if !exists[p] {
				continue
			}
			c, taken := owner[p]
			// subs is sorted, so among equal generations the first
			// (lowest ID) claim stays.
			if !taken || r.gen > c.gen {
				owner[p] = claim{member: id, gen: r.gen}
			}
		}
	}
	prev := make(map[string][]int, len(subs)) // sorted, as ps is
	for _, p := range ps {
		if c, ok := owner[p]; ok {
			prev[c.member] = append(prev[c.member], p)
		}
	}

	// Shares: n/m each, and n%m members get one more. A larger share keeps
	// one more partition only for a member that held more than n/m, so
	// those come first.
	base, extra := len(ps)/len(subs), len(ps)%len(subs)
	order := slices.Clone(subs)
	slices.SortStableFunc(order, func(a, b string) int {
		ga, gb := len(prev[a]) > base, len(prev[b]) > base
		switch {
		case ga && !gb:
			return -1
		case gb && !ga:
			return 1
		}
		return cmp.Compare(held[a], held[b]) // then subs' ID order
	})
	share := make(map[string]int, len(subs))
	for i, id := range order {
		share[id] = base
		if i < extra {
			share[id]++
		}
	}

	// Each member keeps what it held, up to its share; the rest is free.
	got := make(map[string][]int, len(subs))
	kept := make(map[int]bool, len(ps))
	for _, id := range subs {
		keep := prev[id][:min(len(prev[id]), share[id])]
		got[id] = slices.Clone(keep)
		for _, p := range keep {
			kept[p] = true
		}
	}
	free := ps[:0:0]
	for _, p := range ps {
		if !kept[p] {
			free = append(free, p)
		}
	}
	for _, id := range subs {
		n := share[id] - len(got[id])
		got[id] = append(got[id], free[:n]...)
		free = free[n:]
		slices.Sort(got[id])
	}
	return got
}
