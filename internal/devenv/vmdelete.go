package devenv

import (
	"context"
	"fmt"
)

// DeleteVM deletes a standalone VM as ARM does (a DELETE, then polling) and
// waits for it. Its NIC stays, as Azure keeps a NIC whose delete option is
// Detach, and so does the NIC's ip configuration in any backend pool.
func (c *Compute) DeleteVM(ctx context.Context, name string) error {
	p, err := c.vms.BeginDelete(ctx, ResourceGroup, name, nil)
	if err != nil {
		return fmt.Errorf("delete VM %s: %w", name, err)
	}
	if _, err := p.PollUntilDone(ctx, &PollOptions); err != nil {
		return fmt.Errorf("delete VM %s: %w", name, err)
	}
	return nil
}
