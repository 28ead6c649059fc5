package explain_test

import (
	"os"
	"testing"

	"dedup/internal/testkit"
)

// TestMain refuses kafka.DefaultTransport (testkit.Run): the stage's
// clients here have transports of their own.
func TestMain(m *testing.M) { os.Exit(testkit.Run(m)) }
