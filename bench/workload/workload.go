// Package workload describes and generates the input of the benchmarks: a
// deterministic stream of keyed records whose first occurrences are known in
// advance. It depends on the standard library only, so that the service
// binary's demo (internal/demo) draws its keyed records from it without
// linking the harness.
package workload

import (
	"errors"
	"fmt"
	"math"
)

// Workload describes the generated input every contender reads.
type Workload struct {
	// Keys is the number of distinct keys in the input.
	Keys uint64
	// Records is the number of input records; 0 derives it from Keys and
	// DupRatio.
	Records uint64
	// DupRatio is the fraction of records that repeat a key seen earlier in
	// the input; used only when Records is 0.
	DupRatio float64
	// KeySize and ValueSize are the sizes in bytes of every key and value
	// (keys at least 16, values at least 8: the value carries the record's
	// index so the harness can check outputs).
	KeySize, ValueSize int
	// Partitions of the input topic; keys are spread over them round-robin.
	Partitions int
	// Seed makes the input reproducible.
	Seed uint64
}

// Minimum key and value sizes: a key holds a 16-digit hex identifier, a value
// the record's 8-byte index.
const (
	MinKeySize   = 16
	MinValueSize = 8
)

// Resolved returns w with Records derived when it was 0.
func (w Workload) Resolved() Workload {
	if w.Records == 0 && w.DupRatio >= 0 && w.DupRatio < 1 {
		w.Records = uint64(math.Round(float64(w.Keys) / (1 - w.DupRatio)))
	}
	return w
}

// Validate reports every problem with w at once.
func (w Workload) Validate() error {
	var errs []error
	if w.Keys == 0 {
		errs = append(errs, errors.New("keys: must be at least 1"))
	}
	if w.Records == 0 && (w.DupRatio < 0 || w.DupRatio >= 1) {
		errs = append(errs, fmt.Errorf("dup-ratio: %v is not in [0, 1)", w.DupRatio))
	}
	if r := w.Resolved().Records; r != 0 && r < w.Keys {
		errs = append(errs, fmt.Errorf("records: %d is fewer than the %d distinct keys", r, w.Keys))
	}
	if w.KeySize < MinKeySize {
		errs = append(errs, fmt.Errorf("key-size: %d is below the minimum %d", w.KeySize, MinKeySize))
	}
	if w.ValueSize < MinValueSize {
		errs = append(errs, fmt.Errorf("value-size: %d is below the minimum %d", w.ValueSize, MinValueSize))
	}
	if w.Partitions < 1 {
		errs = append(errs, fmt.Errorf("partitions: %d is not positive", w.Partitions))
	}
	if w.Partitions > 0 && w.Keys > 0 && uint64(w.Partitions) > w.Keys {
		errs = append(errs, fmt.Errorf("partitions: %d exceeds the %d distinct keys", w.Partitions, w.Keys))
	}
	return errors.Join(errs...)
}

// KeysPerPartition is the largest number of distinct keys any one partition
// receives (keys are assigned round-robin).
func (w Workload) KeysPerPartition() uint64 {
	p := uint64(w.Partitions)
	return (w.Keys + p - 1) / p
}

// DupRatioActual is the fraction of records that repeat a key.
func (w Workload) DupRatioActual() float64 {
	if w.Records == 0 {
		return 0
	}
	return float64(w.Records-w.Keys) / float64(w.Records)
}
