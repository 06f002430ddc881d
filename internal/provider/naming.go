package provider

import (
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// Names azlb gives to Azure objects. They follow the upstream Azure cloud
// provider's conventions so clusters can move between the two.
const (
	// InternalLBSuffix is appended to a load balancer's name for its
	// internal twin.
	InternalLBSuffix = "-internal"
	// IPv6Suffix marks the IPv6 variant of a pool, frontend, rule or probe.
	IPv6Suffix = "-IPv6"
	// SharedProbeName is the probe shared by ExternalTrafficPolicy=Cluster
	// Services when clusterServiceLoadBalancerHealthProbeMode is "shared".
	SharedProbeName = "cluster-service-shared-health-probe"

	// Tags on public IPs azlb creates. A public IP without them is owned by
	// the user and never deleted by azlb.
	TagServiceName = "k8s-azure-service"
	TagClusterName = "k8s-azure-cluster-name"
)

// frontendBaseName is the prefix of every frontend, rule and probe of a
// Service on a load balancer: "a" + the Service UID without dashes, at most
// 32 characters (cloudprovider.DefaultLoadBalancerName).
func frontendBaseName(svc *v1.Service) string {
	return cloudprovider.DefaultLoadBalancerName(svc)
}

// familySuffix returns "" for IPv4 and "-IPv6" for IPv6.
func familySuffix(family v1.IPFamily) string {
	if family == v1.IPv6Protocol {
		return IPv6Suffix
	}
	return ""
}

// frontendName names the Service's frontend IP configuration for one family.
func frontendName(svc *v1.Service, family v1.IPFamily) string {
	return frontendBaseName(svc) + familySuffix(family)
}

// ruleName names a load-balancing rule (and its per-port probe):
// <base>-<PROTOCOL>-<port>[-IPv6].
func ruleName(svc *v1.Service, protocol v1.Protocol, port int32, family v1.IPFamily) string {
	return frontendBaseName(svc) + "-" + string(protocol) + "-" + strconv.Itoa(int(port)) + familySuffix(family)
}

// clusterPoolName names the node backend pool of a family on every managed
// load balancer: <cluster> and <cluster>-IPv6.
func clusterPoolName(cluster string, family v1.IPFamily) string {
	return cluster + familySuffix(family)
}

// localServicePoolName names the dedicated pool of an
// ExternalTrafficPolicy=Local Service in multiple-SLB mode:
// <namespace>-<name>[-IPv6].
func localServicePoolName(namespace, name string, family v1.IPFamily) string {
	return namespace + "-" + name + familySuffix(family)
}

// publicIPName names a public IP azlb creates for a Service:
// <cluster>-<base>[-IPv6].
func publicIPName(cluster string, svc *v1.Service, family v1.IPFamily) string {
	return cluster + "-" + frontendBaseName(svc) + familySuffix(family)
}

// internalLBName returns the internal twin of a load balancer name.
func internalLBName(name string) string { return name + InternalLBSuffix }

// isInternalLBName reports whether name is an internal load balancer's.
func isInternalLBName(name string) bool {
	return strings.HasSuffix(strings.ToLower(name), InternalLBSuffix)
}

// publicLBName strips the internal suffix.
func publicLBName(name string) string {
	if isInternalLBName(name) {
		return name[:len(name)-len(InternalLBSuffix)]
	}
	return name
}

// ownsName reports whether a frontend, rule or probe name belongs to the
// Service with this base name.
func ownsName(base, name string) bool {
	return strings.EqualFold(name, base) || strings.HasPrefix(strings.ToLower(name), strings.ToLower(base)+"-")
}

// deref reads an optional ARM field; nil is the zero value.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
