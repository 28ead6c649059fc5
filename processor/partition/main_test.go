package partition

import (
	"os"
	"testing"

	"dedup/internal/testkit"
)

// TestMain refuses kafka.DefaultTransport (testkit.Run): a client on it
// would leave a connection pool behind that dials the test's broker port
// for the rest of the process.
func TestMain(m *testing.M) { os.Exit(testkit.Run(m)) }
