package nodeagent

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/azlb/azlb/internal/compute"
	"github.com/azlb/azlb/internal/names"
)

// InventoryPower reads power states from a compute Inventory: listings no
// older than MaxAge, so all agents of a process cost one listing per scale
// set (or resource group) per MaxAge.
type InventoryPower struct {
	Inventory *compute.Inventory
	MaxAge    time.Duration
}

// PowerState implements PowerSource.
func (p InventoryPower) PowerState(ctx context.Context, providerID string) (string, bool, error) {
	ref, err := names.ParseProviderID(providerID)
	if err != nil {
		return "", false, err
	}
	inst, err := p.Inventory.Get(ctx, ref, p.MaxAge)
	if errors.Is(err, compute.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return inst.PowerState, true, nil
}

// RunAll runs one Agent per node until ctx ends and waits for them.
func RunAll(ctx context.Context, nodes []Node, o Options) error {
	agents := make([]*Agent, 0, len(nodes))
	for _, n := range nodes {
		a, err := New(n, o)
		if err != nil {
			return err
		}
		agents = append(agents, a)
	}
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Go(func() { a.Run(ctx) })
	}
	wg.Wait()
	return nil
}
