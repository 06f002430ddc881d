package status

import (
	"testing"

	"go.uber.org/goleak"
)

// The status reads run ARM clients and informers: none may outlive the
// tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
