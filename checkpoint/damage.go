package checkpoint

import (
	"context"
	"errors"
	"fmt"
)

// Damage is one damaged snapshot a store found: its checksums, its length,
// its format or a chunk failed, or decode refused its state. The store logs
// it at warn level when it finds it and hands it to the report installed
// with WithDamageReport; it never deletes it silently (see docs/checkpoints.md,
// "Integrity").
type Damage struct {
	Topic     string
	Partition int
	Seq       uint64
	Where     string // file path or Kafka manifest key where it was found
	// KeptAt is where the file store moved it (under the partition's
	// damaged/ directory); empty for the Kafka store, which leaves a
	// damaged snapshot's records in place.
	KeptAt string
	Err    error // a *CorruptError, or a *RefusedError
	// Writer is the release that wrote it, when its metadata was read
	// and records it: a piece of a newer release may be refused for a
	// format this one does not read.
	Writer string
}

// RefusedError is a snapshot whose checksums held but whose state the
// decode func refused (another group, another partition, a format this
// binary does not read, a filter that does not decode).
type RefusedError struct {
	Err error
}

func (e *RefusedError) Error() string { return fmt.Sprintf("decode state: %v", e.Err) }

func (e *RefusedError) Unwrap() error { return e.Err }

// IsDamage reports whether err says a stored snapshot is damaged (as
// opposed to a read that failed for now, or a cancelled context).
func IsDamage(err error) bool {
	var ce *CorruptError
	var re *RefusedError
	return errors.As(err, &ce) || errors.As(err, &re)
}

type damageKey struct{}

// WithDamageReport returns a context whose Loads and Saves call report for
// each damaged snapshot they newly find (the caller counts them; the store
// has already logged each).
func WithDamageReport(ctx context.Context, report func(Damage)) context.Context {
	return context.WithValue(ctx, damageKey{}, report)
}

func reportDamage(ctx context.Context, d Damage) {
	if f, ok := ctx.Value(damageKey{}).(func(Damage)); ok && f != nil {
		f(d)
	}
}

// damageAttrs are the log attributes naming a damage: where, which part
// and what failed.
func damageAttrs(d Damage) []any {
	what := "state"
	var ce *CorruptError
	if errors.As(d.Err, &ce) {
		what = ce.What
	}
	attrs := []any{"topic", d.Topic, "partition", d.Partition, "seq", d.Seq, "damaged", what, "err", d.Err}
	if d.Writer != "" {
		attrs = append(attrs, "written_by", d.Writer)
	}
	return attrs
}
