package provider

import (
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/privatelink"
)

// frontendInput is what the frontend of one IP family points at: a public IP
// (public load balancer) or a subnet with an optional static private address
// (internal load balancer).
type frontendInput struct {
	family     v1.IPFamily
	publicIPID string
	subnetID   string
	privateIP  string
	// keepIP is the address a new internal frontend takes when no
	// privateIP is asked for (the Service's ingress IP, in the subnet).
	keepIP string
	// zones of an internal frontend: the region's for a new one (zone-
	// redundant where the region has zones), the frontend's own for an
	// existing one (Azure cannot change them). Public frontends take
	// their zones from their public IP.
	zones []*string
	// name, when set, is the name of the Service's existing frontend when
	// it is not names.Frontend (the Azure cloud provider's
	// a<uid>-<subnet> for an internal Service with
	// azure-load-balancer-internal-subnet), which azlb keeps.
	name string
	// requested: privateIP is the address the Service asks for (one it can
	// share with other Services), not one it keeps from before.
	requested bool
	// address is the frontend's address when known before the write (the
	// public IP's, or the requested private one), for messages.
	address string
	// sharedID, when set, is the id of another Service's frontend with the
	// same address (a shared IP, sharedip.go): the rules use it and the
	// Service has no frontend of its own for the family.
	sharedID string
}

// requestedPrivateIP is the private address the Service asks for, "" when
// it asks for none.
func (in frontendInput) requestedPrivateIP() string {
	if in.requested {
		return in.privateIP
	}
	return ""
}

// serviceLBState is the part of a load balancer one Service owns for one IP
// family: its frontend, rules and per-port probes. Shared probes and pools are
// referenced, not owned.
type serviceLBState struct {
	frontend *armnetwork.FrontendIPConfiguration
	rules    []*armnetwork.LoadBalancingRule
	probes   []*armnetwork.Probe
	// sharedProbe is set when a rule uses the cluster-wide shared probe.
	sharedProbe *armnetwork.Probe
}

// desiredInput carries everything buildServiceLBState needs.
type desiredInput struct {
	svc      *v1.Service
	spec     *annotations.ServiceSpec
	lb       names.LoadBalancerRef
	frontend frontendInput
	// poolName is the backend pool the rules send traffic to.
	poolName string
	// sharedProbe: clusterServiceLoadBalancerHealthProbeMode is "shared".
	sharedProbe     bool
	sharedProbePort int32
	sharedProbePath string
	// disableOutboundSNAT mirrors the config (Standard SKU only).
	disableOutboundSNAT bool
}

// buildServiceLBState computes the Service's desired frontend, rules and
// probes for one IP family. It is pure.
func buildServiceLBState(in desiredInput) (*serviceLBState, error) {
	svc, spec := in.svc, in.spec
	fe := names.Frontend(svc, in.frontend.family)
	if in.frontend.name != "" {
		fe = in.frontend.name
	}
	st := &serviceLBState{}
	feID := in.frontend.sharedID
	if feID == "" {
		st.frontend = buildFrontend(fe, in.frontend)
		feID = in.lb.Child("frontendIPConfigurations", fe)
	}
	poolID := in.lb.Child("backendAddressPools", in.poolName)
	local := svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
	distribution := loadDistribution(svc)

	if spec.HAPorts {
		// One rule for every port and protocol: internal load balancers only
		// (annotations.Parse rejects HA ports on public Services). Its
		// floating IP follows the Service even on the IPv6 frontend: there
		// is no NodePort to send it to, and two HA rules with floating IP
		// off on one pool (protocol All, backend port 0) would be refused
		// (RulesUseSameBackendPortProtocolAndPool). On an internal IPv6
		// frontend it carries no traffic either way (docs/load-balancers.md).
		name := names.HARule(svc, in.frontend.family)
		rule := &armnetwork.LoadBalancingRule{
			Name: to.Ptr(name),
			Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
				Protocol:                to.Ptr(armnetwork.TransportProtocolAll),
				FrontendPort:            to.Ptr[int32](0),
				BackendPort:             to.Ptr[int32](0),
				FrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(feID)},
				BackendAddressPool:      &armnetwork.SubResource{ID: to.Ptr(poolID)},
				EnableFloatingIP:        to.Ptr(spec.EnableFloatingIP),
				EnableTCPReset:          to.Ptr(spec.EnableTCPReset),
				IdleTimeoutInMinutes:    spec.TCPIdleTimeoutMinutes,
				LoadDistribution:        to.Ptr(distribution),
			},
		}
		if len(svc.Spec.Ports) > 0 {
			st.attachProbe(rule, in.probeFor(svc.Spec.Ports[0], name, local), in.lb)
		}
		st.rules = append(st.rules, rule)
		return st, nil
	}

	for _, port := range svc.Spec.Ports {
		ov := spec.Port(port.Port)
		if ov.NoLBRule {
			continue
		}
		proto, err := transportProtocol(port.Protocol)
		if err != nil {
			return nil, fmt.Errorf("service %s/%s port %d: %w", svc.Namespace, svc.Name, port.Port, err)
		}
		name := names.Rule(svc, port.Protocol, port.Port, in.frontend.family)
		floating := in.portFloatingIP()
		backendPort := port.Port
		if !floating {
			backendPort = port.NodePort
		}
		props := &armnetwork.LoadBalancingRulePropertiesFormat{
			Protocol:                to.Ptr(proto),
			FrontendPort:            to.Ptr(port.Port),
			BackendPort:             to.Ptr(backendPort),
			FrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(feID)},
			BackendAddressPool:      &armnetwork.SubResource{ID: to.Ptr(poolID)},
			EnableFloatingIP:        to.Ptr(floating),
			LoadDistribution:        to.Ptr(distribution),
		}
		if proto == armnetwork.TransportProtocolTCP {
			props.EnableTCPReset = to.Ptr(spec.EnableTCPReset)
			props.IdleTimeoutInMinutes = spec.TCPIdleTimeoutMinutes
		}
		if in.frontend.publicIPID != "" && in.disableOutboundSNAT {
			props.DisableOutboundSnat = to.Ptr(true)
		}
		rule := &armnetwork.LoadBalancingRule{Name: to.Ptr(name), Properties: props}
		if !ov.NoProbeRule {
			st.attachProbe(rule, in.probeFor(port, name, local), in.lb)
		}
		st.rules = append(st.rules, rule)
	}
	return st, nil
}

// portFloatingIP is whether the rule of a Service port uses floating IP:
// as the Service asks (azure-disable-load-balancer-floating-ip), except on
// the IPv6 frontend of an internal load balancer. Azure documents that
// "Floating IP for IPv6 does not work for Internal Load Balancers" (the
// IPv6 address is a secondary ip configuration): ARM accepts such a rule
// and the data path drops its traffic. So that rule has floating IP off
// and sends to the port's NodePort, as the Azure cloud provider does
// (docs/load-balancers.md, Dual-stack). The HA ports rule is not a port's
// rule: it keeps the Service's setting (see buildServiceLBState).
func (in desiredInput) portFloatingIP() bool { return portFloatingIP(in.spec, in.frontend.family) }

func portFloatingIP(spec *annotations.ServiceSpec, family v1.IPFamily) bool {
	return spec.EnableFloatingIP && !internalIPv6(spec, family)
}

// internalIPv6 reports whether a Service's rules of the family are on the
// IPv6 frontend of an internal load balancer.
func internalIPv6(spec *annotations.ServiceSpec, family v1.IPFamily) bool {
	return spec.Internal && family == v1.IPv6Protocol
}

// loadDistribution maps the Service's session affinity to the rules' load
// distribution: ClientIP keeps a client on one backend (SourceIP, a hash of
// the source and destination addresses); anything else is Default (the
// 5-tuple hash).
func loadDistribution(svc *v1.Service) armnetwork.LoadDistribution {
	if svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
		return armnetwork.LoadDistributionSourceIP
	}
	return armnetwork.LoadDistributionDefault
}

// probeFor returns the probe a rule uses: the shared probe for Cluster
// Services in shared mode, otherwise the port's effective probe named after
// the rule. nil means no probe (the node port is not allocated yet, the
// probe is disabled, or the port is a UDP/SCTP port of a Cluster Service
// that asks for none: Azure has no UDP probe; see annotations.ProbeFor).
func (in desiredInput) probeFor(port v1.ServicePort, name string, local bool) *armnetwork.Probe {
	if in.sharedProbe && !local {
		return &armnetwork.Probe{
			Name: to.Ptr(names.SharedProbe),
			Properties: &armnetwork.ProbePropertiesFormat{
				Protocol:          to.Ptr(armnetwork.ProbeProtocolHTTP),
				Port:              to.Ptr(in.sharedProbePort),
				RequestPath:       to.Ptr(in.sharedProbePath),
				IntervalInSeconds: to.Ptr[int32](5),
				NumberOfProbes:    to.Ptr[int32](2),
				ProbeThreshold:    to.Ptr[int32](2),
			},
		}
	}
	ps := in.spec.ProbeFor(port)
	if local && privatelink.ProxyProtocolRequested(in.svc.Annotations) && ps.Port == in.svc.Spec.HealthCheckNodePort {
		// Behind a Private Link Service with proxy protocol, Azure's
		// probes carry the PROXY header, which kube-proxy's health check
		// server refuses: as the Azure cloud provider does, the Local
		// Service's port is probed as a Cluster Service's would be (TCP
		// on its node port; none for UDP and SCTP ports).
		if port.Protocol != v1.ProtocolTCP && port.Protocol != "" {
			return nil
		}
		ps.Protocol, ps.Port, ps.RequestPath = annotations.ProbeTCP, port.NodePort, ""
	}
	if ps.Disabled || ps.Port == 0 {
		return nil
	}
	if ps.HealthCheck && ps.Port == in.svc.Spec.HealthCheckNodePort {
		// One probe for the frontend's rules (a Local Service).
		name = names.HealthCheckProbe(in.svc, in.frontend.family)
	}
	props := &armnetwork.ProbePropertiesFormat{
		Protocol:          to.Ptr(armnetwork.ProbeProtocol(ps.Protocol)),
		Port:              to.Ptr(ps.Port),
		IntervalInSeconds: to.Ptr(ps.IntervalInSeconds),
		NumberOfProbes:    to.Ptr(ps.NumberOfProbes),
		ProbeThreshold:    to.Ptr(ps.NumberOfProbes),
	}
	if ps.RequestPath != "" {
		props.RequestPath = to.Ptr(ps.RequestPath)
	}
	return &armnetwork.Probe{Name: to.Ptr(name), Properties: props}
}

func (st *serviceLBState) attachProbe(rule *armnetwork.LoadBalancingRule, probe *armnetwork.Probe, lb names.LoadBalancerRef) {
	if probe == nil {
		return
	}
	rule.Properties.Probe = &armnetwork.SubResource{ID: to.Ptr(lb.Child("probes", *probe.Name))}
	if *probe.Name == names.SharedProbe {
		st.sharedProbe = probe
		return
	}
	for _, p := range st.probes {
		if strings.EqualFold(*p.Name, *probe.Name) {
			return
		}
	}
	st.probes = append(st.probes, probe)
}

func buildFrontend(name string, in frontendInput) *armnetwork.FrontendIPConfiguration {
	props := &armnetwork.FrontendIPConfigurationPropertiesFormat{}
	if in.publicIPID != "" {
		props.PublicIPAddress = &armnetwork.PublicIPAddress{ID: to.Ptr(in.publicIPID)}
	} else {
		props.Subnet = &armnetwork.Subnet{ID: to.Ptr(in.subnetID)}
		props.PrivateIPAddressVersion = to.Ptr(ipVersion(in.family))
		if in.privateIP != "" {
			props.PrivateIPAllocationMethod = to.Ptr(armnetwork.IPAllocationMethodStatic)
			props.PrivateIPAddress = to.Ptr(in.privateIP)
		} else {
			props.PrivateIPAllocationMethod = to.Ptr(armnetwork.IPAllocationMethodDynamic)
		}
	}
	fe := &armnetwork.FrontendIPConfiguration{Name: to.Ptr(name), Properties: props}
	if in.publicIPID == "" && len(in.zones) > 0 {
		fe.Zones = in.zones
	}
	return fe
}

func ipVersion(f v1.IPFamily) armnetwork.IPVersion {
	if f == v1.IPv6Protocol {
		return armnetwork.IPVersionIPv6
	}
	return armnetwork.IPVersionIPv4
}

func transportProtocol(p v1.Protocol) (armnetwork.TransportProtocol, error) {
	switch p {
	case v1.ProtocolTCP, "":
		return armnetwork.TransportProtocolTCP, nil
	case v1.ProtocolUDP:
		return armnetwork.TransportProtocolUDP, nil
	default:
		return "", fmt.Errorf("protocol %q is not supported by Azure Load Balancer (TCP or UDP)", p)
	}
}
