package cluster

import (
	"testing"
	"time"
)

func TestJitterWithinBounds(t *testing.T) {
	for range 1000 {
		if d := Jitter(time.Second); d < 800*time.Millisecond || d >= 1200*time.Millisecond {
			t.Fatalf("Jitter(1s) = %v, want within [0.8s, 1.2s)", d)
		}
	}
}
