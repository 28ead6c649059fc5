package rotation

import (
	"bytes"
	"testing"
	"time"
)

func TestSmoke(t *testing.T) {
	for _, mode := range []Mode{Counting, Plain} {
		p, err := New(Options{ExpectedKeys: 1000, FPRate: 0.01, Window: time.Hour, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		ts := time.Unix(1_700_000_000, 0)
		if p.TestAndAdd([]byte("a"), ts) {
			t.Fatal("new key reported seen")
		}
		if !p.TestAndAdd([]byte("a"), ts) {
			t.Fatal("key not seen")
		}
		var buf bytes.Buffer
		if _, err := p.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		var q Pair
		if _, err := q.ReadFrom(&buf); err != nil {
			t.Fatal(err)
		}
		if !q.Test([]byte("a")) {
			t.Fatal("decoded pair lost key")
		}
	}
}
