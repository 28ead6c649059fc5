package checkpoint_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"dedup/checkpoint"
	"dedup/rotation"

	"github.com/twmb/franz-go/pkg/kfake"
)

// The restore target: a partition sized for 10,000,000 keys at
// fp 0.001 in counting mode, both generations filled, restored in under 2 s.
const benchKeys = 10_000_000

var (
	benchOnce sync.Once
	benchPair *rotation.Pair
)

// filledPair builds the pair once: the previous generation holds benchKeys
// keys from one window, the current one benchKeys keys of the next.
func filledPair(b *testing.B) *rotation.Pair {
	benchOnce.Do(func() {
		p, err := rotation.New(rotation.Options{ExpectedKeys: benchKeys, FPRate: 0.001, Window: time.Hour, Mode: rotation.Counting})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Unix(0, 0).Add(1000 * time.Hour)
		key := make([]byte, 8)
		for gen := range 2 {
			ts := t0.Add(time.Duration(gen) * time.Hour)
			for i := range uint64(benchKeys) {
				binary.LittleEndian.PutUint64(key, uint64(gen)<<40|i)
				p.TestAndAdd(key, ts)
			}
		}
		benchPair = p
	})
	return benchPair
}

func benchMeta() checkpoint.Meta {
	return checkpoint.Meta{Group: "g", Topic: "in", Partition: 0, Offset: 1, OutputTopic: "out", OutputEnds: map[int]int64{0: 1}}
}

func BenchmarkFileSave(b *testing.B) {
	p := filledPair(b)
	s, err := checkpoint.NewFileStore(checkpoint.FileOptions{Dir: b.TempDir(), Keep: 2})
	if err != nil {
		b.Fatal(err)
	}
	var m checkpoint.Meta
	b.SetBytes(int64(p.SizeBytes()))
	b.ResetTimer()
	for b.Loop() {
		if m, err = s.Save(context.Background(), benchMeta(), p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(m.StoredBytes)/float64(m.RawBytes), "stored/raw")
}

func BenchmarkFileLoad(b *testing.B) {
	p := filledPair(b)
	s, err := checkpoint.NewFileStore(checkpoint.FileOptions{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Save(context.Background(), benchMeta(), p); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(p.SizeBytes()))
	b.ResetTimer()
	for b.Loop() {
		_, _, err := s.Load(context.Background(), "in", 0, func(_ checkpoint.Meta, r io.Reader) error {
			var restored rotation.Pair
			_, err := restored.ReadFrom(r)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// References for the two above, run side by side: the same pair written
// uncompressed to a file and fsynced, and read back from it.

func BenchmarkReferenceRawWrite(b *testing.B) {
	p := filledPair(b)
	path := b.TempDir() + "/raw"
	b.SetBytes(int64(p.SizeBytes()))
	b.ResetTimer()
	for b.Loop() {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriterSize(f, 1<<20)
		if _, err := p.WriteTo(w); err != nil {
			b.Fatal(err)
		}
		if err := errors.Join(w.Flush(), f.Sync(), f.Close()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReferenceRawRead(b *testing.B) {
	p := filledPair(b)
	path := b.TempDir() + "/raw"
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := p.WriteTo(f); err != nil {
		b.Fatal(err)
	}
	f.Close()
	b.SetBytes(int64(p.SizeBytes()))
	b.ResetTimer()
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		var restored rotation.Pair
		if _, err := restored.ReadFrom(bufio.NewReaderSize(f, 1<<20)); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// BenchmarkKafkaLoad restores the pair from an in-process kfake broker with
// a fresh store each time, so the figure includes reading the checkpoint
// partition to find the manifest and then reading the chunks.
func BenchmarkKafkaLoad(b *testing.B) {
	p := filledPair(b)
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	opts := checkpoint.KafkaOptions{Brokers: c.ListenAddrs(), Topic: "state", Group: "g"}
	s, err := checkpoint.NewKafkaStore(context.Background(), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	began := time.Now()
	m, err := s.Save(context.Background(), benchMeta(), p)
	if err != nil {
		b.Fatal(err)
	}
	saved := time.Since(began)
	b.SetBytes(int64(p.SizeBytes()))
	b.ResetTimer()
	for b.Loop() {
		r, err := checkpoint.NewKafkaStore(context.Background(), opts)
		if err != nil {
			b.Fatal(err)
		}
		_, _, err = r.Load(context.Background(), "in", 0, func(_ checkpoint.Meta, rd io.Reader) error {
			var restored rotation.Pair
			_, err := restored.ReadFrom(rd)
			return err
		})
		if err := errors.Join(err, r.Close()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(saved.Seconds(), "save-s")
	b.ReportMetric(float64(m.StoredBytes)/float64(m.RawBytes), "stored/raw")
}
