// Package names is the one place azlb derives the names and ARM resource IDs
// of the Azure objects it manages: load balancers and their internal twins,
// frontends, rules, probes, backend pools (the cluster pool and the
// dedicated pools of ExternalTrafficPolicy=Local Services), public IPs, the
// per-Service load balancers, public IPs and service gateway services of
// pod-based load balancing (podip.go), and the IDs of virtual networks,
// subnets and load balancer children.
//
// Every function is pure. Names follow the upstream Azure cloud provider's
// conventions where a cluster may move between the two, except the dedicated
// Local Service pool, whose upstream form is ambiguous (see
// LocalServicePool). ARM compares names case-insensitively, and so does
// every comparison in this package.
package names
