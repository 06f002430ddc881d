package lbclass

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Class is the load-balancer class azlb serves (--load-balancer-class).
// The zero value is the default implementation: the LoadBalancer Services
// without spec.loadBalancerClass.
type Class string

// Parse checks a --load-balancer-class value: empty (the default
// implementation) or a name the API server accepts in
// spec.loadBalancerClass, a label-style qualified name such as
// "example.com/azlb".
func Parse(s string) (Class, error) {
	if s == "" {
		return "", nil
	}
	if errs := validation.IsQualifiedName(s); len(errs) > 0 {
		return "", fmt.Errorf("load balancer class %q: %s", s, strings.Join(errs, "; "))
	}
	return Class(s), nil
}

// IsDefault reports whether c is the default implementation (no class).
func (c Class) IsDefault() bool { return c == "" }

// Owns reports whether svc is azlb's: a LoadBalancer Service whose
// spec.loadBalancerClass is c (unset, for the default implementation).
func (c Class) Owns(svc *v1.Service) bool {
	if svc == nil || svc.Spec.Type != v1.ServiceTypeLoadBalancer {
		return false
	}
	if svc.Spec.LoadBalancerClass == nil {
		return c.IsDefault()
	}
	return !c.IsDefault() && *svc.Spec.LoadBalancerClass == string(c)
}
