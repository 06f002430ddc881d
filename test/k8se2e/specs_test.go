package k8se2e

import (
	"regexp"
	"strings"
)

// spec is an e2e spec the suite runs, and what is expected of it: it
// passes, or (Skip set) e2e.test skips it with a message matching Skip, for
// a reason that holds for Azure itself (docs/kubernetes-e2e.md).
type spec struct {
	Name string
	Skip string
}

// specs are every spec of e2e.test v1.37.1 that matches LoadBalancer or
// ESIPP (18), the other [sig-network] Services specs that create a
// LoadBalancer Service (3), and [sig-apps] Deployment's load balancer spec
// (it runs with --provider azure). Names as e2e.test lists them; they are
// matched without their [tags].
var specs = []spec{
	{Name: "[sig-network] LoadBalancers [Feature:LoadBalancer] should be able to change the type and ports of a TCP service [Slow]"},
	{Name: "[sig-network] LoadBalancers [Feature:LoadBalancer] should be able to change the type and ports of a UDP service [Slow]"},
	{Name: "[sig-network] LoadBalancers [Feature:LoadBalancer] should only allow access from service loadbalancer source ranges [Slow]"},
	{Name: "[sig-network] LoadBalancers [Feature:LoadBalancer] should have session affinity work for LoadBalancer service with Local traffic policy [LinuxOnly] [Slow]"},
	{Name: "[sig-network] LoadBalancers [Feature:LoadBalancer] should be able to switch session affinity for LoadBalancer service with Local traffic policy [LinuxOnly] [Slow]"},
	{Name: "[sig-network] LoadBalancers [Feature:LoadBalancer] should have session affinity work for LoadBalancer service with Cluster traffic policy [LinuxOnly] [Slow]"},
	{Name: "[sig-network] LoadBalancers [Feature:LoadBalancer] should be able to switch session affinity for LoadBalancer service with Cluster traffic policy [LinuxOnly] [Slow]"},
	{Name: "[sig-network] LoadBalancers [Feature:LoadBalancer] should handle load balancer cleanup finalizer for service [Slow]"},
	{Name: "[sig-network] LoadBalancers [Feature:LoadBalancer] should be able to create LoadBalancer Service without NodePort and change it [Slow]"},
	{Name: "[sig-network] LoadBalancers [Feature:LoadBalancer] should be able to preserve UDP traffic when server pod cycles for a LoadBalancer service on different nodes"},
	{Name: "[sig-network] LoadBalancers [Feature:LoadBalancer] should be able to preserve UDP traffic when server pod cycles for a LoadBalancer service on the same nodes"},
	{Name: "[sig-network] LoadBalancers [Feature:LoadBalancer] should not have connectivity disruption during rolling update with externalTrafficPolicy=Cluster [Slow]"},
	{Name: "[sig-network] LoadBalancers [Feature:LoadBalancer] should not have connectivity disruption during rolling update with externalTrafficPolicy=Local [Slow]"},
	{Name: "[sig-network] LoadBalancers ExternalTrafficPolicy: Local [Feature:LoadBalancer] should work for type=LoadBalancer [Slow]"},
	{Name: "[sig-network] LoadBalancers ExternalTrafficPolicy: Local [Feature:LoadBalancer] should only target nodes with endpoints [Slow]"},
	{Name: "[sig-network] LoadBalancers ExternalTrafficPolicy: Local [Feature:LoadBalancer] should target all nodes with endpoints [Slow]"},
	{Name: "[sig-network] LoadBalancers ExternalTrafficPolicy: Local [Feature:LoadBalancer] should work from pods [Slow]"},
	{Name: "[sig-network] Services should serve endpoints on same port and different protocol for internal traffic on Type LoadBalancer"},
	{Name: "[sig-network] Services should fail health check node port if there are only terminating endpoints"},
	{Name: "[sig-network] Services should implement NodePort and HealthCheckNodePort correctly when ExternalTrafficPolicy changes"},
	{Name: "[sig-network] Services should complete a service status lifecycle [Conformance]"},
	{Name: "[sig-apps] Deployment should not disrupt a cloud load-balancer's connectivity during rollout [Provider:aws,azure,gce]"},
}

// e2eFlags configure e2e.test for this cluster (docs/kubernetes-e2e.md).
var e2eFlags = []string{
	// The framework's Azure provider is a null provider in v1.37: it only
	// makes the specs limited to clouds (WithProvider) run.
	"--provider", "azure",
	// Every node is Ready and schedulable once azlb has initialized it.
	"--allowed-not-ready-nodes", "0",
	// No cloud provider logs to collect.
	"--disable-log-dump",
}

// focus is the regular expression that selects specs: for each, its
// container's first word and its leaf text ("should ..."); the full text
// has tags in between.
func focus() string {
	names := make([]string, len(specs))
	for i, s := range specs {
		b := bare(s.Name)
		container, leaf, _ := strings.Cut(b, " should ")
		names[i] = regexp.QuoteMeta(strings.Fields(container)[0]) + ".*" + regexp.QuoteMeta("should "+leaf)
	}
	return strings.Join(names, "|")
}

var tags = regexp.MustCompile(`\[[^\]]*\]`)

// bare is a spec's name without its [tags] and the leading [It], spaces
// folded.
func bare(name string) string {
	return strings.Join(strings.Fields(tags.ReplaceAllString(name, " ")), " ")
}

// specByName finds a spec by its name as the JUnit report gives it.
func specByName(name string) (spec, bool) {
	b := bare(name)
	for _, s := range specs {
		if bare(s.Name) == b {
			return s, true
		}
	}
	return spec{}, false
}
