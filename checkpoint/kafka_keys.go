package checkpoint

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// The key scheme of the checkpoint topic. Every record key starts with
// "<group>/<topic>/<partition>/" (group path-escaped, so it holds no '/'):
//
//	<g>/<t>/<p>/c/<seq>/<nonce>/<n>   chunk n of piece seq, base or increment (value: stored bytes)
//	<g>/<t>/<p>/m/<seq>               manifest of base seq (value: JSON)
//	<g>/<t>/<p>/i/<seq>/<base>        manifest of increment seq of base <base> (value: JSON)
//	<g>/!probe/<nonce>                a probe of `dedup check`, tombstoned at once (kafka_probe.go)
//
// seq and base are zero-padded to 20 digits, n to 6. Bases and increments
// share the partition's seq numbers. An increment's manifest key names its
// base, so that the index attributes it to its chain even when its value
// cannot be decoded, and so that a binary that predates chains (which
// reads only m/ manifests) never takes an increment for a snapshot. The nonce is random per Save, so
// two writers that pick the same seq never overwrite each other's chunks; the
// later manifest wins, as compaction would decide. Chunks are written before
// their manifest, so a manifest is only ever visible after its chunks.
// Superseded manifests and their chunks (and chunks no manifest refers to)
// are tombstoned, so compaction keeps the last Keep bases per partition
// with their increments; a base's increments are tombstoned with it.
// Input partition p goes to checkpoint partition p % (partitions of the
// topic), so a restore reads only that checkpoint partition, and the others
// only when it holds none (partitions added since: kafka_moved.go).

// snapID names the snapshots of one input partition.
type snapID struct {
	topic     string
	partition int
}

func (s *KafkaStore) snapPrefix(id snapID) string {
	return fmt.Sprintf("%s%s/%d/", s.prefix, id.topic, id.partition)
}

func (s *KafkaStore) manifestKey(id snapID, seq uint64) string {
	return fmt.Sprintf("%sm/%020d", s.snapPrefix(id), seq)
}

// incKey is the manifest key of increment seq of base.
func (s *KafkaStore) incKey(id snapID, seq, base uint64) string {
	return fmt.Sprintf("%si/%020d/%020d", s.snapPrefix(id), seq, base)
}

// pieceKey is the manifest key of piece seq of base (0: seq is a base).
func (s *KafkaStore) pieceKey(id snapID, seq, base uint64) string {
	if base == 0 {
		return s.manifestKey(id, seq)
	}
	return s.incKey(id, seq, base)
}

func (s *KafkaStore) chunkKey(id snapID, seq uint64, nonce string, n int) string {
	return fmt.Sprintf("%sc/%020d/%s/%06d", s.snapPrefix(id), seq, nonce, n)
}

// parsedKey is a record key of this store's group.
type parsedKey struct {
	id       snapID
	manifest bool
	seq      uint64
	base     uint64 // of an increment's manifest (0: a base's, or a chunk)
	nonce    string
	n        int
}

func (s *KafkaStore) parseKey(key string) (parsedKey, bool) {
	rest, ok := strings.CutPrefix(key, s.prefix)
	if !ok {
		return parsedKey{}, false
	}
	f := strings.Split(rest, "/")
	if len(f) < 4 {
		return parsedKey{}, false
	}
	var k parsedKey
	var err error
	k.id.topic = f[0]
	if k.id.partition, err = strconv.Atoi(f[1]); err != nil {
		return parsedKey{}, false
	}
	if k.seq, err = strconv.ParseUint(f[3], 10, 64); err != nil {
		return parsedKey{}, false
	}
	switch {
	case f[2] == "m" && len(f) == 4:
		k.manifest = true
	case f[2] == "i" && len(f) == 5:
		k.manifest = true
		if k.base, err = strconv.ParseUint(f[4], 10, 64); err != nil || k.base == 0 || k.base >= k.seq {
			return parsedKey{}, false
		}
	case f[2] == "c" && len(f) == 6:
		k.nonce = f[4]
		if k.n, err = strconv.Atoi(f[5]); err != nil {
			return parsedKey{}, false
		}
	default:
		return parsedKey{}, false
	}
	return k, true
}

// inputPartition reads the input partition from any key of the layout.
func inputPartition(key []byte) (int, bool) {
	f := bytes.SplitN(key, []byte("/"), 4)
	if len(f) < 4 {
		return 0, false
	}
	p, err := strconv.Atoi(string(f[2]))
	return p, err == nil && p >= 0
}

func (s *KafkaStore) checkpointPartition(inputPartition int) int { return inputPartition % s.nparts }
