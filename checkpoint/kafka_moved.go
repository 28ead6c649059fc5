package checkpoint

import (
	"context"
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
// at home searches the other partitions; the snapshot found there is
// restored, and the first Save after it writes at home and tombstones the
// copies left behind, routed to their partition by partitionHeader (the
// balancer would send them home).

// partitionHeader names the checkpoint partition a record must go to,
// overriding the route by input partition.
const partitionHeader = "dedup-checkpoint-partition"

// movedFrom is where a Load found an input partition's snapshots away from
// home, and the highest seq there, so that the next Save numbers on.
type movedFrom struct {
	cp  int
	seq uint64
}

// candidates reads checkpoint partition cp and plans every snapshot of id
// it holds, newest first.
func (s *KafkaStore) candidates(ctx context.Context, cp int, id snapID) ([]*manifestLoc, []chunkPlan, []error, error) {
	pi := s.index(cp)
	defer pi.mu.Unlock()
	if err := s.refresh(ctx, pi, cp); err != nil {
		return nil, nil, nil, err
	}
	cands := pi.newest(id)
	plans := make([]chunkPlan, len(cands))
	planErrs := make([]error, len(cands))
	for i, loc := range cands {
		plans[i], planErrs[i] = s.plan(pi, loc)
	}
	return cands, plans, planErrs, nil
}

// locate returns the checkpoint partition holding id's snapshots and
// their plans: home when it holds any, else the first other partition
// that does (recorded for the next Save), else home with none.
func (s *KafkaStore) locate(ctx context.Context, id snapID) (int, []*manifestLoc, []chunkPlan, []error, error) {
	home := s.checkpointPartition(id.partition)
	cands, plans, planErrs, err := s.candidates(ctx, home, id)
	if err != nil || len(cands) > 0 {
		return home, cands, plans, planErrs, err
	}
	for cp := range s.nparts {
		if cp == home {
			continue
		}
		cands, plans, planErrs, err := s.candidates(ctx, cp, id)
		if err != nil {
			return cp, nil, nil, nil, err
		}
		if len(cands) == 0 {
			continue
		}
		var seq uint64
		for _, loc := range cands {
			seq = max(seq, loc.m.Meta.Seq)
		}
		s.mu.Lock()
		s.moved[id] = movedFrom{cp: cp, seq: seq}
		s.mu.Unlock()
		s.log.Warn("checkpoint found away from its checkpoint partition (partitions were added to the topic): "+
			"restoring it; the next checkpoint moves it", "topic", id.topic, "partition", id.partition,
			"found_in", cp, "home", home)
		return cp, cands, plans, planErrs, nil
	}
	return home, nil, nil, nil, nil
}

// movedSeq is the highest seq of id's snapshots away from home (0: none).
func (s *KafkaStore) movedSeq(id snapID) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.moved[id].seq
}

// retireMoved tombstones id's snapshots left away from home, once a Save
// has written one at home. A failure is only logged: the copies left are
// never read again while home holds a snapshot.
func (s *KafkaStore) retireMoved(ctx context.Context, id snapID) {
	s.mu.Lock()
	from, ok := s.moved[id]
	delete(s.moved, id)
	s.mu.Unlock()
	if !ok {
		return
	}
	pi := s.index(from.cp)
	defer pi.mu.Unlock()
	if err := s.refresh(ctx, pi, from.cp); err != nil {
		s.log.Warn("tombstone moved checkpoints", "topic", id.topic, "partition", id.partition, "err", err)
		return
	}
	var keys []string
	for _, loc := range pi.manifests[id] {
		keys = append(keys, loc.key)
	}
	for key, c := range pi.chunks {
		if c.id == id {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	route := []kafka.Header{{Key: partitionHeader, Value: strconv.AppendInt(nil, int64(from.cp), 10)}}
	tombs := make([]kafka.Message, len(keys))
	for i, k := range keys {
		tombs[i] = kafka.Message{Key: []byte(k), Headers: route}
	}
	if err := s.write(ctx, tombs...); err != nil {
		s.log.Warn("tombstone moved checkpoints", "topic", id.topic, "partition", id.partition, "err", err)
		return
	}
	s.log.Info("moved checkpoints tombstoned", "topic", id.topic, "partition", id.partition,
		"from", from.cp, "records", len(tombs))
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
