package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/segmentio/kafka-go"
)

// Snapshots found away from their checkpoint partition.
//
// Input partition p's snapshots go to checkpoint partition p % n, n the
// topic's partition count when the store starts. Partitions added to the
// checkpoint topic change n, so after a restart some input partitions look
// in a partition that never held their snapshots. A Load that finds none
// at home searches every other partition and ranks what it finds together
// (copies of an earlier move whose tombstones failed may be among them); the
// newest is restored, and the first Save after it writes at home and
// tombstones the copies left behind, routed to their partition by
// partitionHeader (the balancer would send them home).

// partitionHeader names the checkpoint partition a record must go to,
// overriding the route by input partition.
const partitionHeader = "dedup-checkpoint-partition"

// movedFrom is where a Load found an input partition's snapshots away from
// home: the checkpoint partitions still holding copies, and the highest seq
// among them, so that the next Save numbers on. It stays until tombstones
// have reached every one of those partitions.
type movedFrom struct {
	cps []int
	seq uint64
}

// candidate is a snapshot found in checkpoint partition cp, planned for
// reading (err: the plan failed).
type candidate struct {
	cp   int
	loc  *manifestLoc
	plan chunkPlan
	err  error
}

// candidates reads checkpoint partition cp and plans every snapshot of id
// it holds, newest first.
func (s *KafkaStore) candidates(ctx context.Context, cp int, id snapID) ([]candidate, error) {
	pi := s.index(cp)
	defer pi.mu.Unlock()
	if err := s.refresh(ctx, pi, cp); err != nil {
		return nil, err
	}
	var cands []candidate
	for _, loc := range pi.newest(id) {
		plan, err := s.plan(pi, loc)
		cands = append(cands, candidate{cp: cp, loc: loc, plan: plan, err: err})
	}
	return cands, nil
}

// locate returns id's snapshots, newest first: those at home when it holds
// any, else those of every other checkpoint partition ranked together, so
// that a copy left behind by an earlier move never wins over a newer one
// (the move is recorded for the next Save).
func (s *KafkaStore) locate(ctx context.Context, id snapID) ([]candidate, error) {
	home := s.checkpointPartition(id.partition)
	cands, err := s.candidates(ctx, home, id)
	if err != nil || len(cands) > 0 {
		return cands, err
	}
	from := movedFrom{}
	for cp := range s.nparts {
		if cp == home {
			continue
		}
		found, err := s.candidates(ctx, cp, id)
		if err != nil {
			return nil, err
		}
		if len(found) > 0 {
			from.cps = append(from.cps, cp)
		}
		for _, c := range found {
			from.seq = max(from.seq, c.loc.m.Meta.Seq)
		}
		cands = append(cands, found...)
	}
	if len(cands) == 0 {
		return nil, nil
	}
	slices.SortStableFunc(cands, func(a, b candidate) int { return newestFirst(a.loc, b.loc) })
	s.mu.Lock()
	s.moved[id] = from
	s.mu.Unlock()
	s.log.Warn("checkpoint found away from its checkpoint partition (partitions were added to the topic): "+
		"restoring it; the next checkpoint moves it", "topic", id.topic, "partition", id.partition,
		"found_in", from.cps, "newest_in", cands[0].cp, "home", home)
	return cands, nil
}

// movedSeq is the highest seq of id's snapshots away from home (0: none).
func (s *KafkaStore) movedSeq(id snapID) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.moved[id].seq
}

// retireMoved tombstones id's snapshots left away from home, once a Save
// has written one at home. A partition whose tombstones fail stays in the
// move for the next Save to try again; meanwhile the copies there are not
// read while home holds a snapshot, and lose to it on rank if partitions
// are added again.
func (s *KafkaStore) retireMoved(ctx context.Context, id snapID) {
	s.mu.Lock()
	from, ok := s.moved[id]
	s.mu.Unlock()
	if !ok {
		return
	}
	var left []int
	for _, cp := range from.cps {
		if err := s.tombstoneAway(ctx, cp, id); err != nil {
			s.log.Warn("tombstone moved checkpoints; the next checkpoint tries again", "topic", id.topic,
				"partition", id.partition, "checkpoint_partition", cp, "err", err)
			left = append(left, cp)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(left) == 0 {
		delete(s.moved, id)
		return
	}
	from.cps = left
	s.moved[id] = from
}

// tombstoneAway tombstones every record of id in checkpoint partition cp.
func (s *KafkaStore) tombstoneAway(ctx context.Context, cp int, id snapID) error {
	pi := s.index(cp)
	defer pi.mu.Unlock()
	if err := s.refresh(ctx, pi, cp); err != nil {
		return err
	}
	var keys []string
	damaged := map[string]bool{} // seq/nonce of damaged manifests, whose chunks stay too
	for _, loc := range pi.manifests[id] {
		err := s.verifyIndexed(pi, loc)
		if loc.base != 0 && errors.Is(err, ErrMissing) && !s.isReported(loc) {
			// Superseded by the pieces at home like every copy here, and
			// its chunks pruned by another writer: no damage.
			s.staleFound(id, loc, "moved home, its chunks gone")
			keys = append(keys, loc.key)
			continue
		}
		if err != nil || s.isReported(loc) {
			// Kept for inspection like any damaged snapshot, never
			// tombstoned with the moved copies.
			if err != nil {
				s.damaged(ctx, id, loc, err)
			}
			damaged[fmt.Sprintf("%d/%s", loc.m.Meta.Seq, loc.m.Nonce)] = true
			s.log.Warn("damaged checkpoint left in place: not tombstoned with the moved copies", "key", loc.key,
				"topic", id.topic, "partition", id.partition)
			continue
		}
		keys = append(keys, loc.key)
	}
	for key, c := range pi.chunks {
		if c.id == id && !damaged[fmt.Sprintf("%d/%s", c.seq, c.nonce)] {
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	route := []kafka.Header{{Key: partitionHeader, Value: strconv.AppendInt(nil, int64(cp), 10)}}
	tombs := make([]kafka.Message, len(keys))
	for i, k := range keys {
		tombs[i] = kafka.Message{Key: []byte(k), Headers: route}
	}
	if err := s.write(ctx, tombs...); err != nil {
		return err
	}
	s.log.Info("moved checkpoints tombstoned", "topic", id.topic, "partition", id.partition,
		"from", cp, "records", len(tombs))
	return nil
}

// routed returns the checkpoint partition msg's partitionHeader names.
func routed(msg kafka.Message) (int, bool) {
	for _, h := range msg.Headers {
		if h.Key == partitionHeader {
			cp, err := strconv.Atoi(string(h.Value))
			return cp, err == nil
		}
	}
	return 0, false
}
