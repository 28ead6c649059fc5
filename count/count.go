// Package count reads the counts people type into settings and flags: a
// whole number with an optional decimal suffix, k (10³), M (10⁶) or G
// (10⁹), case-insensitive, with '_' allowed as a digit separator: "10M",
// "1.5k", "250_000". A fraction is accepted only where the suffix makes it
// whole ("1.5k" is 1500, "1.2345k" is an error), and a value out of range
// is an error, never a wrapped or rounded number.
package count

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrNegative is a negative count where only counts of things are allowed.
var ErrNegative = errors.New("negative")

// Parse reads a count, which may be negative.
func Parse(s string) (int64, error) {
	t := strings.ReplaceAll(strings.TrimSpace(s), "_", "")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			mult, t = 1e3, t[:n-1]
		case 'm', 'M':
			mult, t = 1e6, t[:n-1]
		case 'g', 'G':
			mult, t = 1e9, t[:n-1]
		}
	}
	if i, err := strconv.ParseInt(t, 10, 64); err == nil {
		if i > math.MaxInt64/mult || i < math.MinInt64/mult {
			return 0, fmt.Errorf("parse count %q: %w", s, strconv.ErrRange)
		}
		return i * mult, nil
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("parse count %q: want a whole number with an optional k, M or G suffix", s)
	}
	v := f * float64(mult)
	if v != math.Trunc(v) {
		return 0, fmt.Errorf("parse count %q: not a whole number", s)
	}
	if v >= math.MaxInt64 || v <= math.MinInt64 {
		return 0, fmt.Errorf("parse count %q: %w", s, strconv.ErrRange)
	}
	return int64(v), nil
}

// ParseUint reads a count of things: Parse, refusing negative values.
func ParseUint(s string) (uint64, error) {
	n, err := Parse(s)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, fmt.Errorf("parse count %q: %w", s, ErrNegative)
	}
	return uint64(n), nil
}

// ParseList reads a comma-separated list of counts of things, at least
// one; empty items are skipped.
func ParseList(s string) ([]uint64, error) {
	var out []uint64
	for part := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		n, err := ParseUint(part)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("parse counts %q: none given", s)
	}
	return out, nil
}
