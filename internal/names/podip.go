package names

import (
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Names of pod-based (ServiceGateway) load balancing. Every Service gets its
// own load balancer and public IP, named after its UID.
const (
	// ServiceGateway is the cluster's ServiceGateway, in the cluster's
	// resource group. It is provisioned with the cluster; azlb never creates
	// or deletes it.
	ServiceGateway = "servicegateway"
	// DefaultOutboundService is the outbound service the resource provider
	// registers in the gateway (its default NAT gateway). azlb never touches
	// it.
	DefaultOutboundService = "default-natgw"
	// ServiceFrontend is the one frontend of a Service's load balancer.
	ServiceFrontend = "frontend"
	// ServicePIPSuffix ends the name of a Service's public IP.
	ServicePIPSuffix = "-pip"
)

// ServiceUID is the lower-cased UID that names a Service's load balancer,
// its pool and its service gateway service.
func ServiceUID(uid types.UID) string { return strings.ToLower(string(uid)) }

// ServicePublicIP names a Service's public IP: <uid>-pip.
func ServicePublicIP(uid types.UID) string { return ServiceUID(uid) + ServicePIPSuffix }

// ServiceRule names the rule of a Service port: rule-<protocol>-<port>,
// e.g. rule-tcp-80.
func ServiceRule(protocol v1.Protocol, port int32) string {
	return "rule-" + strings.ToLower(string(protocol)) + "-" + strconv.Itoa(int(port))
}

// IsUID reports whether s has the 8-4-4-4-12 hex form of a Kubernetes UID.
func IsUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
				return false
			}
		}
	}
	return true
}

// UIDOfServicePublicIP returns the UID a public IP named <uid>-pip belongs
// to, lower-cased, or false for any other name.
func UIDOfServicePublicIP(name string) (string, bool) {
	if !HasSuffixFold(name, ServicePIPSuffix) {
		return "", false
	}
	uid := name[:len(name)-len(ServicePIPSuffix)]
	if !IsUID(uid) {
		return "", false
	}
	return strings.ToLower(uid), true
}
