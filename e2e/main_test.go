// Package e2e_test drives the built dedup binary as a real process against an
// in-process kfake broker (or the external cluster of E2E_KAFKA_BROKERS),
// configured only through the environment variables of the outside
// interface the README documents. It proves the
// contract's exactly-once promise across SIGKILL, SIGTERM, rebalances and a
// broker restart, and the configuration-error exit code.
package e2e_test

import (
	"fmt"
	"os"
	"testing"

	"dedup/internal/testkit"
)

// binPath is the dedup binary built once for the whole package.
var binPath string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// E2E_BINARY tests a prebuilt binary instead (say, a release build).
	if binPath = os.Getenv("E2E_BINARY"); binPath == "" {
		dir, err := os.MkdirTemp("", "dedup-e2e-bin-")
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: create temp dir: %v\n", err)
			return 1
		}
		defer os.RemoveAll(dir)
		if binPath, err = testkit.BuildBinary(dir); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
			return 1
		}
	}
	stop, err := useExternal(binPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer stop()
	return testkit.Run(m)
}
