package main

import (
	"fmt"
	"os"
)

// runSize is `dedup size`.
func runSize(args []string) int {
	fmt.Fprintln(os.Stderr, "dedup size: not yet")
	return exitFailure
}
