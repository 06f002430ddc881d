package metrics

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// resetMetrics empties every series, so a test's counts do not depend on
// what earlier tests (or an earlier -count run) recorded.
func resetMetrics() {
	Register()
	opDuration.Reset()
	opFailures.Reset()
	apiDuration.Reset()
	apiErrors.Reset()
	apiRateLimited.Reset()
	apiThrottled.Reset()
	lockWait.Reset()
}
