package main

import (
	"context"
	"testing"
)

func TestBenchRejectsBadFlagsBeforeRunning(t *testing.T) {
	for _, args := range [][]string{
		{"--keys", "lots"},
		{"--quick", "--full"},
		{"--fp-rate", "2"},
		{"--contenders", "copy,nonesuch"},
		{"--keys", "1M,2M", "--records", "5M"},
		{"--value-size", "4"},
	} {
		if code := runBench(context.Background(), args); code != exitConfig {
			t.Errorf("dedup-bench %q: exit %d, want %d", args, code, exitConfig)
		}
	}
}
