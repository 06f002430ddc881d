package placement

import (
	"fmt"
	"strings"
)

// Rejection says why one configuration was not a placement target.
type Rejection struct {
	// Config is the configuration name.
	Config string
	// Reasons lists every rule the object failed, in a fixed order.
	Reasons []string
}

func (r Rejection) String() string {
	return r.Config + ": " + strings.Join(r.Reasons, "; ")
}

// NoEligibleLoadBalancerError is returned by PlaceService when no candidate
// configuration may take the Service. The caller reports it as a Warning
// event on the Service.
type NoEligibleLoadBalancerError struct {
	// Service is the Service key, "namespace/name".
	Service string
	// Requested is true when the candidates came from the
	// azure-load-balancer-configurations annotation.
	Requested bool
	// Rejections has one entry per candidate, in configuration order.
	Rejections []Rejection
}

func (e *NoEligibleLoadBalancerError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "service %q: no eligible load balancer configuration", e.Service)
	if e.Requested {
		b.WriteString(" among those requested by annotation " + ConfigurationsAnnotation)
	}
	for i, r := range e.Rejections {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (%s)", r.Config, strings.Join(r.Reasons, ", "))
	}
	return b.String()
}

// UnknownConfigurationError is returned by PlaceService when the
// azure-load-balancer-configurations annotation names configurations that do
// not exist.
type UnknownConfigurationError struct {
	// Service is the Service key, "namespace/name".
	Service string
	// Unknown lists the unknown names as written in the annotation.
	Unknown []string
	// Known lists the configured names, in configuration order.
	Known []string
}

func (e *UnknownConfigurationError) Error() string {
	return fmt.Sprintf("service %q: annotation %s names unknown load balancer configuration(s) %s; configured: %s",
		e.Service, ConfigurationsAnnotation, quoteList(e.Unknown), quoteList(e.Known))
}

// NoEligibleNodeLoadBalancerError is returned by PlaceNode when no
// configuration can take the node: no primaryVMSet is the node's VM set, no
// nodeSelector matches and every configuration has a nodeSelector. The
// caller reports it as a Warning event on the node.
type NoEligibleNodeLoadBalancerError struct {
	// Node is the node name.
	Node string
	// VMSet is the node's VM set ("" when unknown).
	VMSet string
	// Rejections has one entry per configuration, in configuration order.
	Rejections []Rejection
}

func (e *NoEligibleNodeLoadBalancerError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "node %q", e.Node)
	if e.VMSet != "" {
		fmt.Fprintf(&b, " (VM set %q)", e.VMSet)
	}
	b.WriteString(": no load balancer configuration can take it (no primaryVMSet is its VM set, no nodeSelector matches, and every configuration has a nodeSelector)")
	for i, r := range e.Rejections {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (%s)", r.Config, strings.Join(r.Reasons, ", "))
	}
	return b.String()
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func quote(s string) string { return fmt.Sprintf("%q", s) }
