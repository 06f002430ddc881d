package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

const (
	// InternalLBSuffix is appended to a load balancer's name for its
	// internal twin.
	InternalLBSuffix = "-internal"
	// IPv6Suffix marks the IPv6 variant of a frontend, rule, probe, cluster
	// pool or public IP.
	IPv6Suffix = "-IPv6"
	// SharedProbe is the probe shared by ExternalTrafficPolicy=Cluster
	// Services when clusterServiceLoadBalancerHealthProbeMode is "shared".
	SharedProbe = "cluster-service-shared-health-probe"

	// TagServiceName tags the public IPs azlb creates with the Service's
	// namespace/name; a public IP without it (and TagClusterName) belongs to
	// the user and is never deleted.
	TagServiceName = "k8s-azure-service"
	// TagClusterName tags the public IPs and load balancers azlb creates
	// with the cluster name.
	TagClusterName = "k8s-azure-cluster-name"

	// MaxPoolName is the longest backend address pool name ARM accepts.
	MaxPoolName = 80
)

// FamilySuffix is "" for IPv4 and IPv6Suffix for IPv6.
func FamilySuffix(family v1.IPFamily) string {
	if family == v1.IPv6Protocol {
		return IPv6Suffix
	}
	return ""
}

// ServiceKey is "namespace/name".
func ServiceKey(svc *v1.Service) string { return svc.Namespace + "/" + svc.Name }

// FrontendBase is the prefix of every frontend, rule and probe of a
// Service: "a" + the Service UID without dashes, at most 32 characters
// (cloudprovider.DefaultLoadBalancerName).
func FrontendBase(svc *v1.Service) string { return cloudprovider.DefaultLoadBalancerName(svc) }

// Frontend names the Service's frontend IP configuration of a family.
func Frontend(svc *v1.Service, family v1.IPFamily) string {
	return FrontendBase(svc) + FamilySuffix(family)
}

// baseLen is the length of a Service's base name ("a" + its UID without
// dashes, cut to 32 characters).
const baseLen = 32

// ServiceBaseOf is the base name of the Service a frontend, rule or probe
// name belongs to: the 32 characters before "-<protocol>-<port>...", or
// the frontend name without its family suffix.
func ServiceBaseOf(name string) string {
	if len(name) > baseLen && name[baseLen] == '-' {
		return name[:baseLen]
	}
	return ServiceBaseOfFrontend(name)
}

// ServiceBaseOfFrontend strips the family suffix from a frontend name.
func ServiceBaseOfFrontend(name string) string {
	if HasSuffixFold(name, IPv6Suffix) {
		return name[:len(name)-len(IPv6Suffix)]
	}
	return name
}

// Rule names a load-balancing rule (and its per-port probe):
// <base>-<PROTOCOL>-<port>[-IPv6].
func Rule(svc *v1.Service, protocol v1.Protocol, port int32, family v1.IPFamily) string {
	return FrontendBase(svc) + "-" + string(protocol) + "-" + strconv.Itoa(int(port)) + FamilySuffix(family)
}

// HealthCheckProbe names the one probe of an ExternalTrafficPolicy=Local
// Service's frontend, on its spec.healthCheckNodePort:
// <base>-TCP-<healthCheckNodePort>[-IPv6], the name the Azure cloud
// provider gives it.
func HealthCheckProbe(svc *v1.Service, family v1.IPFamily) string {
	return Rule(svc, v1.ProtocolTCP, svc.Spec.HealthCheckNodePort, family)
}

// HARule names the single high-availability-ports rule of an internal
// Service: <base>-HA[-IPv6].
func HARule(svc *v1.Service, family v1.IPFamily) string {
	return FrontendBase(svc) + "-HA" + FamilySuffix(family)
}

// Owns reports whether a frontend, rule or probe name belongs to the
// Service with this base name.
func Owns(base, name string) bool {
	return strings.EqualFold(name, base) || strings.HasPrefix(strings.ToLower(name), strings.ToLower(base)+"-")
}

// ClusterPool names the node pool of a family on every managed load
// balancer: <cluster> and <cluster>-IPv6.
func ClusterPool(cluster string, family v1.IPFamily) string { return cluster + FamilySuffix(family) }

// LocalServicePool names the dedicated pool of an ExternalTrafficPolicy=Local
// Service (multiple Standard load balancers): "<namespace>.<name>" for IPv4
// and "<namespace>.<name>.IPv6" for IPv6.
//
// A dot can appear in neither a namespace nor a Service name, so the name is
// unambiguous, and the family marker ".IPv6" cannot be mistaken for the end
// of a Service name (ARM compares names case-insensitively, so "-IPv6" could:
// the IPv6 pool of a/b would be the IPv4 pool of Service a/b-ipv6). A
// "<namespace>.<name>" longer than 74 characters (so that the IPv6 name
// stays within MaxPoolName) is cut to 62 characters and completed with "-"
// and 12 hex digits of the SHA-256 of "namespace/name": 75 characters, longer
// than any uncut name, so the two forms never meet.
func LocalServicePool(namespace, name string, family v1.IPFamily) string {
	base := namespace + "." + name
	const uncut = MaxPoolName - len(".IPv6") - 1
	if len(base) > uncut {
		sum := sha256.Sum256([]byte(namespace + "/" + name))
		base = base[:62] + "-" + hex.EncodeToString(sum[:])[:12]
	}
	if family == v1.IPv6Protocol {
		return base + ".IPv6"
	}
	return base
}

// LegacyLocalServicePool is the name earlier releases gave a Local
// Service's pool: <namespace>-<name>[-IPv6]. It is ambiguous (a-b/c and
// a/b-c share it); azlb only reads it, to adopt such pools.
func LegacyLocalServicePool(namespace, name string, family v1.IPFamily) string {
	return namespace + "-" + name + FamilySuffix(family)
}

// PublicIP names a public IP azlb creates for a Service:
// <cluster>-<base>[-IPv6].
func PublicIP(cluster string, svc *v1.Service, family v1.IPFamily) string {
	return cluster + "-" + FrontendBase(svc) + FamilySuffix(family)
}

// InternalLB returns the internal twin of a load balancer name.
func InternalLB(name string) string { return name + InternalLBSuffix }

// IsInternalLB reports whether name is an internal load balancer's.
func IsInternalLB(name string) bool { return HasSuffixFold(name, InternalLBSuffix) }

// PublicLB strips the internal suffix.
func PublicLB(name string) string {
	if IsInternalLB(name) {
		return name[:len(name)-len(InternalLBSuffix)]
	}
	return name
}

// LoadBalancer returns the Azure load balancer name for a configuration (or
// the default load balancer): the name itself, or its internal twin.
func LoadBalancer(configName string, internal bool) string {
	if internal {
		return InternalLB(configName)
	}
	return configName
}

// HasSuffixFold is strings.HasSuffix ignoring case.
func HasSuffixFold(s, suffix string) bool {
	return len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix)
}
