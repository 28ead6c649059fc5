package workload

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseCount parses a count such as "2000", "200k", "1.5M" or "1G"
// (decimal multipliers; also accepts "_" separators).
func ParseCount(s string) (uint64, error) {
	t := strings.ReplaceAll(strings.TrimSpace(s), "_", "")
	mult := 1.0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			mult, t = 1e3, t[:n-1]
		case 'm', 'M':
			mult, t = 1e6, t[:n-1]
		case 'g', 'G', 'b', 'B':
			mult, t = 1e9, t[:n-1]
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || f*mult > math.MaxUint64/2 {
		return 0, fmt.Errorf("parse count %q: want a non-negative number with an optional k, M or G suffix", s)
	}
	return uint64(math.Round(f * mult)), nil
}

// ParseCounts parses a comma-separated list of counts.
func ParseCounts(s string) ([]uint64, error) {
	var out []uint64
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		n, err := ParseCount(part)
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
