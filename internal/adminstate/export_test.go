package adminstate

import "github.com/azlb/azlb/internal/backendpool"

// Test helpers shared with the external test package (integration tests
// and benchmarks, which import the provider and so cannot be in package
// adminstate).

// EventLog records events for tests.
type EventLog = eventLog

var (
	NewTestNode = node
	Poll        = poll
	CanonicalIP = backendpool.CanonicalIP
	StateOf     = backendpool.AdminStateOf
)

// Metric readers for the external tests.
var (
	OpMetric     = opMetric
	LockWaits    = lockWaits
	UniqueSource = uniqueSource
)
