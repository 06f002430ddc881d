package nicpool

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/compute"
	"github.com/azlb/azlb/internal/keymutex"
	"github.com/azlb/azlb/internal/names"
)

// EventReasonSkipped is the Warning event on a node NIC-based pool
// membership leaves out for a reason the operator can fix: no providerID,
// a VM in another resource group or subscription, a scale set being
// deleted, an ip configuration already in another cluster's load
// balancer, or no ip configuration of the pool's family.
const EventReasonSkipped = "BackendPoolMembershipSkipped"

// CoordinationTag on a scale set lets BatchSize of its VMs be updated at
// once (otherwise one at a time).
const CoordinationTag = "aks-managed-coordination"

// maxNICWrites bounds the concurrent network interface writes.
const maxNICWrites = 16

// Options configure a Writer. Inventory, the three clients and
// ResourceGroup are required.
type Options struct {
	Inventory   *compute.Inventory
	ScaleSets   azure.ScaleSetClient
	ScaleSetVMs azure.ScaleSetVMClient
	Interfaces  azure.InterfaceClient
	// ResourceGroup is the cluster's: nodes whose VM is elsewhere are
	// skipped.
	ResourceGroup string
	// BatchSize is how many VMs of a scale set tagged CoordinationTag are
	// updated at once (putVMSSVMBatchSize); below 1 means 1.
	BatchSize int
	// Recorder records EventReasonSkipped on nodes; nil drops them.
	Recorder record.EventRecorder
}

// Writer makes nodes members of NIC-based pools and takes them out; see
// the package documentation. It is safe for concurrent use: the writes of
// one scale set (its model and VMs) or one network interface are made one
// caller at a time, so the reconciles of several load balancers' pools
// (a public one and its internal twin) do not race each other into 412s.
type Writer struct {
	o     Options
	locks keymutex.Mutex
}

// Kinds of resource whose writes lock serialises.
const (
	lockScaleSet = "scaleSet"
	lockNIC      = "networkInterface"
)

// lock serialises the writes of one scale set (its model and VMs) or
// network interface.
func (w *Writer) lock(kind, rg, name string) func() {
	return w.locks.Lock(kind + "/" + strings.ToLower(rg+"/"+name))
}

// New builds a Writer.
func New(o Options) (*Writer, error) {
	if o.Inventory == nil || o.ScaleSets == nil || o.ScaleSetVMs == nil || o.Interfaces == nil || o.ResourceGroup == "" {
		return nil, errors.New("nicpool: Inventory, the scale set, scale set VM and interface clients and ResourceGroup are required")
	}
	if o.BatchSize < 1 {
		o.BatchSize = 1
	}
	if o.Recorder == nil {
		o.Recorder = &record.FakeRecorder{}
	}
	return &Writer{o: o}, nil
}

// Pool is a NIC-based pool and the IP family its members join with.
type Pool struct {
	ID     string
	Family v1.IPFamily
}

// Result tells what EnsureMembers did.
type Result struct {
	// Writes counts scale set, scale set VM and network interface PUTs.
	Writes int
	// Members are the nodes (sorted) whose ip configuration is, or now is,
	// in the pool.
	Members []string
	// Skipped tells, per node, why it was left out.
	Skipped map[string]string
}

// member is a node and its VM.
type member struct {
	node *v1.Node
	inst *compute.Instance
}

// outcome collects the results of concurrent jobs.
type outcome struct {
	mu  sync.Mutex
	res Result
	err []error
}

func (o *outcome) add(writes int, members []string, skipped map[string]string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.res.Writes += writes
	o.res.Members = append(o.res.Members, members...)
	for k, v := range skipped {
		o.res.Skipped[k] = v
	}
	if err != nil {
		o.err = append(o.err, err)
	}
}

// EnsureMembers makes the ip configuration (of the pool's family) of every
// node's VM a member of the pool. Uniform scale sets: the model first (GET,
// then a PUT with If-Match when it lacks the pool), then each VM lacking it
// (PUT with If-Match; one at a time, or BatchSize at once for a scale set
// tagged CoordinationTag, the operations of earlier PUTs running while the
// next are sent); scale sets in parallel. Availability-set, standalone and
// Flexible scale set VMs: their primary network interface (GET, then a PUT
// with If-Match), and a Flexible scale set's model. What the cached
// listings show as members already costs no call. Nodes whose VM does not
// run are left out; so are nodes with bad input, with a Warning event.
func (w *Writer) EnsureMembers(ctx context.Context, pool Pool, nodes []*v1.Node) (Result, error) {
	out := &outcome{res: Result{Skipped: map[string]string{}}}
	scaleSets := map[string][]member{}
	var vms []member
	flexModels := map[string]string{}
	for _, n := range nodes {
		inst, why, err := w.instanceOf(ctx, n)
		switch {
		case err != nil:
			out.add(0, nil, nil, err)
		case why != "":
			out.add(0, nil, map[string]string{n.Name: why}, nil)
		case inst.Ref.Kind == names.ScaleSetVM:
			k := strings.ToLower(inst.Ref.ResourceGroup + "/" + inst.Ref.ScaleSet)
			scaleSets[k] = append(scaleSets[k], member{n, inst})
		default:
			vms = append(vms, member{n, inst})
			if inst.Flexible {
				flexModels[strings.ToLower(inst.ScaleSetID)] = inst.ScaleSetID
			}
		}
	}
	var wg sync.WaitGroup
	for _, ms := range scaleSets {
		wg.Go(func() { out.add(w.ensureScaleSet(ctx, pool, ms)) })
	}
	for _, id := range flexModels {
		wg.Go(func() {
			rg, name, _ := names.ParseID(id)
			defer w.lock(lockScaleSet, rg, name)()
			writes, err := w.ensureModel(ctx, pool, id)
			out.add(writes, nil, nil, err)
		})
	}
	sem := make(chan struct{}, maxNICWrites)
	for _, m := range vms {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out.add(w.ensureNIC(ctx, pool, m))
		})
	}
	wg.Wait()
	sort.Strings(out.res.Members)
	return out.res, errors.Join(out.err...)
}

// instanceOf finds the node's VM; why says why the node is left out.
func (w *Writer) instanceOf(ctx context.Context, n *v1.Node) (*compute.Instance, string, error) {
	if n.Spec.ProviderID == "" && uninitialized(n) {
		return nil, "the cloud node controller has not initialized it yet", nil
	}
	ref, err := names.ParseProviderID(n.Spec.ProviderID)
	if err != nil {
		return nil, w.skip(n, "%v", err), nil
	}
	if !strings.EqualFold(ref.ResourceGroup, w.o.ResourceGroup) {
		return nil, w.skip(n, "its VM %s is in resource group %s, not the cluster's %s", ref.ID(), ref.ResourceGroup, w.o.ResourceGroup), nil
	}
	inst, err := w.o.Inventory.Get(ctx, ref, 0)
	switch {
	case errors.Is(err, compute.ErrNotFound):
		return nil, w.skip(n, "its VM %s does not exist", ref.ID()), nil
	case errors.Is(err, compute.ErrOtherSubscription):
		return nil, w.skip(n, "%v", err), nil
	case err != nil:
		return nil, "", fmt.Errorf("node %s: %w", n.Name, err)
	case !inst.Running():
		return nil, fmt.Sprintf("its VM is not running (power state %q, provisioning state %q)", inst.PowerState, inst.ProvisioningState), nil
	}
	return inst, "", nil
}

// skip records the Warning event and returns the reason.
func (w *Writer) skip(n *v1.Node, format string, args ...any) string {
	why := fmt.Sprintf(format, args...)
	w.o.Recorder.Eventf(n, v1.EventTypeWarning, EventReasonSkipped, "Not a member of NIC-based backend pools: %s", why)
	return why
}

func skipAll(ms []member, why string) map[string]string {
	out := make(map[string]string, len(ms))
	for _, m := range ms {
		out[m.node.Name] = why
	}
	return out
}

func modelConfigs(vmss *armcompute.VirtualMachineScaleSet) []*armcompute.VirtualMachineScaleSetNetworkConfiguration {
	if vmss == nil || vmss.Properties == nil || vmss.Properties.VirtualMachineProfile == nil || vmss.Properties.VirtualMachineProfile.NetworkProfile == nil {
		return nil
	}
	return vmss.Properties.VirtualMachineProfile.NetworkProfile.NetworkInterfaceConfigurations
}

func deleting(vmss *armcompute.VirtualMachineScaleSet) bool {
	return vmss.Properties != nil && strings.EqualFold(ptr.Deref(vmss.Properties.ProvisioningState, ""), "Deleting")
}

// ensureScaleSet runs EnsureMembers for the VMs of one Uniform scale set.
// What the cached listings show as members already costs no call and no
// wait; otherwise the scale set's writes are made under its lock, from the
// listings as the previous holder left them.
func (w *Writer) ensureScaleSet(ctx context.Context, pool Pool, ms []member) (int, []string, map[string]string, error) {
	ref := ms[0].inst.Ref
	rg, name := ref.ResourceGroup, ref.ScaleSet
	if members, ok := w.allMembers(ctx, pool, rg, name, ms); ok {
		return 0, members, map[string]string{}, nil
	}
	defer w.lock(lockScaleSet, rg, name)()
	for i, m := range ms {
		if inst, err := w.o.Inventory.Get(ctx, m.inst.Ref, 0); err == nil {
			ms[i].inst = inst
		}
	}
	model, err := w.o.Inventory.ScaleSet(ctx, rg, name, 0)
	if errors.Is(err, compute.ErrNotFound) {
		return 0, nil, skipAll(ms, "its scale set "+name+" does not exist"), nil
	}
	if err != nil {
		return 0, nil, nil, err
	}
	if deleting(model) {
		for _, m := range ms {
			w.skip(m.node, "its scale set %s is being deleted", name)
		}
		return 0, nil, skipAll(ms, "scale set "+name+" is being deleted"), nil
	}
	writes := 0
	mic := scaleSetIPConfig(modelConfigs(model), pool.Family)
	if mic != nil && mic.Properties != nil {
		if st, _ := stateOf(subIDs(mic.Properties.LoadBalancerBackendAddressPools), pool.ID); st == poolAbsent {
			n, err := w.ensureModel(ctx, pool, names.ScaleSetID(w.o.Inventory.SubscriptionID(), rg, name))
			if err != nil {
				return 0, nil, nil, err
			}
			writes += n
		}
	}
	batch := 1
	if _, ok := model.Tags[CoordinationTag]; ok {
		batch = w.o.BatchSize
	}
	var members []string
	var todo []member
	skipped := map[string]string{}
	for _, m := range ms {
		ic := scaleSetIPConfig(instanceConfigs(m.inst.ScaleSetVM), pool.Family)
		if ic == nil || ic.Properties == nil {
			skipped[m.node.Name] = w.skip(m.node, "its VM has no %s ip configuration", pool.Family)
			continue
		}
		switch st, other := stateOf(subIDs(ic.Properties.LoadBalancerBackendAddressPools), pool.ID); st {
		case poolPresent:
			members = append(members, m.node.Name)
		case poolForeign:
			skipped[m.node.Name] = w.skip(m.node, "its ip configuration is in pool %s of another load balancer", other)
		default:
			todo = append(todo, m)
		}
	}
	if len(todo) == 0 {
		return writes, members, skipped, nil
	}
	n, joined, err := w.updateInstances(ctx, rg, name, batch, todo, func(vm *armcompute.VirtualMachineScaleSetVM) bool {
		ic := scaleSetIPConfig(instanceConfigs(vm), pool.Family)
		if ic == nil || ic.Properties == nil {
			return false
		}
		if st, _ := stateOf(subIDs(ic.Properties.LoadBalancerBackendAddressPools), pool.ID); st != poolAbsent {
			return false
		}
		addScaleSetPool(ic, pool.ID)
		return true
	})
	w.o.Inventory.Invalidate(ref)
	return writes + n, append(members, joined...), skipped, err
}

// allMembers reports whether the cached listings show the scale set's
// model and every VM of ms in the pool already, and returns the nodes.
func (w *Writer) allMembers(ctx context.Context, pool Pool, rg, name string, ms []member) ([]string, bool) {
	model, err := w.o.Inventory.ScaleSet(ctx, rg, name, 0)
	if err != nil || deleting(model) {
		return nil, false
	}
	present := func(cfgs []*armcompute.VirtualMachineScaleSetNetworkConfiguration) bool {
		ic := scaleSetIPConfig(cfgs, pool.Family)
		if ic == nil || ic.Properties == nil {
			return false
		}
		st, _ := stateOf(subIDs(ic.Properties.LoadBalancerBackendAddressPools), pool.ID)
		return st == poolPresent
	}
	if !present(modelConfigs(model)) {
		return nil, false
	}
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		if !present(instanceConfigs(m.inst.ScaleSetVM)) {
			return nil, false
		}
		out = append(out, m.node.Name)
	}
	return out, true
}

func instanceConfigs(vm *armcompute.VirtualMachineScaleSetVM) []*armcompute.VirtualMachineScaleSetNetworkConfiguration {
	if vm == nil || vm.Properties == nil || vm.Properties.NetworkProfileConfiguration == nil {
		return nil
	}
	return vm.Properties.NetworkProfileConfiguration.NetworkInterfaceConfigurations
}

// updateInstances PUTs the scale set VMs edit changes, batch at a time,
// each with If-Match its etag; a VM that changed since it was listed (412)
// is read again and edited once more. It returns the writes and the nodes
// whose VM edit changed (or found already changed).
func (w *Writer) updateInstances(ctx context.Context, rg, vmss string, batch int, ms []member,
	edit func(*armcompute.VirtualMachineScaleSetVM) bool) (int, []string, error) {
	type pending struct {
		node string
		wait func(context.Context) (*armcompute.VirtualMachineScaleSetVM, error)
	}
	var (
		mu      sync.Mutex
		waits   []pending
		errs    []error
		done    []string
		written int
	)
	start := func(m member) {
		vm := m.inst.ScaleSetVM
		for attempt := 0; ; attempt++ {
			body, changed, err := editedVM(vm, edit)
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			if !changed {
				mu.Lock()
				done = append(done, m.node.Name)
				mu.Unlock()
				return
			}
			wait, err := w.o.ScaleSetVMs.BeginUpdate(ctx, rg, vmss, m.inst.Ref.Instance, body, ptr.Deref(vm.Etag, ""))
			if err == nil {
				mu.Lock()
				written++
				waits = append(waits, pending{m.node.Name, wait})
				mu.Unlock()
				return
			}
			if attempt == 0 && azure.StatusCode(err) == http.StatusPreconditionFailed {
				fresh, gerr := w.o.ScaleSetVMs.Get(ctx, rg, vmss, m.inst.Ref.Instance)
				if gerr == nil {
					vm = fresh
					continue
				}
				err = gerr
			}
			mu.Lock()
			errs = append(errs, fmt.Errorf("node %s: %w", m.node.Name, err))
			mu.Unlock()
			return
		}
	}
	for i := 0; i < len(ms); i += batch {
		var wg sync.WaitGroup
		for _, m := range ms[i:min(i+batch, len(ms))] {
			wg.Go(func() { start(m) })
		}
		wg.Wait()
	}
	var wg sync.WaitGroup
	for _, p := range waits {
		wg.Go(func() {
			_, err := p.wait(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("node %s: %w", p.node, err))
				return
			}
			done = append(done, p.node)
		})
	}
	wg.Wait()
	if written > 0 {
		klog.FromContext(ctx).V(2).Info("Updated scale set VMs", "scaleSet", rg+"/"+vmss, "vms", written, "batch", batch)
	}
	return written, done, errors.Join(errs...)
}

// editedVM returns the body of a scale set VM update (location and network
// configuration) with edit applied to a copy, and whether edit changed it.
func editedVM(vm *armcompute.VirtualMachineScaleSetVM, edit func(*armcompute.VirtualMachineScaleSetVM) bool) (armcompute.VirtualMachineScaleSetVM, bool, error) {
	if vm == nil || vm.Properties == nil || vm.Properties.NetworkProfileConfiguration == nil {
		return armcompute.VirtualMachineScaleSetVM{}, false, nil
	}
	cfg, err := copyJSON(vm.Properties.NetworkProfileConfiguration)
	if err != nil {
		return armcompute.VirtualMachineScaleSetVM{}, false, err
	}
	body := armcompute.VirtualMachineScaleSetVM{Location: vm.Location,
		Properties: &armcompute.VirtualMachineScaleSetVMProperties{NetworkProfileConfiguration: cfg}}
	return body, edit(&body), nil
}

// ensureModel adds the pool to a scale set model (Uniform or Flexible)
// that lacks it: a fresh GET, then a PUT with If-Match carrying the network
// profile only (Compute merges it into the model).
func (w *Writer) ensureModel(ctx context.Context, pool Pool, scaleSetID string) (int, error) {
	rg, name, err := names.ParseID(scaleSetID)
	if err != nil {
		return 0, err
	}
	if cached, err := w.o.Inventory.ScaleSet(ctx, rg, name, 0); err == nil {
		if mic := scaleSetIPConfig(modelConfigs(cached), pool.Family); mic == nil || mic.Properties == nil {
			return 0, nil
		} else if st, _ := stateOf(subIDs(mic.Properties.LoadBalancerBackendAddressPools), pool.ID); st != poolAbsent {
			return 0, nil
		}
	}
	return w.editModel(ctx, rg, name, func(cfgs []*armcompute.VirtualMachineScaleSetNetworkConfiguration) bool {
		mic := scaleSetIPConfig(cfgs, pool.Family)
		if mic == nil || mic.Properties == nil {
			return false
		}
		if st, _ := stateOf(subIDs(mic.Properties.LoadBalancerBackendAddressPools), pool.ID); st != poolAbsent {
			return false
		}
		addScaleSetPool(mic, pool.ID)
		return true
	})
}

// editModel reads a scale set model afresh, applies edit to its network
// configurations and PUTs the network profile with If-Match when edit
// changed it; a 412 (another writer, such as the reconcile of the other
// load balancer's pool, changed it meanwhile) reads it again once. A scale
// set being deleted is left alone.
func (w *Writer) editModel(ctx context.Context, rg, name string, edit func([]*armcompute.VirtualMachineScaleSetNetworkConfiguration) bool) (int, error) {
	for attempt := 0; ; attempt++ {
		fresh, err := w.o.ScaleSets.Get(ctx, rg, name)
		if azure.Classify(err) == azure.ClassStale {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		if deleting(fresh) || fresh.Properties == nil || fresh.Properties.VirtualMachineProfile == nil || fresh.Properties.VirtualMachineProfile.NetworkProfile == nil {
			return 0, nil
		}
		np := fresh.Properties.VirtualMachineProfile.NetworkProfile
		if !edit(np.NetworkInterfaceConfigurations) {
			return 0, nil
		}
		body := armcompute.VirtualMachineScaleSet{Location: fresh.Location, Properties: &armcompute.VirtualMachineScaleSetProperties{
			VirtualMachineProfile: &armcompute.VirtualMachineScaleSetVMProfile{NetworkProfile: np}}}
		_, err = w.o.ScaleSets.CreateOrUpdate(ctx, rg, name, body, ptr.Deref(fresh.Etag, ""))
		if err == nil {
			break
		}
		if attempt > 0 || azure.StatusCode(err) != http.StatusPreconditionFailed {
			return 0, fmt.Errorf("scale set %s/%s model: %w", rg, name, err)
		}
	}
	w.o.Inventory.InvalidateScaleSets(rg)
	klog.FromContext(ctx).V(2).Info("Updated scale set model", "scaleSet", rg+"/"+name)
	return 1, nil
}

// ensureNIC makes the ip configuration of a VM's primary network interface
// a member of the pool.
func (w *Writer) ensureNIC(ctx context.Context, pool Pool, m member) (int, []string, map[string]string, error) {
	if len(m.inst.NICIDs) == 0 {
		return 0, nil, map[string]string{m.node.Name: w.skip(m.node, "its VM has no network interface")}, nil
	}
	nicID := m.inst.NICIDs[0]
	if cached, err := w.o.Inventory.NIC(ctx, nicID, 0); err == nil {
		if ic := nicIPConfig(cached, pool.Family); ic != nil && ic.Properties != nil {
			if st, _ := stateOf(poolIDs(ic.Properties.LoadBalancerBackendAddressPools), pool.ID); st == poolPresent {
				return 0, []string{m.node.Name}, nil, nil
			}
		}
	}
	why, changed, err := w.editNIC(ctx, nicID, func(nic *armnetwork.Interface) (string, bool) {
		if nic.Properties != nil && nic.Properties.ProvisioningState != nil && *nic.Properties.ProvisioningState == armnetwork.ProvisioningStateFailed {
			return "its network interface is in provisioning state Failed", false
		}
		ic := nicIPConfig(nic, pool.Family)
		if ic == nil || ic.Properties == nil {
			return fmt.Sprintf("its network interface has no %s ip configuration", pool.Family), false
		}
		switch st, other := stateOf(poolIDs(ic.Properties.LoadBalancerBackendAddressPools), pool.ID); st {
		case poolPresent:
			return "", false
		case poolForeign:
			return fmt.Sprintf("its ip configuration is in pool %s of another load balancer", other), false
		}
		addNICPool(ic, pool.ID)
		return "", true
	})
	if err != nil {
		return 0, nil, nil, fmt.Errorf("node %s: %w", m.node.Name, err)
	}
	if why != "" {
		return 0, nil, map[string]string{m.node.Name: w.skip(m.node, "%s", why)}, nil
	}
	w.o.Inventory.Invalidate(m.inst.Ref)
	writes := 0
	if changed {
		writes = 1
	}
	return writes, []string{m.node.Name}, nil, nil
}

// editNIC reads a network interface afresh, applies edit and PUTs it with
// If-Match when edit changed it; a 412 reads it again once. why is edit's
// reason for leaving it alone.
func (w *Writer) editNIC(ctx context.Context, id string, edit func(*armnetwork.Interface) (why string, changed bool)) (string, bool, error) {
	rg, name, err := names.ParseID(id)
	if err != nil {
		return "", false, err
	}
	defer w.lock(lockNIC, rg, name)()
	for attempt := 0; ; attempt++ {
		nic, err := w.o.Interfaces.Get(ctx, rg, name)
		if azure.Classify(err) == azure.ClassStale {
			return "its network interface does not exist", false, nil
		}
		if err != nil {
			return "", false, err
		}
		why, changed := edit(nic)
		if why != "" || !changed {
			return why, false, nil
		}
		_, err = w.o.Interfaces.CreateOrUpdate(ctx, rg, name, *nic, ptr.Deref(nic.Etag, ""))
		if err == nil {
			return "", true, nil
		}
		if attempt > 0 || azure.StatusCode(err) != http.StatusPreconditionFailed {
			return "", false, err
		}
	}
}

// uninitialized reports whether the node still waits for the cloud node
// controller (it sets the providerID).
func uninitialized(n *v1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == cloudproviderapi.TaintExternalCloudProvider {
			return true
		}
	}
	return false
}
