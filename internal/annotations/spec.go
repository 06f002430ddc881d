package annotations

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"
)

// ProbeProtocol is a health probe protocol, spelled as the ARM API spells it.
type ProbeProtocol string

// Probe protocols accepted (case-insensitively) in the probe protocol
// annotations.
const (
	ProbeTCP   ProbeProtocol = "Tcp"
	ProbeHTTP  ProbeProtocol = "Http"
	ProbeHTTPS ProbeProtocol = "Https"
)

// ServiceSpec is the validated content of a Service's annotations, plus the
// few Service fields ProbeFor needs. Fields whose annotation is absent hold
// their documented default.
type ServiceSpec struct {
	// Internal: azure-load-balancer-internal. Default false.
	Internal bool
	// InternalSubnet: azure-load-balancer-internal-subnet; "" means the
	// cloud configuration's subnet. Only meaningful when Internal.
	InternalSubnet string
	// PIPName, PIPNameIPv6: azure-pip-name, azure-pip-name-ipv6; "" means a
	// generated name. Only meaningful for public Services.
	PIPName     string
	PIPNameIPv6 string
	// IPv4, IPv6: azure-load-balancer-ipv4/-ipv6; the zero Addr when unset.
	IPv4 netip.Addr
	IPv6 netip.Addr
	// LoadBalancerConfigurations: azure-load-balancer-configurations, the
	// configuration names in annotation order, trimmed and de-duplicated
	// case-insensitively (first spelling kept). Empty when unset.
	LoadBalancerConfigurations []string
	// DNSLabelName: azure-dns-label-name; "" when unset.
	DNSLabelName string
	// PIPResourceGroup: azure-load-balancer-resource-group, the resource
	// group of the Service's public IPs; "" means the cluster's.
	PIPResourceGroup string
	// PIPPrefixID, PIPPrefixIDIPv6: azure-pip-prefix-id(-ipv6), the public
	// IP prefix a created public IP of the family takes its address from;
	// "" when unset.
	PIPPrefixID     string
	PIPPrefixIDIPv6 string
	// PIPTags: azure-pip-tags, tags put on the public IPs azlb owns for the
	// Service; nil when unset.
	PIPTags map[string]string
	// DroppedPIPTags are the items of azure-pip-tags that are not a
	// key=value pair with a non-blank key ("team", "=x", "a=b=c"), trimmed,
	// in order: dropped, as the Azure cloud provider drops them, and told
	// to the user in a Warning event (config.DroppedTags).
	DroppedPIPTags []string
	// PIPIPTags: azure-pip-ip-tags, the IP tags of a public IP azlb
	// creates, in annotation order; nil when unset.
	PIPIPTags []IPTag
	// AdditionalPublicIPs: azure-additional-public-ips, addresses that are
	// extra destinations of the Service's security rules (a cross-region
	// load balancer's frontend in front of it), in annotation order,
	// de-duplicated; nil when unset. Use AdditionalIPsOf for a family.
	AdditionalPublicIPs []netip.Addr
	// TCPIdleTimeoutMinutes: azure-load-balancer-tcp-idle-timeout; nil
	// leaves Azure's default (4 minutes).
	TCPIdleTimeoutMinutes *int32
	// EnableFloatingIP is the negation of
	// azure-disable-load-balancer-floating-ip. Default true.
	EnableFloatingIP bool
	// EnableTCPReset is the negation of azure-load-balancer-disable-tcp-reset.
	// Default true (Standard SKU).
	EnableTCPReset bool
	// HAPorts: azure-load-balancer-enable-high-availability-ports. Default
	// false; true only with Internal.
	HAPorts bool
	// Probe holds the service-wide probe annotations.
	Probe ProbeOverrides
	// Ports holds the per-port annotations, keyed by Service port number.
	// Only ports with at least one annotation have an entry.
	Ports map[int32]PortOverrides
	// Unsupported lists, sorted, the keys under service.beta.kubernetes.io/
	// that look like Azure load balancer annotations (azure-* or port_*) but
	// that this package does not interpret. They are ignored; the caller may
	// report them.
	Unsupported []string

	local               bool
	healthCheckNodePort int32
	servicePorts        []v1.ServicePort
}

// ProbeOverrides are probe settings set by annotation; zero values (""/nil)
// mean "not set".
type ProbeOverrides struct {
	Protocol          ProbeProtocol
	RequestPath       string
	IntervalInSeconds *int32
	NumberOfProbes    *int32
	// Port is the per-port health-probe_port value; never set service-wide.
	Port *ProbePortRef
}

// ProbePortRef is a health-probe_port value: a Service port name, or a
// number. See ProbeFor for how it resolves.
type ProbePortRef struct {
	Name   string
	Number int32
}

// PortOverrides are the per-port annotations of one Service port.
type PortOverrides struct {
	Probe ProbeOverrides
	// NoLBRule: port_{port}_no_lb_rule. No load-balancing rule (and so no
	// probe) is created for the port.
	NoLBRule bool
	// NoProbeRule: port_{port}_no_probe_rule. The rule is created without a
	// health probe.
	NoProbeRule bool
}

// ProbeSpec is the effective health probe of one Service port.
type ProbeSpec struct {
	Protocol ProbeProtocol
	// Port is the node port probed; 0 when the Service has no node port
	// allocated yet (the caller must wait or skip).
	Port int32
	// RequestPath is set for Http and Https, "" for Tcp.
	RequestPath       string
	IntervalInSeconds int32
	NumberOfProbes    int32
	// Disabled is true when port_{port}_no_probe_rule or
	// port_{port}_no_lb_rule is true, or when the port is a UDP or SCTP port
	// of an ExternalTrafficPolicy=Cluster Service that asks for no probe
	// explicitly (see ProbeFor): create no probe for the port.
	Disabled bool
	// HealthCheck: the probe is the ExternalTrafficPolicy=Local Service's
	// one probe of spec.healthCheckNodePort, shared by the rules of a
	// frontend (names.HealthCheckProbe), with service-wide settings.
	HealthCheck bool
}

// Port returns the per-port annotations of a Service port (zero when none).
func (s *ServiceSpec) Port(port int32) PortOverrides {
	return s.Ports[port]
}
