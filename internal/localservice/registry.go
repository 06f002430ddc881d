package localservice

import (
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/azlb/azlb/internal/provider"
)

// PoolName is the dedicated pool of a Service for a family, as the provider
// names it: <namespace>-<name>, and <namespace>-<name>-IPv6.
func PoolName(namespace, name string, family v1.IPFamily) string {
	n := namespace + "-" + name
	if family == v1.IPv6Protocol {
		n += provider.IPv6Suffix
	}
	return n
}

// poolNameOfKey is PoolName for a namespace/name key.
func poolNameOfKey(key string, family v1.IPFamily) string {
	ns, name, _ := strings.Cut(key, "/")
	return PoolName(ns, name, family)
}

// covers reports whether the registration still wants the entry: same load
// balancer and a pool of one of its families.
func (r registration) covers(op *operation) bool {
	if !strings.EqualFold(r.lb, op.lb) {
		return false
	}
	for _, f := range r.families {
		if strings.EqualFold(poolNameOfKey(op.service, f), op.pool) {
			return true
		}
	}
	return false
}

// hasPool reports whether the registration's pools on lb include pool.
func (r registration) hasPool(key string, g groupKey) bool {
	if !strings.EqualFold(r.lb, g.lb) {
		return false
	}
	for _, f := range r.families {
		if strings.EqualFold(poolNameOfKey(key, f), g.pool) {
			return true
		}
	}
	return false
}

// cutKey splits a namespace/name key.
func cutKey(key string) (namespace, name string, ok bool) {
	return strings.Cut(key, "/")
}
