package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/bench/workload"
)

// Options shapes the demo traffic.
type Options struct {
	Brokers   []string
	Transport *kafka.Transport // TLS/SASL; nil = plaintext
	Topic     string

	Rate          int     // records per second (> 0)
	Keys          int     // distinct keys before fresh keys repeat; 0 = never repeat
	DuplicateRate float64 // fraction of records that repeat a key already sent
	RetractRate   float64 // fraction of records that retract a key already sent
	UnkeyedRate   float64 // fraction of records without a key
	ValueSize     int     // bytes of filler in each value
	Count         int     // stop after this many records; 0 = until the context ends
	RetractHeader string
	Seed          uint64 // random seed; the same seed sends the same traffic
	Logger        *slog.Logger
}

func (o *Options) validate() error {
	var errs []error
	if o.Rate <= 0 {
		errs = append(errs, fmt.Errorf("rate must be > 0, got %d", o.Rate))
	}
	if o.Keys < 0 {
		errs = append(errs, fmt.Errorf("keys must be >= 0, got %d", o.Keys))
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"dup", o.DuplicateRate}, {"retract", o.RetractRate}, {"unkeyed", o.UnkeyedRate}} {
		if r.v < 0 || r.v > 1 {
			errs = append(errs, fmt.Errorf("%s ratio must be in [0, 1], got %v", r.name, r.v))
		}
	}
	if s := o.DuplicateRate + o.RetractRate + o.UnkeyedRate; s > 1 {
		errs = append(errs, fmt.Errorf("dup + retract + unkeyed ratios must not exceed 1, got %v", s))
	}
	if o.Count < 0 {
		errs = append(errs, fmt.Errorf("count must be >= 0, got %d", o.Count))
	}
	if o.ValueSize < 0 {
		errs = append(errs, fmt.Errorf("value size must be >= 0, got %d", o.ValueSize))
	}
	if o.Topic == "" {
		errs = append(errs, errors.New("topic must not be empty"))
	}
	return errors.Join(errs...)
}

// Stats counts what a Generator has sent (acknowledged by the broker).
type Stats struct {
	Sent, Fresh, Duplicates, Retractions, Unkeyed uint64
}

// Generator produces duplicate-laden traffic at a steady rate: keyed
// records, retractions of keys already sent and unkeyed records, in the
// configured proportions. The keyed records are the benchmarks' workload
// (bench/workload): a first occurrence of a key or a repeat of one already
// sent, in the proportion the options ask. Run it once; Stats may be read
// concurrently.
type Generator struct {
	o      Options
	rng    *rand.Rand
	keys   *workload.Generator // the keyed stream
	lap    uint64              // how many times the keyed stream was restarted
	filler []byte

	sent, fresh, dups, retracts, unkeyed atomic.Uint64
}

// neverRepeat is the distinct keys of a keyed stream whose keys never
// repeat (Options.Keys 0): more than any demo sends.
const neverRepeat = 1 << 48

// keyedStream is the workload the keyed records are drawn from: Keys
// distinct keys, repeated so that a keyed record repeats a key already sent
// with probability DuplicateRate / (1 - RetractRate - UnkeyedRate).
func (o *Options) keyedStream(lap uint64) workload.Workload {
	keys := uint64(neverRepeat)
	if o.Keys > 0 {
		keys = uint64(o.Keys)
	}
	dup := 0.0
	if keyed := 1 - o.RetractRate - o.UnkeyedRate; keyed > 0 {
		dup = min(o.DuplicateRate/keyed, 0.999)
	}
	return workload.Workload{Keys: keys, DupRatio: dup, KeySize: workload.MinKeySize, ValueSize: workload.MinValueSize,
		Partitions: 1, Seed: o.Seed + lap}
}

// New checks the options.
func New(o Options) (*Generator, error) {
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("configure generator: %w", err)
	}
	if o.RetractHeader == "" {
		o.RetractHeader = "dedup-retract"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	filler := make([]byte, o.ValueSize)
	for i := range filler {
		filler[i] = 'a' + byte(i%26)
	}
	if err := o.keyedStream(0).Validate(); err != nil {
		return nil, fmt.Errorf("configure generator: %w", err)
	}
	return &Generator{
		o:      o,
		rng:    rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)),
		keys:   workload.NewGenerator(o.keyedStream(0)),
		filler: filler,
	}, nil
}

// Stats returns the cumulative counts.
func (g *Generator) Stats() Stats {
	return Stats{
		Sent: g.sent.Load(), Fresh: g.fresh.Load(), Duplicates: g.dups.Load(),
		Retractions: g.retracts.Load(), Unkeyed: g.unkeyed.Load(),
	}
}

// generatorTick is how often a batch goes out; Rate/ticks records per batch.
const generatorTick = 50 * time.Millisecond

// Run sends until ctx ends or Count records are sent (returning nil), or a
// write fails. Stats counts acknowledged records: a batch in flight when ctx
// ends may reach the topic uncounted.
func (g *Generator) Run(ctx context.Context) (err error) {
	w := &kafka.Writer{
		Addr:         kafka.TCP(g.o.Brokers...),
		Topic:        g.o.Topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchSize:    max(g.o.Rate, 100),
		BatchTimeout: time.Millisecond,
	}
	if g.o.Transport != nil { // a nil *Transport in the interface would not mean "default"
		w.Transport = g.o.Transport
	} else {
		// Plaintext on a transport of its own, closed after the writer:
		// kafka.DefaultTransport's pools would outlive Run and go on
		// dialing the brokers.
		own := &kafka.Transport{}
		defer own.CloseIdleConnections()
		w.Transport = own
	}
	defer func() { err = errors.Join(err, closeWriter(w)) }()

	ticker := time.NewTicker(generatorTick)
	defer ticker.Stop()
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		// Send what is due since start rather than a fixed amount per tick,
		// so a slow write does not lower the rate for good.
		n := int(float64(g.o.Rate)*time.Since(start).Seconds()) - int(g.sent.Load())
		if n <= 0 {
			continue
		}
		n = min(n, max(g.o.Rate, 10)) // never more than a second's worth at once
		if g.o.Count > 0 {
			n = min(n, g.o.Count-int(g.sent.Load()))
		}
		batch, kinds := g.batch(n)
		if err := w.WriteMessages(ctx, batch...); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("write generated records: %w", err)
		}
		g.count(kinds)
		if g.o.Count > 0 && int(g.sent.Load()) >= g.o.Count {
			return nil
		}
	}
}

func closeWriter(w *kafka.Writer) error {
	if err := w.Close(); err != nil {
		return fmt.Errorf("close generator writer: %w", err)
	}
	return nil
}

type recordKind uint8

const (
	kindFresh recordKind = iota
	kindDuplicate
	kindRetraction
	kindUnkeyed
)

// batch makes n records.
func (g *Generator) batch(n int) ([]kafka.Message, []recordKind) {
	msgs := make([]kafka.Message, 0, n)
	kinds := make([]recordKind, 0, n)
	now := time.Now()
	for range n {
		m, k := g.record(now)
		msgs = append(msgs, m)
		kinds = append(kinds, k)
	}
	return msgs, kinds
}

// record draws one record. A retraction needs a key sent before; until
// there is one, a keyed record goes out instead.
func (g *Generator) record(now time.Time) (kafka.Message, recordKind) {
	u := g.rng.Float64()
	switch {
	case u < g.o.RetractRate && g.sentKeys() > 0:
		return kafka.Message{
			Key:     g.sentKey(g.rng.Uint64N(g.sentKeys())),
			Value:   []byte(`{"retract":true}`),
			Headers: []kafka.Header{{Key: g.o.RetractHeader, Value: []byte("1")}},
			Time:    now,
		}, kindRetraction
	case u < g.o.RetractRate+g.o.UnkeyedRate:
		return kafka.Message{Value: g.value("unkeyed", g.rng.Uint64()), Time: now}, kindUnkeyed
	}
	r := g.keys.Next()
	if r == nil {
		// Keys distinct keys were sent: start over, so fresh keys repeat.
		g.lap++
		g.keys = workload.NewGenerator(g.o.keyedStream(g.lap))
		r = g.keys.Next()
	}
	key := string(r.Key)
	m := kafka.Message{Key: []byte(key), Value: g.value(key, r.Index), Time: now}
	if r.First {
		return m, kindFresh
	}
	return m, kindDuplicate
}

// sentKeys is how many distinct keys the keyed stream has sent in this lap.
func (g *Generator) sentKeys() uint64 { return g.keys.Emitted() }

// sentKey is the key of the id-th distinct key sent.
func (g *Generator) sentKey(id uint64) []byte { return workload.KeyBytes(g.o.keyedStream(g.lap), id) }

func (g *Generator) value(key string, n uint64) []byte {
	return fmt.Appendf(nil, `{"key":%q,"n":%d,"pad":%q}`, key, n, g.filler)
}

func (g *Generator) count(kinds []recordKind) {
	for _, k := range kinds {
		switch k {
		case kindFresh:
			g.fresh.Add(1)
		case kindDuplicate:
			g.dups.Add(1)
		case kindRetraction:
			g.retracts.Add(1)
		case kindUnkeyed:
			g.unkeyed.Add(1)
		}
	}
	g.sent.Add(uint64(len(kinds)))
}
