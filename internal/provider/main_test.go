package provider

import (
	"testing"

	"go.uber.org/goleak"
)

// The committer starts a goroutine per load balancer written in a round, and
// the tests start emulators and ARM clients: none may outlive the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
