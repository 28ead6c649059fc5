package main

import (
	"context"
	"fmt"
	"os"
)

// Placeholders until the bench helper's bench.go and size.go land; that
// helper deletes this file.

func runBench(_ context.Context, _ []string) int {
	fmt.Fprintln(os.Stderr, "dedup bench: not yet built")
	return exitFailure
}

func runSize(_ []string) int {
	fmt.Fprintln(os.Stderr, "dedup size: not yet built")
	return exitFailure
}
