package localservice

import (
	"github.com/azlb/azlb/internal/backendpool"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// members resolves node names to the pool's desired entries (see
// backendpool): unknown or ineligible nodes and nodes without an
// InternalIP of the family are left out.
func members(names sets.Set[string], family v1.IPFamily, node func(string) *v1.Node, includeControlPlane bool, state backendpool.StateFunc) []backendpool.Member {
	nodes := make([]*v1.Node, 0, names.Len())
	for name := range names {
		if n := node(name); backendpool.Eligible(n, !includeControlPlane) {
			nodes = append(nodes, n)
		}
	}
	return backendpool.Members(nodes, family, state)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
