package checkpoint

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
)

// probeSegment follows the group prefix in a probe key:
//
//	<g>/!probe/<nonce>
//
// A probe key has two segments after the prefix where parseKey wants at
// least four, so restore, List and the Save index skip it like any foreign
// key; and '!' is outside Kafka's topic-name alphabet, so the segment can
// never be read as an input topic either.
const probeSegment = "!probe"

func (s *KafkaStore) probeKey(nonce string) string {
	return s.prefix + probeSegment + "/" + nonce
}

// Probe checks that every partition of the checkpoint topic takes a write
// and gives it back: it writes a probe record (acknowledged by all in-sync
// replicas) to each partition, reads it back at its offset, and tombstones
// it, so compaction removes it. Probe records are never taken for
// snapshots (see probeSegment). It returns the partitions probed and every
// failure, by partition.
func (s *KafkaStore) Probe(ctx context.Context) (int, error) {
	var errs []error
	for cp := range s.nparts {
		if err := s.probe(ctx, cp); err != nil {
			errs = append(errs, fmt.Errorf("checkpoint partition %d: %w", cp, err))
		}
	}
	return s.nparts, errors.Join(errs...)
}

func (s *KafkaStore) probe(ctx context.Context, cp int) (err error) {
	nonceBytes := make([]byte, 8)
	rand.Read(nonceBytes)
	nonce := hex.EncodeToString(nonceBytes)
	key := []byte(s.probeKey(nonce))
	value := []byte("dedup check probe " + time.Now().UTC().Format(time.RFC3339Nano))

	trace := &saveTrace{}
	s.saves.Store(nonce, trace)
	defer s.saves.Delete(nonce)
	headers := []kafka.Header{
		{Key: saveHeader, Value: []byte(nonce)},
		{Key: partitionHeader, Value: []byte(strconv.Itoa(cp))},
	}
	if err := s.write(ctx, kafka.Message{Key: key, Value: value, Headers: headers}); err != nil {
		return fmt.Errorf("write probe: %w", err)
	}
	// Written, so tombstoned whatever the read-back says.
	defer func() {
		if terr := s.write(ctx, kafka.Message{Key: key, Headers: headers}); terr != nil {
			err = errors.Join(err, fmt.Errorf("tombstone probe: %w", terr))
		}
	}()
	trace.mu.Lock()
	off, ok := trace.min, trace.count == 1
	trace.mu.Unlock()
	if !ok {
		return errors.New("write probe: no offset acknowledged")
	}
	found := false
	err = readRange(ctx, s.client, s.topic, cp, off, off+1, s.wait, func(rec *kafka.Record) error {
		k, err := kafka.ReadAll(rec.Key)
		if err != nil {
			return err
		}
		var v []byte
		if rec.Value != nil {
			if v, err = kafka.ReadAll(rec.Value); err != nil {
				return err
			}
		}
		found = rec.Offset == off && bytes.Equal(k, key) && bytes.Equal(v, value)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read probe back at offset %d: %w", off, err)
	}
	if !found {
		return fmt.Errorf("read probe back at offset %d: another record is there", off)
	}
	return nil
}
