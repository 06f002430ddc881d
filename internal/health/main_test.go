package health

import (
	"testing"

	"go.uber.org/goleak"
)

// The tests serve the health endpoints: no server goroutine may outlive
// them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
