package partition

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"dedup/checkpoint"
)

// damagedWorker is a worker whose store holds one damaged snapshot of
// in/0, and whose commit records no output end offsets.
func damagedWorker(t *testing.T, on OnDamage) (*Worker, prometheus.Counter) {
	t.Helper()
	dir := t.TempDir()
	st, err := checkpoint.NewFileStore(checkpoint.FileOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	part := filepath.Join(dir, "in", "0")
	if err := os.MkdirAll(part, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(part, "00000000000000000001.ckpt"), []byte("not a checkpoint"), 0o644); err != nil {
		t.Fatal(err)
	}
	damaged := prometheus.NewCounter(prometheus.CounterOpts{Name: "damaged"})
	w := &Worker{d: Deps{Topic: "in", Partition: 0, Store: st, OnDamage: on,
		Group: testOwner{}, Metrics: &Metrics{CheckpointDamaged: damaged}}, log: slog.New(slog.DiscardHandler)}
	return w, damaged
}

// TestRestoreAllDamagedRefuse: OnDamageRefuse refuses the partition with a
// *DamagedError naming the snapshot, every time it is tried, and counts
// the damage once.
func TestRestoreAllDamagedRefuse(t *testing.T) {
	w, damaged := damagedWorker(t, OnDamageRefuse)
	for range 2 {
		_, err := w.restore(context.Background())
		var de *DamagedError
		if !errors.As(err, &de) || len(de.Load.Rejected) != 1 || !errors.Is(err, checkpoint.ErrTruncated) {
			t.Fatalf("restore: %v, want a *DamagedError naming the truncated snapshot", err)
		}
	}
	if n := counterValue(t, damaged); n != 1 {
		t.Errorf("damaged counter %v, want 1 (found once, kept aside)", n)
	}
}

// TestRestoreAllDamagedEmpty: OnDamageEmpty (and the zero value) starts
// the partition empty and counts the damage.
func TestRestoreAllDamagedEmpty(t *testing.T) {
	for _, on := range []OnDamage{OnDamageEmpty, ""} {
		w, damaged := damagedWorker(t, on)
		r, err := w.restore(context.Background())
		if err != nil || r.found || r.pair != nil {
			t.Errorf("%q: restore %+v, %v; want an empty start", on, r, err)
		}
		if n := counterValue(t, damaged); n != 1 {
			t.Errorf("%q: damaged counter %v, want 1", on, n)
		}
	}
}

// readFailingStore rejects every snapshot because it could not be read.
type readFailingStore struct{ Store }

func (readFailingStore) Load(_ context.Context, topic string, partition int, _ func(checkpoint.Meta, io.Reader) error) (checkpoint.Meta, checkpoint.Source, error) {
	return checkpoint.Meta{}, "", &checkpoint.LoadError{Topic: topic, Partition: partition, Rejected: []checkpoint.Rejection{
		{Seq: 1, Where: "k", Err: &checkpoint.ReadError{Topic: "state", Err: errors.New("broker gone")}}}}
}

// TestRestoreReadFailureIsNoDamage: a snapshot that could not be read
// fails the restore in either mode; the partition never starts empty for it.
func TestRestoreReadFailureIsNoDamage(t *testing.T) {
	for _, on := range []OnDamage{OnDamageEmpty, OnDamageRefuse} {
		w := &Worker{d: Deps{Topic: "in", Partition: 0, Store: readFailingStore{}, OnDamage: on,
			Group: testOwner{}, Metrics: &Metrics{}}, log: slog.New(slog.DiscardHandler)}
		_, err := w.restore(context.Background())
		if err == nil || errors.As(err, new(*DamagedError)) || !errors.As(err, new(*checkpoint.ReadError)) {
			t.Errorf("%q: restore: %v, want the read failure", on, err)
		}
	}
}
