// Package placement decides which of several Standard load balancers a
// Service or a node belongs to when multipleStandardLoadBalancerConfigurations
// is set. It is pure: no ARM calls, no Kubernetes client, no goroutines.
//
// Contract:
//
//   - New compiles every label selector of the configurations once and
//     validates them (names present and unique, selectors valid, primaryVMSet
//     not shared, a configuration named after the default load balancer).
//     A *Placer is immutable afterwards and safe for concurrent use.
//   - PlaceService applies the Service selection rules: candidates are the
//     configurations named in the azure-load-balancer-configurations
//     annotation (or all of them); a candidate matches when its
//     serviceNamespaceSelector and serviceLabelSelector match (a nil or
//     empty selector matches everything). Candidates matching with a
//     non-empty selector come first: the ones without are considered only
//     when no such candidate allows placement or holds the Service. A
//     Service already on a candidate considered stays there even when
//     allowServicePlacement has become false and even when another load
//     balancer has fewer rules: placement never rebalances. Otherwise the
//     considered configuration that allows placement with the fewest
//     rules wins, ties going to the first in configuration order. No
//     eligible candidate yields a *NoEligibleLoadBalancerError listing the
//     reason each one was rejected.
//   - PlaceNode applies the node selection rules (first match wins): the
//     configuration whose primaryVMSet is the node's VM set; else every
//     configuration whose nodeSelector matches; else every configuration
//     without a nodeSelector. A node keeps its current load balancer while it
//     is still a target; otherwise the target with the fewest nodes wins, ties
//     going to configuration order. No target yields a
//     *NoEligibleNodeLoadBalancerError.
//   - State records which Service keys and node names are on which
//     configuration. It is safe for concurrent use (an internal mutex); every
//     method takes and releases the lock itself, so a read followed by a
//     placement followed by a write is not atomic: callers that need that
//     serialise per object (the Service and node controllers already do).
//   - InFlight makes concurrent placements count each other: the rules of
//     a Service placed but not yet written count on its load balancer until
//     the caller releases the reservation.
//
// Configuration names are compared case-insensitively, as Azure compares
// resource names; results always carry the name as spelled in the
// configuration.
package placement
