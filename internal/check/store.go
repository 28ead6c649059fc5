package check

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"dedup/checkpoint"
	"dedup/internal/config"
	"dedup/rotation"
	"dedup/sizing"
)

// checkStore reads and writes the checkpoint store the stage would use.
func (c *checker) checkStore(ctx context.Context, conn *config.Connection, reached bool, topic *topicState, inputPartitions int) {
	if c.cfg.CheckpointStore == config.StoreFile {
		c.checkFileStore(ctx)
		return
	}
	name := c.cfg.CheckpointTopic
	switch {
	case !reached && c.cfg.Embedded() && conn == nil:
		c.report(checkOK, "checkpoint store", "kafka store on the embedded broker: %s is created when the stage starts", name)
		return
	case !reached:
		return // the broker lines say why
	case topic == nil || topic.err != nil:
		c.report(checkWarn, "checkpoint store", "read and write not probed: topic %s not there (see above)", name)
		return
	}
	cctx, cancel := c.step(ctx)
	defer cancel()
	store, err := checkpoint.NewKafkaStore(cctx, checkpoint.KafkaOptions{
		Brokers:    conn.Brokers,
		Dialer:     conn.Dialer,
		Transport:  conn.Transport,
		Topic:      name,
		Group:      c.cfg.GroupID,
		Keep:       c.cfg.CheckpointKeep,
		Partitions: max(inputPartitions, 1),
		Patience:   c.timeout,
		Logger:     slog.New(slog.DiscardHandler), // its warnings are checks of their own here
	})
	if err != nil {
		c.report(checkFail, "checkpoint read", "topic %s: %v", name, err)
		return
	}
	defer store.Close()
	entries, err := store.List(cctx)
	c.reportSnapshots(cctx, entries, err)
	wctx, wcancel := c.step(ctx)
	defer wcancel()
	n, err := store.Probe(wctx)
	if err != nil {
		c.report(checkFail, "checkpoint write", "topic %s: %v", name, err)
		return
	}
	c.report(checkOK, "checkpoint write", "topic %s: a probe record written, read back and tombstoned on each of %d partition(s) (restore never takes it for a snapshot)", name, n)
}

// reportSnapshots reports what a store's List found for the group. List
// reads and checksums every snapshot, which a large store may not finish
// within the timeout: that is a warning, the write probe reads as well.
func (c *checker) reportSnapshots(ctx context.Context, entries []checkpoint.Entry, err error) {
	if err != nil && ctx.Err() != nil {
		c.report(checkWarn, "checkpoint read", "group %s: not every snapshot read and checksummed within --timeout %v; raise it to verify them all", c.cfg.GroupID, c.timeout)
		return
	}
	if err != nil {
		c.report(checkFail, "checkpoint read", "%v", err)
		return
	}
	damaged := 0
	parts := map[string]bool{}
	for _, e := range entries {
		if e.Err != nil {
			damaged++
		}
		parts[fmt.Sprintf("%s/%d", e.Meta.Topic, e.Meta.Partition)] = true
	}
	if len(entries) == 0 {
		c.report(checkOK, "checkpoint read", "group %s: no snapshot yet (partitions start from committed offsets or KAFKA_START_OFFSET)", c.cfg.GroupID)
		return
	}
	if damaged > 0 {
		c.report(checkWarn, "checkpoint read", "group %s: %d snapshot(s) of %d partition(s), %d damaged (kept for inspection; restore falls back to older ones; 'dedup inspect' names them)",
			c.cfg.GroupID, len(entries), len(parts), damaged)
		return
	}
	c.report(checkOK, "checkpoint read", "group %s: %d snapshot(s) of %d partition(s), all intact", c.cfg.GroupID, len(entries), len(parts))
}

// checkFileStore reads the file store's directory and proves it writable:
// a probe file is written, fsynced, read back and removed. The probe's
// name starts as the store's temporaries do, so a probe left behind by a
// crash is never read as a snapshot and is swept like one.
func (c *checker) checkFileStore(ctx context.Context) {
	dir := filepath.Join(c.cfg.CheckpointDir, c.cfg.GroupID)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		c.report(checkOK, "checkpoint read", "%s does not exist yet: nothing to restore", dir)
	} else if err != nil {
		c.report(checkFail, "checkpoint read", "%v", err)
	} else {
		store, err := checkpoint.NewFileStore(checkpoint.FileOptions{Dir: c.cfg.CheckpointDir, Keep: c.cfg.CheckpointKeep, Group: c.cfg.GroupID})
		if err != nil {
			c.report(checkFail, "checkpoint read", "%v", err)
		} else {
			cctx, cancel := c.step(ctx)
			entries, err := store.List(cctx)
			c.reportSnapshots(cctx, entries, err)
			cancel()
		}
	}
	if err := probeDir(dir); err != nil {
		c.report(checkFail, "checkpoint write", "%v", err)
		return
	}
	c.report(checkOK, "checkpoint write", "%s: a probe file written, fsynced, read back and removed", dir)
}

// probeDir creates dir as the store would and writes, fsyncs, reads back
// and removes a probe file in it. Directories it created are removed
// again: the check leaves nothing behind.
func probeDir(dir string) (err error) {
	existing := dir
	for {
		if _, err := os.Stat(existing); err == nil || filepath.Dir(existing) == existing {
			break
		}
		existing = filepath.Dir(existing)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create directory: %w", err)
	}
	defer func() {
		for d := dir; d != existing && d != filepath.Dir(d); d = filepath.Dir(d) {
			if os.Remove(d) != nil {
				return // not empty: no longer only the check's
			}
		}
	}()
	nonce := make([]byte, 8)
	rand.Read(nonce)
	path := filepath.Join(dir, ".tmp-dedup-check-"+hex.EncodeToString(nonce))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("create probe file: %w", err)
	}
	defer func() {
		if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("remove probe file: %w", rerr))
		}
	}()
	data := []byte("dedup check probe\n")
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write probe file %s: %w", path, err)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, data) {
		return fmt.Errorf("read probe file %s back: %q, %v", path, got, err)
	}
	return nil
}

// printSizing is what `dedup size` computes for these settings, with the
// input's partitions on one instance.
func (c *checker) printSizing(partitions int) error {
	o := c.cfg.FilterOptions()
	pair, err := rotation.New(o)
	if err != nil {
		return err
	}
	pairBytes := int64(pair.SizeBytes())
	pair = nil
	endFP, err := rotation.PairRate(o, float64(o.ExpectedKeys))
	if err != nil {
		return err
	}
	fmt.Fprintf(c.out, "\nSizing (as 'dedup size' computes it): mode %s, DEDUP_EXPECTED_KEYS=%d per partition per window, DEDUP_WINDOW=%v\n",
		o.Mode, o.ExpectedKeys, o.Window)
	fmt.Fprintf(c.out, "  filters: %s per partition (2 generations); false-positive rate with both full %.3g (DEDUP_FP_RATE=%g)\n",
		sizing.BytesIEC(float64(pairBytes)), endFP, c.cfg.FPRate)
	// What the filters are sized over: the input's partitions, with
	// REPARTITION_TOPIC the repartition topic's (hop 2's).
	what, flags := "input partitions", ""
	if c.cfg.RepartitionTopic != "" {
		what, flags = "partitions of "+c.cfg.RepartitionTopic, " --repartition"
		if c.cfg.Hops() == config.HopsDedup {
			flags += " --hops dedup"
		}
	}
	if partitions == 0 {
		fmt.Fprintf(c.out, "  %s unknown: memory per instance not computed\n", what)
		return nil
	}
	in := sizing.Workload{KeysPerWindow: o.ExpectedKeys * uint64(partitions), Window: o.Window, FPRate: c.cfg.FPRate,
		Partitions: partitions, Instances: 1, CheckpointInterval: c.cfg.CheckpointInterval,
		FetchBufferBytes: c.cfg.FetchBufferBytes, ProduceBatchBytes: c.cfg.ProduceBatchBytes}
	if c.cfg.RepartitionTopic != "" {
		// As `dedup size --repartition` with its defaults; hop 1's reader
		// counted only where this role runs it.
		in.Repartition = &sizing.Repartition{RecordBytes: 500, KeyBytes: 16, InputTopic: c.cfg.InputTopic, Topic: c.cfg.RepartitionTopic,
			FetchBytes: int64(min(c.cfg.FetchMaxBytes, sizing.Hop1FetchBytes)), BatchBytes: c.cfg.ProduceBatchBytes}
		in.Hops = c.cfg.Hops()
	}
	res := in.Deployment(pairBytes).Resources()
	fmt.Fprintf(c.out, "  one instance holding all %d %s: requests memory %s, limits memory %s, GOMEMLIMIT=%s\n",
		partitions, what, sizing.Quantity(res.Request), sizing.Quantity(res.Limit), sizing.GoMemLimit(res.GoMemLimit))
	fmt.Fprintf(c.out, "  checkpoints: %s/s raw, all partitions every %v (compressed: 'dedup size')\n",
		sizing.BytesIEC(float64(pairBytes)*float64(partitions)/c.cfg.CheckpointInterval.Seconds()), c.cfg.CheckpointInterval)
	fmt.Fprintf(c.out, "  spread over replicas: dedup size --keys-per-window %d --window %v --fp-rate %g --partitions %d --mode %s%s --instances N\n",
		in.KeysPerWindow, o.Window, c.cfg.FPRate, partitions, o.Mode, flags)
	return nil
}
