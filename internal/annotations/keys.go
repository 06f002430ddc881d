package annotations

import "strconv"

// Prefix is the namespace of every annotation this package reads.
const Prefix = "service.beta.kubernetes.io/"

// Service-wide annotation keys.
const (
	KeyInternal                   = Prefix + "azure-load-balancer-internal"
	KeyInternalSubnet             = Prefix + "azure-load-balancer-internal-subnet"
	KeyPIPName                    = Prefix + "azure-pip-name"
	KeyPIPNameIPv6                = Prefix + "azure-pip-name-ipv6"
	KeyIPv4                       = Prefix + "azure-load-balancer-ipv4"
	KeyIPv6                       = Prefix + "azure-load-balancer-ipv6"
	KeyLoadBalancerConfigurations = Prefix + "azure-load-balancer-configurations"
	KeyDNSLabelName               = Prefix + "azure-dns-label-name"
	KeyTCPIdleTimeout             = Prefix + "azure-load-balancer-tcp-idle-timeout"
	KeyDisableFloatingIP          = Prefix + "azure-disable-load-balancer-floating-ip"
	KeyDisableTCPReset            = Prefix + "azure-load-balancer-disable-tcp-reset"
	KeyHAPorts                    = Prefix + "azure-load-balancer-enable-high-availability-ports"
	KeyProbeProtocol              = Prefix + "azure-load-balancer-health-probe-protocol"
	KeyProbeRequestPath           = Prefix + "azure-load-balancer-health-probe-request-path"
	KeyProbeInterval              = Prefix + "azure-load-balancer-health-probe-interval"
	KeyProbeNumOfProbe            = Prefix + "azure-load-balancer-health-probe-num-of-probe"
	KeyAdditionalPublicIPs        = Prefix + "azure-additional-public-ips"
)

// Public IP keys (publicip.go).
const (
	KeyPIPResourceGroup = Prefix + "azure-load-balancer-resource-group"
	KeyPIPPrefixID      = Prefix + "azure-pip-prefix-id"
	KeyPIPPrefixIDIPv6  = Prefix + "azure-pip-prefix-id-ipv6"
	KeyPIPTags          = Prefix + "azure-pip-tags"
	KeyPIPIPTags        = Prefix + "azure-pip-ip-tags"
)

// Access-control keys: recognised here, parsed and validated by
// internal/accesscontrol (an invalid value there fails closed instead of
// failing the reconcile).
const (
	KeyAllowedIPRanges     = Prefix + "azure-allowed-ip-ranges"
	KeyAllowedServiceTags  = Prefix + "azure-allowed-service-tags"
	KeyDenyAllExceptRanges = Prefix + "azure-deny-all-except-load-balancer-source-ranges"
	KeyDisableNSGRule      = Prefix + "azure-disable-load-balancer-nsg-rule"
)

// Per-port annotation suffixes; the full key is PortKey(port, suffix), i.e.
// service.beta.kubernetes.io/port_{port}_{suffix} where {port} is the
// Service port number (spec.ports[].port).
const (
	PortSuffixProbeProtocol    = "health-probe_protocol"
	PortSuffixProbeRequestPath = "health-probe_request-path"
	PortSuffixProbeInterval    = "health-probe_interval"
	PortSuffixProbeNumOfProbe  = "health-probe_num-of-probe"
	PortSuffixProbePort        = "health-probe_port"
	PortSuffixNoLBRule         = "no_lb_rule"
	PortSuffixNoProbeRule      = "no_probe_rule"
)

// portKeyPrefix starts every per-port key after Prefix.
const portKeyPrefix = "port_"

// PortKey returns the per-port annotation key for a Service port number.
func PortKey(port int32, suffix string) string {
	return Prefix + portKeyPrefix + strconv.FormatInt(int64(port), 10) + "_" + suffix
}

// Limits enforced on annotation values.
const (
	// MinTCPIdleTimeoutMinutes and MaxTCPIdleTimeoutMinutes bound the
	// load-balancing rule idle timeout Azure accepts.
	MinTCPIdleTimeoutMinutes = 4
	MaxTCPIdleTimeoutMinutes = 100
	// MinProbeIntervalSeconds is Azure's minimum probe interval.
	MinProbeIntervalSeconds = 5
	// MinNumberOfProbes is the smallest accepted num-of-probe.
	MinNumberOfProbes = 1
	// MaxProbeWindowSeconds is Azure's limit on interval × num-of-probe.
	MaxProbeWindowSeconds = 120
)

// Probe defaults used when no annotation sets the value.
const (
	DefaultProbeIntervalSeconds = 5
	DefaultNumberOfProbes       = 2
	// DefaultProbeRequestPath is the Http/Https path when none is set.
	DefaultProbeRequestPath = "/"
	// LocalProbeRequestPath is the kube-proxy health check path probed on
	// spec.healthCheckNodePort for ExternalTrafficPolicy=Local Services.
	LocalProbeRequestPath = "/healthz"
)
