package rotation

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseMode(t *testing.T) {
	for _, m := range modes {
		got, err := ParseMode(strings.ToUpper(m.String()))
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", m.String(), got, err, m)
		}
	}
	for _, s := range []string{"", "bloom", "count"} {
		if _, err := ParseMode(s); err == nil {
			t.Errorf("ParseMode(%q) accepted", s)
		}
	}
	if s := Mode(9).String(); s != "Mode(9)" {
		t.Errorf("Mode(9).String() = %q", s)
	}
}

func TestNewValidates(t *testing.T) {
	good := Options{ExpectedKeys: 1000, FPRate: 0.01, Window: time.Minute, Mode: Plain}
	if _, err := New(good); err != nil {
		t.Fatalf("valid options refused: %v", err)
	}
	zeroMode := good
	zeroMode.Mode = 0
	if p, err := New(zeroMode); err != nil || p.Options().Mode != Counting {
		t.Fatalf("zero mode: %v, %v; want counting", p, err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no keys", func(o *Options) { o.ExpectedKeys = 0 }, "expected keys"},
		{"too many keys", func(o *Options) { o.ExpectedKeys = 1 << 40 }, "expected keys"},
		{"zero rate", func(o *Options) { o.FPRate = 0 }, "false-positive rate"},
		{"rate 1", func(o *Options) { o.FPRate = 1 }, "false-positive rate"},
		{"NaN rate", func(o *Options) { o.FPRate = math.NaN() }, "false-positive rate"},
		{"no window", func(o *Options) { o.Window = 0 }, "window"},
		{"negative window", func(o *Options) { o.Window = -time.Second }, "window"},
		{"huge window", func(o *Options) { o.Window = math.MaxInt64 }, "window"},
		{"bad mode", func(o *Options) { o.Mode = 7 }, "mode"},
	} {
		o := good
		tc.edit(&o)
		if _, err := New(o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
	// Every problem is reported at once.
	_, err := New(Options{})
	for _, want := range []string{"expected keys", "false-positive rate", "window"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New(Options{}) = %v, want it to mention %q", err, want)
		}
	}
}
