package servicegateway

import "github.com/azlb/azlb/internal/metrics"

// refreshGauges sets the pending-operation gauges and the gateway's totals
// from the current state (set, not counted, so they never drift or go
// negative).
func (e *Controller) refreshGauges() {
	counts := map[string]int{}
	deletions := 0
	e.mu.Lock()
	for _, st := range e.states {
		switch {
		case st.parked != "":
			counts["parked"]++
		case st.deleting && st.draining:
			counts["draining"]++
		case st.deleting:
			counts["deleting"]++
		case st.op == opCreate && !st.started.IsZero():
			counts["creating"]++
		case st.op == opUpdate && !st.started.IsZero():
			counts["updating"]++
		}
		if st.deleting {
			deletions++
		}
	}
	locs, addrs := e.tracker.NRPTotals()
	identities := len(e.egress)
	e.mu.Unlock()
	if e.hasEgress() {
		metrics.SetServiceGatewayEgressIdentities(identities)
	}
	metrics.SetServiceGatewayPending(counts, deletions)
	metrics.SetServiceGatewayTotals(locs, addrs)
}
