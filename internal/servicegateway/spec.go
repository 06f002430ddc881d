package servicegateway

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/names"
)

// Admission reasons: the Warning events a Service gets when pod-based load
// balancing cannot serve it. Nothing is created in Azure for it.
const (
	ReasonUnsupportedInternal       = "UnsupportedInternalLoadBalancer"
	ReasonUnsupportedAffinity       = "UnsupportedSessionAffinity"
	ReasonUnsupportedLoadBalancerIP = "UnsupportedLoadBalancerIP"
	ReasonUnsupportedDualStack      = "UnsupportedDualStack"
	ReasonInvalidIdleTimeout        = "InvalidIdleTimeout"
	ReasonUnsupportedNamedPort      = "UnsupportedNamedTargetPort"
	ReasonUnsupportedProtocol       = "UnsupportedProtocol"
	ReasonBackendPortCollision      = "UnsupportedBackendPortCollision"
	ReasonUnsupportedPort           = "UnsupportedPort"
	ReasonUnsupportedAccessControl  = "UnsupportedAccessControl"
	// ReasonUnsupportedAnnotation warns of annotations pod-based load
	// balancing ignores (the Service is provisioned without them).
	ReasonUnsupportedAnnotation = "UnsupportedAnnotation"
)

// Idle timeout bounds of pod-based load balancing rules, in minutes.
const (
	minIdleTimeout     = 4
	maxIdleTimeout     = 30
	defaultIdleTimeout = 4
)

// lbSpec is what a Service asks of its load balancer.
type lbSpec struct {
	family v1.IPFamily
	// idle is the rules' idle timeout in minutes.
	idle  int32
	rules []ruleSpec // sorted by name
}

type ruleSpec struct {
	name        string
	protocol    v1.Protocol
	port        int32
	backendPort int32
}

func (s *lbSpec) equal(o *lbSpec) bool {
	if s == nil || o == nil {
		return s == o
	}
	return s.family == o.family && s.idle == o.idle && slices.Equal(s.rules, o.rules)
}

// rejection says why a Service is not admitted: the event reason and a
// message naming the offending field.
type rejection struct {
	reason, message string
}

func (r *rejection) Error() string { return r.reason + ": " + r.message }

func reject(reason, format string, args ...any) *rejection {
	return &rejection{reason: reason, message: fmt.Sprintf(format, args...)}
}

// unsupportedAnnotations lists, sorted, the Azure load balancer annotations
// (azure-*, port_*) of the Service that pod-based load balancing does not
// interpret: everything but the idle timeout, the keys admit refuses, and
// values that ask for what it always does (floating IP off, TCP reset on,
// no security rule).
func unsupportedAnnotations(svc *v1.Service) []string {
	var out []string
	for k, v := range svc.Annotations {
		name, ok := strings.CutPrefix(k, annotations.Prefix)
		if !ok || (!strings.HasPrefix(name, "azure-") && !strings.HasPrefix(name, "port_")) {
			continue
		}
		v = strings.ToLower(strings.TrimSpace(v))
		switch k {
		case annotations.KeyInternal, annotations.KeyTCPIdleTimeout, annotations.KeyDisableNSGRule,
			annotations.KeyAllowedIPRanges, annotations.KeyAllowedServiceTags, annotations.KeyDenyAllExceptRanges:
			continue
		case annotations.KeyDisableFloatingIP:
			if v == "true" {
				continue
			}
		case annotations.KeyDisableTCPReset:
			if v == "false" {
				continue
			}
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// admit checks a LoadBalancer Service against what pod-based load
// balancing supports and returns its load balancer spec.
func admit(svc *v1.Service) (*lbSpec, *rejection) {
	if v, ok := svc.Annotations[annotations.KeyInternal]; ok && strings.EqualFold(strings.TrimSpace(v), "true") {
		return nil, reject(ReasonUnsupportedInternal, "annotation %s: internal load balancers are not supported with pod-based backend pools", annotations.KeyInternal)
	}
	if svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
		return nil, reject(ReasonUnsupportedAffinity, "spec.sessionAffinity: ClientIP is not supported with pod-based backend pools")
	}
	//nolint:staticcheck // spec.loadBalancerIP is deprecated, and still must be refused
	if svc.Spec.LoadBalancerIP != "" {
		return nil, reject(ReasonUnsupportedLoadBalancerIP, "spec.loadBalancerIP: a requested IP is not supported with pod-based backend pools")
	}
	// azlb writes no security rules for pod-based Services: a source
	// restriction would be ignored, so the Service is refused (fail
	// closed) rather than exposed to more sources than it allows.
	if len(svc.Spec.LoadBalancerSourceRanges) > 0 {
		return nil, reject(ReasonUnsupportedAccessControl, "spec.loadBalancerSourceRanges: source restrictions are not supported with pod-based backend pools (azlb writes no security rules for them); remove it and restrict access in the pod subnet's network security group")
	}
	for _, key := range []string{annotations.KeyAllowedIPRanges, annotations.KeyAllowedServiceTags, annotations.KeyDenyAllExceptRanges} {
		if _, ok := svc.Annotations[key]; ok {
			return nil, reject(ReasonUnsupportedAccessControl, "annotation %s: source restrictions are not supported with pod-based backend pools (azlb writes no security rules for them); remove it and restrict access in the pod subnet's network security group", key)
		}
	}
	if len(svc.Spec.IPFamilies) > 1 {
		return nil, reject(ReasonUnsupportedDualStack, "spec.ipFamilies: dual-stack Services are not supported with pod-based backend pools; use one family")
	}
	spec := &lbSpec{family: v1.IPv4Protocol, idle: defaultIdleTimeout}
	if len(svc.Spec.IPFamilies) == 1 {
		spec.family = svc.Spec.IPFamilies[0]
	}
	if v, ok := svc.Annotations[annotations.KeyTCPIdleTimeout]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < minIdleTimeout || n > maxIdleTimeout {
			return nil, reject(ReasonInvalidIdleTimeout, "annotation %s: %q must be a whole number of minutes from %d to %d", annotations.KeyTCPIdleTimeout, v, minIdleTimeout, maxIdleTimeout)
		}
		spec.idle = int32(n)
	}
	seen := map[string]string{}
	front := map[string]string{}
	for i, p := range svc.Spec.Ports {
		at := fmt.Sprintf("spec.ports[%d]", i)
		if p.Protocol != v1.ProtocolTCP && p.Protocol != v1.ProtocolUDP {
			return nil, reject(ReasonUnsupportedProtocol, "%s.protocol: %q is not supported with pod-based backend pools (TCP or UDP)", at, p.Protocol)
		}
		if p.TargetPort.Type == intstr.String {
			return nil, reject(ReasonUnsupportedNamedPort, "%s.targetPort: named port %q is not supported with pod-based backend pools; use a number", at, p.TargetPort.StrVal)
		}
		backend := p.TargetPort.IntVal
		if backend == 0 {
			backend = p.Port
		}
		if p.Port < 1 || p.Port > 65534 || backend < 1 || backend > 65535 {
			return nil, reject(ReasonUnsupportedPort, "%s: port %d (1 to 65534) or target port %d (1 to 65535) is out of range", at, p.Port, backend)
		}
		if prev, dup := front[names.ServiceRule(p.Protocol, p.Port)]; dup {
			return nil, reject(ReasonUnsupportedPort, "%s and %s both expose %s port %d", prev, at, p.Protocol, p.Port)
		}
		front[names.ServiceRule(p.Protocol, p.Port)] = at
		key := string(p.Protocol) + "/" + strconv.Itoa(int(backend))
		if prev, dup := seen[key]; dup {
			return nil, reject(ReasonBackendPortCollision, "%s and %s both send %s to target port %d; pods are reached directly, so each protocol and target port may be used once", prev, at, p.Protocol, backend)
		}
		seen[key] = at
		spec.rules = append(spec.rules, ruleSpec{name: names.ServiceRule(p.Protocol, p.Port), protocol: p.Protocol, port: p.Port, backendPort: backend})
	}
	slices.SortFunc(spec.rules, func(a, b ruleSpec) int { return strings.Compare(a.name, b.name) })
	return spec, nil
}
