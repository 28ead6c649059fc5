package rotation

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// TestSeenAtIsAdvanceThenTest: for every mode, SeenAt(key, ts) answers what
// a copy of the pair advanced to ts answers for Test(key), for event times
// zero, late, inside the current window, one window on, two and more;
// Expired says when that copy holds nothing; and the pair is left
// byte-for-byte as it was.
func TestSeenAtIsAdvanceThenTest(t *testing.T) {
	const w = time.Minute
	base := time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC)
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			p := mustNew(t, Options{ExpectedKeys: 5000, FPRate: 0.01, Window: w, Mode: mode})
			var keys [][]byte
			for i := range 2000 { // the first half in one window, the rest in the next
				k := fmt.Appendf(nil, "key-%d", i)
				keys = append(keys, k)
				p.TestAndAdd(k, base.Add(time.Duration(i/1000)*w+time.Duration(i%1000)*time.Millisecond))
			}
			for i := range 2000 { // never added
				keys = append(keys, fmt.Appendf(nil, "absent-%d", i))
			}
			var before bytes.Buffer
			if _, err := p.WriteTo(&before); err != nil {
				t.Fatal(err)
			}
			cur := base.Add(w) // the current window's start
			for _, ts := range []time.Time{
				{}, base.Add(-time.Hour), cur, cur.Add(w - 1),
				cur.Add(w), cur.Add(2*w - 1), cur.Add(2 * w), cur.Add(5 * w),
			} {
				c := p.Clone()
				c.advance(ts)
				held := 0
				for _, k := range keys {
					want := c.Test(k)
					if got := p.SeenAt(k, ts); got != want {
						t.Fatalf("ts %v, key %s: SeenAt %v, advanced copy's Test %v", ts, k, got, want)
					}
					if want {
						held++
					}
				}
				wantExpired := !ts.IsZero() && !ts.Before(cur.Add(2*w))
				if got := p.Expired(ts); got != wantExpired || (got && held > 0) {
					t.Fatalf("ts %v: Expired %v, want %v (the advanced copy holds %d of the keys)", ts, got, wantExpired, held)
				}
				if ts.Equal(cur.Add(w)) && (held < 1000 || held >= 2000) {
					t.Fatalf("one window on: %d keys held, want the current window's 1000 and few more", held)
				}
			}
			var after bytes.Buffer
			if _, err := p.WriteTo(&after); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before.Bytes(), after.Bytes()) {
				t.Fatal("SeenAt or Expired changed the pair")
			}
		})
	}
	if !mustNew(t, Options{ExpectedKeys: 10, FPRate: 0.01, Window: w}).Expired(base) {
		t.Error("a pair no record started a window is not expired")
	}
}
