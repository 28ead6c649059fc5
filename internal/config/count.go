package config

import (
	"math"
	"reflect"
	"strconv"

	"github.com/caarlos0/env/v11"

	"dedup/count"
)

// countParsers make caarlos0/env read every integer setting as a count
// (count.Parse): "10M", "1.5k", "250_000".
func countParsers() map[reflect.Type]env.ParserFunc {
	return map[reflect.Type]env.ParserFunc{
		reflect.TypeFor[int](): func(s string) (any, error) {
			n, err := count.Parse(s)
			if err == nil && (n > math.MaxInt || n < math.MinInt) {
				err = strconv.ErrRange
			}
			return int(n), err
		},
		reflect.TypeFor[int64](): func(s string) (any, error) {
			n, err := count.Parse(s)
			return n, err
		},
		reflect.TypeFor[uint64](): func(s string) (any, error) {
			return count.ParseUint(s)
		},
	}
}
