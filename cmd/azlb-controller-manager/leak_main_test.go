package main

import (
	"testing"

	"go.uber.org/goleak"
)

// The tests start servers, informers and ARM clients: none may outlive
// them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
