package count

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "2000": 2000, " 42 ": 42, "-7": -7, "10_000": 10_000,
		"200k": 200_000, "200K": 200_000, "1.5k": 1500, "10M": 10_000_000, "1.5M": 1_500_000,
		"1G": 1_000_000_000, "2g": 2_000_000_000, "-1.5k": -1500,
		"9223372036854775807": math.MaxInt64, "9223372036G": 9_223_372_036_000_000_000,
	} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, why := range map[string]string{
		"":                    "empty",
		"x":                   "not a number",
		"k":                   "a suffix alone",
		"1T":                  "an unknown suffix",
		"1B":                  "an unknown suffix",
		"1.2345k":             "a fraction the suffix does not make whole",
		"0.5":                 "a fraction",
		"NaN":                 "not a number",
		"Inf":                 "infinite",
		"1e400":               "out of range",
		"9223372036855G":      "out of range after the suffix",
		"9223372036854775808": "out of range",
	} {
		if got, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %d; want an error (%s)", in, got, why)
		}
	}
	if _, err := Parse("9223372036855G"); !errors.Is(err, strconv.ErrRange) {
		t.Errorf("Parse out of range: %v, want %v", err, strconv.ErrRange)
	}
}

func TestParseUint(t *testing.T) {
	if got, err := ParseUint("1.5M"); err != nil || got != 1_500_000 {
		t.Errorf("ParseUint(1.5M) = %d, %v", got, err)
	}
	for _, in := range []string{"-1", "-1k"} {
		if _, err := ParseUint(in); !errors.Is(err, ErrNegative) {
			t.Errorf("ParseUint(%q): %v, want %v", in, err, ErrNegative)
		}
	}
}

func TestParseList(t *testing.T) {
	got, err := ParseList("1M, 3M,,10M")
	if err != nil || !slices.Equal(got, []uint64{1e6, 3e6, 10e6}) {
		t.Errorf("ParseList = %v, %v", got, err)
	}
	for _, in := range []string{"", " , ", "1M,x", "1M,-2"} {
		if _, err := ParseList(in); err == nil {
			t.Errorf("ParseList(%q): no error", in)
		}
	}
}
