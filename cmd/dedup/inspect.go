package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/checkpoint"
	"dedup/internal/config"
	"dedup/internal/service"
	"dedup/processor/partition"
	"dedup/rotation"
)

// snapshotReader is what inspect needs of a checkpoint store: the list of
// snapshots with their verdicts, and the state behind each.
type snapshotReader interface {
	List(ctx context.Context) ([]checkpoint.Entry, error)
	Open(ctx context.Context, e checkpoint.Entry) (io.ReadCloser, error)
}

// Both stores can open what they list.
var (
	_ snapshotReader = (*checkpoint.FileStore)(nil)
	_ snapshotReader = (*checkpoint.KafkaStore)(nil)
)

// runInspect is `dedup inspect`: every snapshot the configured store holds,
// newest first per partition, with the filter statistics decoded from it.
// It reads the store only; with CHECKPOINT_STORE=kafka and no KAFKA_BROKERS
// it reads from the embedded broker of a running `dedup` at
// EMBEDDED_BROKER_ADDR.
func runInspect(ctx context.Context, args []string, lookup config.LookupFunc, stdout, stderr io.Writer) int {
	cfg, log, code := setupNoArgs("inspect", args, lookup, stderr)
	if code != exitOK {
		return code
	}
	if err := inspect(ctx, cfg, log, stdout); err != nil {
		log.Error("dedup inspect failed", "err", err)
		return exitFailure
	}
	return exitOK
}

func inspect(ctx context.Context, cfg *config.Config, log *slog.Logger, w io.Writer) (err error) {
	brokers := cfg.BrokerList()
	if cfg.Embedded() {
		brokers = []string{cfg.EmbeddedBrokerAddr}
	}
	conn, err := config.NewConnection(cfg, brokers)
	if err != nil {
		return err
	}
	defer conn.Transport.CloseIdleConnections()
	where := "directory " + filepath.Join(cfg.CheckpointDir, cfg.GroupID)
	if cfg.CheckpointStore == config.StoreKafka {
		where = "topic " + cfg.CheckpointTopic + " on " + strings.Join(brokers, ",")
	}
	// inspect reads only: a store that does not exist is reported as
	// empty, never created (both stores create what is missing on open).
	exists, err := storeExists(ctx, cfg, conn)
	if err != nil {
		return err
	}
	if !exists {
		printNothingFound(w, cfg, where, "does not exist")
		return nil
	}
	store, err := service.OpenStore(ctx, cfg, conn, log)
	if err != nil {
		return fmt.Errorf("open checkpoint store: %w", err)
	}
	defer func() { err = errors.Join(err, store.Close()) }()
	reader, ok := store.(snapshotReader)
	if !ok {
		return fmt.Errorf("inspect: %T cannot open snapshots", store)
	}
	entries, err := reader.List(ctx)
	if err != nil {
		return fmt.Errorf("list checkpoints: %w", err)
	}
	if len(entries) == 0 {
		printNothingFound(w, cfg, where, "holds no snapshot")
		return nil
	}
	increments := 0
	for _, e := range entries {
		if e.Meta.Increment() {
			increments++
		}
	}
	fmt.Fprintf(w, "checkpoint store: %s (%s), group %s: %d snapshot(s): %d base(s), %d increment(s)\n",
		cfg.CheckpointStore, where, cfg.GroupID, len(entries), len(entries)-increments, increments)
	now := time.Now()
	var c chainView
	for _, e := range entries {
		if !e.Meta.Increment() {
			c.end(w)
			c = chainView{base: e.Meta, pair: printEntry(ctx, w, reader, e, now), head: e.Meta}
			continue
		}
		c.add(ctx, w, reader, e)
	}
	c.end(w)
	return nil
}

// chainView follows one chain as List lists it, base first: each increment
// is printed on a line and applied to the base's pair, and the state of the
// chain's head is printed after its last one.
type chainView struct {
	base, head checkpoint.Meta
	pair       *rotation.Pair // nil: the base could not be decoded, or an increment failed
	applied    int
	stored     int64
}

func (c *chainView) add(ctx context.Context, w io.Writer, r snapshotReader, e checkpoint.Entry) {
	m := e.Meta
	verdict := "ok"
	switch {
	case e.Damaged:
		verdict = "DAMAGED, kept aside: " + cmp.Or(errString(e.Err), "found damaged")
	case e.Err != nil:
		verdict = "BAD: " + e.Err.Error()
	case m.Base != c.base.Seq || m.Topic != c.base.Topic || m.Partition != c.base.Partition:
		verdict = fmt.Sprintf("its base %d is not held", m.Base)
	case c.pair != nil && m.Prev != c.head.Seq:
		verdict = fmt.Sprintf("follows %d, not the chain's piece %d: not applied", m.Prev, c.head.Seq)
	case c.pair != nil:
		if err := applyEntry(ctx, r, e, c.pair); err != nil {
			verdict = "cannot apply: " + err.Error()
			c.pair = nil
		} else {
			c.head = m
			c.applied++
			c.stored += m.StoredBytes
		}
	}
	var by string
	if m.Owner != 0 {
		by = fmt.Sprintf(", written by generation %d", m.Owner) // a chain continued after a move
	}
	fmt.Fprintf(w, "  + increment seq %d (after %d): offset %d, raw %s, stored %s, chain %s%s  %s\n",
		m.Seq, m.Prev, m.Offset, byteSize(m.RawBytes), byteSize(m.StoredBytes), byteSize(m.ChainBytes), by, verdict)
}

// end prints the chain's head once increments were applied.
func (c *chainView) end(w io.Writer) {
	if c.applied == 0 || c.pair == nil {
		return
	}
	fmt.Fprintf(w, "  chain head: seq %d, offset %d: %d increment(s), %s stored on a base of %s (%.2f of it)\n",
		c.head.Seq, c.head.Offset, c.applied, byteSize(c.stored), byteSize(c.base.StoredBytes), ratioOf(c.stored, c.base.StoredBytes))
	printFilter(w, c.pair.Stats())
}

func ratioOf(part, whole int64) float64 {
	if whole <= 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

// printNothingFound says where inspect looked and which variables choose
// the store, so that a user looking in the wrong place learns what to set.
func printNothingFound(w io.Writer, cfg *config.Config, where, what string) {
	fmt.Fprintf(w, "checkpoint store: %s (%s), group %s: %s: 0 snapshot(s)\n", cfg.CheckpointStore, where, cfg.GroupID, what)
	fmt.Fprintf(w, "The store is chosen by CHECKPOINT_STORE (kafka or file; the default is kafka with KAFKA_BROKERS set, file without),\n")
	fmt.Fprintf(w, "then CHECKPOINT_DIR (default DATA_DIR/checkpoints) for file, or CHECKPOINT_TOPIC (default GROUP_ID-dedup-state)\n")
	fmt.Fprintf(w, "on KAFKA_BROKERS (EMBEDDED_BROKER_ADDR when empty) for kafka; GROUP_ID selects the group's snapshots.\n")
	fmt.Fprintf(w, "Run inspect with the same variables as the stage.\n")
}

// storeExists reports whether the checkpoint store is there to read,
// without creating it.
func storeExists(ctx context.Context, cfg *config.Config, conn *config.Connection) (bool, error) {
	if cfg.CheckpointStore == config.StoreFile {
		st, err := os.Stat(filepath.Join(cfg.CheckpointDir, cfg.GroupID))
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("inspect checkpoint directory: %w", err)
		}
		return st.IsDir(), nil
	}
	_, err := service.TopicPartitions(ctx, conn, cfg.CheckpointTopic)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, service.ErrTopicNotFound), errors.Is(err, kafka.UnknownTopicOrPartition):
		return false, nil
	}
	return false, err
}

// printEntry prints one snapshot (a base); a snapshot that fails its
// checks is reported as such, never skipped. It returns the decoded pair
// (nil when it cannot be decoded, or holds a legacy pair: no increment
// follows such a base).
func printEntry(ctx context.Context, w io.Writer, r snapshotReader, e checkpoint.Entry, now time.Time) *rotation.Pair {
	m := e.Meta
	verdict := "ok"
	if e.Err != nil {
		verdict = "BAD: " + e.Err.Error()
	}
	if e.Damaged {
		// Found damaged by the stage and kept for inspection: never
		// restored again (docs/checkpoints.md, "Integrity").
		verdict = "DAMAGED, kept aside: " + cmp.Or(errString(e.Err), "found damaged")
	}
	if m.Created.IsZero() {
		// The store could not read the metadata: say so rather than print zeros.
		fmt.Fprintf(w, "\n%s/%d  seq %d  metadata unreadable\n  checksum: %s\n", m.Topic, m.Partition, m.Seq, verdict)
	} else {
		fmt.Fprintf(w, "\n%s/%d  seq %d  offset %d  created %s (age %s)\n", m.Topic, m.Partition, m.Seq, m.Offset,
			m.Created.UTC().Format(time.RFC3339), now.Sub(m.Created).Round(time.Second))
		fmt.Fprintf(w, "  size: raw %s, stored %s (%.1fx)  checksum %08x: %s\n", byteSize(m.RawBytes), byteSize(m.StoredBytes),
			ratio(m.RawBytes, m.StoredBytes), m.Checksum, verdict)
	}
	fmt.Fprintf(w, "  where: %s\n", e.Where)
	if e.Err != nil || e.Damaged {
		return nil
	}
	snap, err := decodeEntry(ctx, r, e)
	if err != nil {
		fmt.Fprintf(w, "  state: cannot decode: %v\n", err)
		return nil
	}
	printFilter(w, snap.Pair.Stats())
	if snap.Origins != "" {
		fmt.Fprintf(w, "  repartition high-water marks (input topic/partition:offset): %s\n", snap.Origins)
	}
	if snap.Legacy == nil {
		return snap.Pair
	}
	ls := snap.Legacy.Stats()
	until := "its first record"
	if !ls.WindowStart.IsZero() {
		until = ls.WindowStart.Add(2 * ls.Window).Format(time.RFC3339)
	}
	fmt.Fprintf(w, "  kept from before the filter options changed: mode %s, window %s starting %s, %s in memory, "+
		"%d key(s) retracted since; released when event time reaches %s\n",
		ls.Mode, ls.Window, windowStart(ls), byteSize(int64(ls.Bytes)), snap.Retracted, until)
	return nil
}

// printFilter prints a pair's figures.
func printFilter(w io.Writer, st rotation.Stats) {
	fmt.Fprintf(w, "  filter: mode %s, window %s starting %s, %d rotation(s), %s in memory\n",
		st.Mode, st.Window, windowStart(st), st.Rotations, byteSize(int64(st.Bytes)))
	for _, g := range []struct {
		name string
		f    rotation.FilterStats
	}{{"current", st.Current}, {"previous", st.Previous}} {
		fmt.Fprintf(w, "  %-8s fill %.3g%%  est. keys %-10.0f est. FP rate %.3g  saturated %d  (m=%d, k=%d)\n",
			g.name+":", 100*g.f.Fill, g.f.EstimatedKeys, g.f.FPRate, g.f.Saturated, g.f.M, g.f.K)
	}
}

// windowStart prints a pair's current window start.
func windowStart(st rotation.Stats) string {
	if st.WindowStart.IsZero() {
		return "none yet"
	}
	return st.WindowStart.Format(time.RFC3339)
}

func decodeEntry(ctx context.Context, r snapshotReader, e checkpoint.Entry) (partition.Snapshot, error) {
	rc, err := r.Open(ctx, e)
	if err != nil {
		return partition.Snapshot{}, err
	}
	defer rc.Close()
	s, err := partition.ReadSnapshot(rc)
	if err != nil {
		return partition.Snapshot{}, fmt.Errorf("decode filter state: %w", err)
	}
	return s, nil
}

// applyEntry applies increment e to pair.
func applyEntry(ctx context.Context, r snapshotReader, e checkpoint.Entry, pair *rotation.Pair) error {
	rc, err := r.Open(ctx, e)
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := partition.ApplyIncrement(pair, rc); err != nil {
		return fmt.Errorf("apply increment: %w", err)
	}
	return nil
}

func ratio(raw, stored int64) float64 {
	if stored <= 0 {
		return 0
	}
	return float64(raw) / float64(stored)
}

// byteSize prints n in binary units.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
