package readinessgate

import (
	"testing"

	"go.uber.org/goleak"
)

// The controller runs workers and informers until Run's context ends: none
// may outlive the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
