package main

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/caarlos0/env/v11"
)

// parseCount reads a count with an optional decimal suffix: k (10³), M (10⁶)
// or G (10⁹), case-insensitive, with '_' allowed as a digit separator:
// "10M", "1.5k", "250_000". Every number setting and `dedup size` read
// numbers this way.
func parseCount(s string) (int64, error) {
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

// countParsers make caarlos0/env read every integer setting with parseCount.
func countParsers() map[reflect.Type]env.ParserFunc {
	return map[reflect.Type]env.ParserFunc{
		reflect.TypeFor[int](): func(s string) (any, error) {
			n, err := parseCount(s)
			if err == nil && (n > math.MaxInt || n < math.MinInt) {
				err = strconv.ErrRange
			}
			return int(n), err
		},
		reflect.TypeFor[int64](): func(s string) (any, error) {
			n, err := parseCount(s)
			return n, err
		},
		reflect.TypeFor[uint64](): func(s string) (any, error) {
			n, err := parseCount(s)
			if err == nil && n < 0 {
				err = fmt.Errorf("parse count %q: negative", s)
			}
			return uint64(n), err
		},
	}
}
