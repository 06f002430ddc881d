package provider

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/azlb/azlb/internal/annotations"
)

// Event reasons of Services without node ports
// (spec.allocateLoadBalancerNodePorts: false).
const (
	// EventReasonMissingNodePort: a rule would send to a node port the
	// port does not have; the Service is refused.
	EventReasonMissingNodePort = "MissingNodePort"
	// EventReasonNoHealthProbe: a port's default probe would be on its node
	// port, which it does not have; its rule goes without a probe.
	EventReasonNoHealthProbe = "NoHealthProbe"
	// EventReasonUnsupportedAffinityTimeout: sessionAffinityConfig asks
	// for a timeout Azure's SourceIP distribution does not have.
	EventReasonUnsupportedAffinityTimeout = "UnsupportedSessionAffinityTimeout"
)

// defaultAffinityTimeout is Kubernetes' default ClientIP timeout (3 h).
const defaultAffinityTimeout = 10800

// checkAffinityTimeout warns, once per generation, of a ClientIP timeout
// other than Kubernetes' default: Azure's SourceIP distribution keeps a
// client on a node while the pool does not change, with no timeout.
func (p *Provider) checkAffinityTimeout(svc *v1.Service) {
	var keys []string
	if c := svc.Spec.SessionAffinityConfig; svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP && c != nil && c.ClientIP != nil &&
		c.ClientIP.TimeoutSeconds != nil && *c.ClientIP.TimeoutSeconds != defaultAffinityTimeout {
		keys = []string{fmt.Sprint(*c.ClientIP.TimeoutSeconds)}
	}
	if p.affinityTold.ShouldReport(svc, keys) {
		p.warn(svc, EventReasonUnsupportedAffinityTimeout, "spec.sessionAffinityConfig.clientIP.timeoutSeconds %s is not applied: Azure's SourceIP distribution keeps a client on one node while the backend pool does not change, with no timeout",
			keys[0])
	}
}

// checkNodePorts refuses a Service whose rules would send to a node port a
// port does not have: with floating IP off (and on an internal Service's
// IPv6 frontend, whose rules always have it off) a rule's backend port is
// the NodePort, which spec.allocateLoadBalancerNodePorts: false leaves at
// 0. It returns the ports whose default probe is on a missing node port
// (the rule then has no probe, so every node takes new flows, ready or
// not): reportUnprobed tells the Service.
func (p *Provider) checkNodePorts(svc *v1.Service, spec *annotations.ServiceSpec, families []v1.IPFamily, sharedProbe bool) ([]string, error) {
	var missing, unprobed []string
	local := svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
	for i, port := range svc.Spec.Ports {
		if port.NodePort != 0 || spec.Port(port.Port).NoLBRule || (spec.HAPorts && i > 0) {
			continue // an HA ports rule sends to any port and takes the first port's probe
		}
		floatingOff := false
		for _, f := range families {
			floatingOff = floatingOff || (!portFloatingIP(spec, f) && !spec.HAPorts)
		}
		if floatingOff {
			missing = append(missing, fmt.Sprintf("spec.ports[%d] (port %d)", i, port.Port))
			continue
		}
		if sharedProbe && !local {
			continue // probed through kube-proxy's health port, not the node port
		}
		if ps := spec.ProbeFor(port); !ps.Disabled && ps.Port == 0 {
			unprobed = append(unprobed, fmt.Sprintf("spec.ports[%d] (port %d)", i, port.Port))
		}
	}
	if len(missing) > 0 {
		err := fmt.Errorf("%s: no node port (spec.allocateLoadBalancerNodePorts is false), and the load balancer rule of a port with floating IP off sends to the node port; allocate node ports or leave floating IP on",
			strings.Join(missing, ", "))
		return nil, refuse(EventReasonMissingNodePort, err)
	}
	return unprobed, nil
}

// reportUnprobed warns, once per generation of the Service and set of
// ports, of ports whose default probe is on a missing node port.
func (p *Provider) reportUnprobed(svc *v1.Service, unprobed []string) {
	if p.unprobedTold.ShouldReport(svc, unprobed) {
		p.warn(svc, EventReasonNoHealthProbe, "%s: no node port (spec.allocateLoadBalancerNodePorts is false) for the default health probe, so the rule has none and every node takes new connections; set %s to a port that answers, or allocate node ports",
			strings.Join(unprobed, ", "), annotations.Prefix+"port_<port>_health-probe_port")
	}
}
