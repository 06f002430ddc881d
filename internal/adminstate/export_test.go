package adminstate

// Test helpers shared with the external test package (integration tests
// and benchmarks, which import the provider and so cannot be in package
// adminstate).

// EventLog records events for tests.
type EventLog = eventLog

var (
	NewTestNode = node
	Poll        = poll
	CanonicalIP = canonicalIP
	StateOf     = stateOf
)

// Metric readers for the external tests.
var (
	OpMetric     = opMetric
	LockWaits    = lockWaits
	UniqueSource = uniqueSource
)
