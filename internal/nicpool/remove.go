package nicpool

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/compute"
	"github.com/azlb/azlb/internal/names"
)

// RemoveMembers takes ip configurations (as pools list them in
// backendIPConfigurations) out of the pools: each scale set VM owning one
// is PUT without the pools (with If-Match; batched as EnsureMembers does),
// each network interface owning one likewise. A VM or network interface
// that is gone needs nothing. It returns the writes.
func (w *Writer) RemoveMembers(ctx context.Context, pools, ipConfigs []string) (int, error) {
	drop := lowerSet(pools)
	scaleSets := map[string][]member{}
	nics := map[string]string{}
	seen := map[string]bool{}
	for _, id := range ipConfigs {
		owner := names.IPConfigOwner(id)
		if owner == "" || seen[strings.ToLower(owner)] {
			continue // one write per VM or NIC, whatever it is a member of
		}
		seen[strings.ToLower(owner)] = true
		if ref, err := names.ParseProviderID(names.ProviderIDPrefix + owner); err == nil && ref.Kind == names.ScaleSetVM {
			k := strings.ToLower(ref.ResourceGroup + "/" + ref.ScaleSet)
			scaleSets[k] = append(scaleSets[k], member{inst: &compute.Instance{Ref: ref}})
			continue
		}
		nics[owner] = owner
	}
	out := &outcome{res: Result{Skipped: map[string]string{}}}
	var wg sync.WaitGroup
	for _, ms := range scaleSets {
		wg.Go(func() {
			n, err := w.removeFromScaleSetVMs(ctx, ms, drop)
			out.add(n, nil, nil, err)
		})
	}
	sem := make(chan struct{}, maxNICWrites)
	for _, id := range nics {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			_, changed, err := w.editNIC(ctx, id, func(nic *armnetwork.Interface) (string, bool) {
				dropped := false
				if nic.Properties != nil {
					for _, ic := range nic.Properties.IPConfigurations {
						dropped = withoutNICPools(ic, drop) || dropped
					}
				}
				return "", dropped
			})
			n := 0
			if changed {
				n = 1
			}
			out.add(n, nil, nil, err)
		})
	}
	wg.Wait()
	return out.res.Writes, errors.Join(out.err...)
}

// removeFromScaleSetVMs takes the VMs of one scale set out of the pools,
// reading each afresh first.
func (w *Writer) removeFromScaleSetVMs(ctx context.Context, ms []member, drop map[string]bool) (int, error) {
	ref := ms[0].inst.Ref
	rg, vmss := ref.ResourceGroup, ref.ScaleSet
	defer w.lock(lockScaleSet, rg, vmss)()
	batch := 1
	if model, err := w.o.Inventory.ScaleSet(ctx, rg, vmss, 0); err == nil {
		if _, ok := model.Tags[CoordinationTag]; ok {
			batch = w.o.BatchSize
		}
	}
	var live []member
	var errs []error
	for _, m := range ms {
		vm, err := w.o.ScaleSetVMs.Get(ctx, rg, vmss, m.inst.Ref.Instance)
		if azure.Classify(err) == azure.ClassStale {
			continue // the VM is gone, and with it its membership
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		inst := *m.inst
		inst.ScaleSetVM = vm
		live = append(live, member{node: nodeNamed(ref.ScaleSet + "/" + m.inst.Ref.Instance), inst: &inst})
	}
	n, _, err := w.updateInstances(ctx, rg, vmss, batch, live, func(vm *armcompute.VirtualMachineScaleSetVM) bool {
		dropped := false
		for _, c := range instanceConfigs(vm) {
			if c != nil && c.Properties != nil {
				for _, ic := range c.Properties.IPConfigurations {
					dropped = withoutScaleSetPools(ic, drop) || dropped
				}
			}
		}
		return dropped
	})
	w.o.Inventory.Invalidate(ref)
	return n, errors.Join(append(errs, err)...)
}

// Decouple removes every reference to the load balancer's pools, so that
// the load balancer can be deleted (ARM refuses while a scale set model
// lists one of its pools, LoadBalancerInUseByVirtualMachineScaleSet); see
// DecouplePools. It returns the writes.
func (w *Writer) Decouple(ctx context.Context, lb *armnetwork.LoadBalancer, scaleSetID string) (int, error) {
	if lb == nil || lb.Properties == nil {
		return 0, nil
	}
	n, err := w.DecouplePools(ctx, lb.Properties.BackendAddressPools, scaleSetID)
	if n > 0 {
		klog.FromContext(ctx).Info("Decoupled the load balancer's pools from scale sets and network interfaces",
			"loadBalancer", ptr.Deref(lb.Name, ""), "writes", n)
	}
	return n, err
}

// DecouplePools takes the pools out of every scale set model listing one
// (only scaleSetID when it is not empty), then out of the VMs and network
// interfaces they hold (backendIPConfigurations, as read). It returns the
// writes.
func (w *Writer) DecouplePools(ctx context.Context, pools []*armnetwork.BackendAddressPool, scaleSetID string) (int, error) {
	var ids, members []string
	groups := map[string]string{strings.ToLower(w.o.ResourceGroup): w.o.ResourceGroup}
	for _, p := range pools {
		if p == nil || p.ID == nil {
			continue
		}
		ids = append(ids, *p.ID)
		if p.Properties == nil {
			continue
		}
		for _, c := range p.Properties.BackendIPConfigurations {
			if c == nil || c.ID == nil {
				continue
			}
			members = append(members, *c.ID)
			if rg, _, err := names.ParseID(*c.ID); err == nil {
				groups[strings.ToLower(rg)] = rg
			}
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	drop := lowerSet(ids)
	var models []string
	if scaleSetID != "" {
		models = []string{scaleSetID}
	} else {
		for _, rg := range groups {
			sets, err := w.o.ScaleSets.List(ctx, rg)
			if azure.Classify(err) == azure.ClassStale {
				continue
			}
			if err != nil {
				return 0, fmt.Errorf("list scale sets of %s: %w", rg, err)
			}
			for _, s := range sets {
				if modelLists(s, drop) {
					models = append(models, ptr.Deref(s.ID, ""))
				}
			}
		}
	}
	sort.Strings(models)
	writes := 0
	for _, id := range models {
		rg, name, err := names.ParseID(id)
		if err != nil {
			return writes, err
		}
		unlock := w.lock(lockScaleSet, rg, name)
		n, err := w.editModel(ctx, rg, name, func(cfgs []*armcompute.VirtualMachineScaleSetNetworkConfiguration) bool {
			dropped := false
			for _, c := range cfgs {
				if c != nil && c.Properties != nil {
					for _, ic := range c.Properties.IPConfigurations {
						dropped = withoutScaleSetPools(ic, drop) || dropped
					}
				}
			}
			return dropped
		})
		unlock()
		writes += n
		if err != nil {
			return writes, err
		}
	}
	n, err := w.RemoveMembers(ctx, ids, members)
	return writes + n, err
}

// modelLists reports whether a scale set model lists one of the pools.
func modelLists(s *armcompute.VirtualMachineScaleSet, pools map[string]bool) bool {
	for _, c := range modelConfigs(s) {
		if c == nil || c.Properties == nil {
			continue
		}
		for _, ic := range c.Properties.IPConfigurations {
			if ic == nil || ic.Properties == nil {
				continue
			}
			for _, id := range subIDs(ic.Properties.LoadBalancerBackendAddressPools) {
				if pools[strings.ToLower(id)] {
					return true
				}
			}
		}
	}
	return false
}
