package lbstore

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
)

// List reads every load balancer of the resource group and caches each
// one (a write in flight meanwhile keeps its newer state), so that the
// mutations that follow start from the cache. A missing resource group is
// an empty list. The results are shared snapshots: do not modify them.
func (s *Store) List(ctx context.Context) ([]*armnetwork.LoadBalancer, error) {
	gens := s.cache.generations()
	lbs, err := s.lbs.List(ctx, s.rg)
	if err != nil {
		if azure.Classify(err) == azure.ClassStale {
			return nil, nil
		}
		return nil, fmt.Errorf("list load balancers in %s: %w", s.rg, err)
	}
	out := lbs[:0:0]
	for _, lb := range lbs {
		name := ptr.Deref(lb.Name, "")
		if name == "" {
			continue
		}
		s.transfers.saw(name, lb)
		s.cache.readResult(name, gens[lower(name)], lb)
		out = append(out, lb)
	}
	return out, nil
}
