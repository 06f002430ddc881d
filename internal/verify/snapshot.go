package verify

import (
	"context"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/lbclass"
	"github.com/azlb/azlb/internal/names"
)

// Snapshot is everything Check compares: the cluster and Azure as read at
// one time. Tests build one by hand; Collect reads a live one.
type Snapshot struct {
	Config *config.Config
	// Class is the load-balancer class azlb serves (--load-balancer-class):
	// only the Services it owns (lbclass.Class.Owns) are judged. The zero
	// Class is the default implementation (the Services without one).
	Class lbclass.Class

	Services []*v1.Service
	Nodes    []*v1.Node
	// Namespaces maps namespace names to their labels.
	Namespaces map[string]map[string]string
	Slices     []*discoveryv1.EndpointSlice

	LoadBalancers []*armnetwork.LoadBalancer
	PublicIPs     []*armnetwork.PublicIPAddress

	// VMs describes, with NIC-based pools, the VM behind each node that has
	// a providerID, keyed by node name.
	VMs map[string]VM

	// Gateway is the service gateway's content with pod-based load
	// balancing; nil otherwise.
	Gateway *Gateway

	// SecurityGroup is the network security group securityGroupName names,
	// read in the node-pool modes; nil when none is configured, in
	// pod-based mode, or when it does not exist (SecurityGroupNotFound).
	SecurityGroup         *armnetwork.SecurityGroup
	SecurityGroupNotFound bool

	// PrivateLinks are the Private Link Services of the resource groups
	// the cluster's may be in (privatelink.go), in the node-pool modes.
	PrivateLinks []*armnetwork.PrivateLinkService
	// Prefixes are the public IP prefixes the Services name
	// (azure-pip-prefix-id(-ipv6)), by lower-cased id (nil: it does not
	// exist), in the node-pool modes; a prefix not read is not judged.
	Prefixes map[string]*armnetwork.PublicIPPrefix
	// Subnets are the NAT subnets of the Services that ask for a Private
	// Link Service, by lower-cased id (nil: it does not exist), in the
	// node-pool modes; a subnet not read is not judged.
	Subnets map[string]*armnetwork.Subnet
}

// VM is what NIC-based pools need to know about a node's VM.
type VM struct {
	// Exists is false when Azure answered 404.
	Exists bool
	// Running: provisioning succeeded and the power state is running.
	Running bool
	// Owners are the lower-cased ids a NIC-based member of this VM names
	// as its owner (names.IPConfigOwner): the scale set VM, or the VM's
	// network interfaces.
	Owners []string
}

// Gateway is the cluster's ServiceGateway.
type Gateway struct {
	Services  []*armnetwork.ServiceGatewayService
	Locations []*armnetwork.ServiceGatewayAddressLocationResponse
	// EgressPods are the pods labelled with an egress identity,
	// NatGateways those of the resource group (egress.go).
	EgressPods  []*v1.Pod
	NatGateways []*armnetwork.NatGateway
}

// Collect reads the snapshot. Every read goes through clients, which the
// caller should have fenced against writes (NewReadOnlyClients does).
func Collect(ctx context.Context, cfg *config.Config, clients *azure.Clients, kube kubernetes.Interface) (*Snapshot, error) {
	s := &Snapshot{Config: cfg, Namespaces: map[string]map[string]string{}, VMs: map[string]VM{}}
	svcs, err := kube.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list Services: %w", err)
	}
	for i := range svcs.Items {
		s.Services = append(s.Services, &svcs.Items[i])
	}
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	for i := range nodes.Items {
		s.Nodes = append(s.Nodes, &nodes.Items[i])
	}
	nss, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	for _, ns := range nss.Items {
		s.Namespaces[ns.Name] = ns.Labels
	}
	slices, err := kube.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName})
	if err != nil {
		return nil, fmt.Errorf("list EndpointSlices: %w", err)
	}
	for i := range slices.Items {
		s.Slices = append(s.Slices, &slices.Items[i])
	}

	lbRG := lbResourceGroup(cfg)
	if s.LoadBalancers, err = clients.LoadBalancer.List(ctx, lbRG); err != nil {
		return nil, fmt.Errorf("list load balancers in %s: %w", lbRG, err)
	}
	if s.PublicIPs, err = clients.PublicIP.List(ctx, cfg.ResourceGroup); err != nil {
		return nil, fmt.Errorf("list public IPs in %s: %w", cfg.ResourceGroup, err)
	}
	if !cfg.ServiceGatewayEnabled && cfg.SecurityGroupName != "" {
		nsgRG := cmpOr(cfg.SecurityGroupResourceGroup, cfg.ResourceGroup)
		s.SecurityGroup, err = clients.SecurityGroup.Get(ctx, nsgRG, cfg.SecurityGroupName)
		if azure.Classify(err) == azure.ClassStale {
			s.SecurityGroup, s.SecurityGroupNotFound, err = nil, true, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read security group %s in %s: %w", cfg.SecurityGroupName, nsgRG, err)
		}
	}
	if !cfg.ServiceGatewayEnabled {
		if s.PrivateLinks, err = collectPrivateLinks(ctx, cfg, clients, s.Services); err != nil {
			return nil, err
		}
		if s.Prefixes, err = collectPrefixes(ctx, clients, s.Services); err != nil {
			return nil, err
		}
		if s.Subnets, err = collectNATSubnets(ctx, cfg, clients, s.Services); err != nil {
			return nil, err
		}
	}
	switch {
	case cfg.ServiceGatewayEnabled:
		g := &Gateway{}
		if g.Services, err = clients.ServiceGateway.GetServices(ctx, cfg.ResourceGroup, names.ServiceGateway); err != nil {
			return nil, fmt.Errorf("read the services of service gateway %s: %w", names.ServiceGateway, err)
		}
		if g.Locations, err = clients.ServiceGateway.GetAddressLocations(ctx, cfg.ResourceGroup, names.ServiceGateway); err != nil {
			return nil, fmt.Errorf("read the address locations of service gateway %s: %w", names.ServiceGateway, err)
		}
		if err := collectEgress(ctx, cfg, clients, kube, g); err != nil {
			return nil, err
		}
		s.Gateway = g
	case nicBased(cfg):
		for _, n := range s.Nodes {
			if n.Spec.ProviderID == "" {
				continue
			}
			vm, err := readVM(ctx, clients, n.Spec.ProviderID)
			if err != nil {
				return nil, fmt.Errorf("node %s: %w", n.Name, err)
			}
			if vm != nil {
				s.VMs[n.Name] = *vm
			}
		}
	}
	return s, nil
}

// readVM reads a node's VM; nil (no error) when the providerID is not an
// Azure VM (the node cannot be a member; the reconcile reports it).
func readVM(ctx context.Context, clients *azure.Clients, providerID string) (*VM, error) {
	ref, err := names.ParseProviderID(providerID)
	if err != nil {
		return nil, nil //nolint:nilerr // not an Azure VM: nothing to read
	}
	var statuses []*armcompute.InstanceViewStatus
	var provisioning string
	vm := &VM{Exists: true}
	if ref.Kind == names.ScaleSetVM {
		got, err := clients.ScaleSetVM.Get(ctx, ref.ResourceGroup, ref.ScaleSet, ref.Instance)
		if azure.Classify(err) == azure.ClassStale {
			return &VM{}, nil
		}
		if err != nil {
			return nil, err
		}
		vm.Owners = []string{strings.ToLower(ref.ID())}
		if p := got.Properties; p != nil {
			provisioning = ptr.Deref(p.ProvisioningState, "")
			if p.InstanceView != nil {
				statuses = p.InstanceView.Statuses
			}
		}
	} else {
		got, err := clients.VM.Get(ctx, ref.ResourceGroup, ref.Name)
		if azure.Classify(err) == azure.ClassStale {
			return &VM{}, nil
		}
		if err != nil {
			return nil, err
		}
		if p := got.Properties; p != nil {
			provisioning = ptr.Deref(p.ProvisioningState, "")
			if p.InstanceView != nil {
				statuses = p.InstanceView.Statuses
			}
			if p.NetworkProfile != nil {
				for _, nic := range p.NetworkProfile.NetworkInterfaces {
					if nic != nil && nic.ID != nil {
						vm.Owners = append(vm.Owners, strings.ToLower(*nic.ID))
					}
				}
			}
		}
	}
	running := false
	for _, st := range statuses {
		if st != nil && strings.EqualFold(ptr.Deref(st.Code, ""), "PowerState/running") {
			running = true
		}
	}
	vm.Running = running && strings.EqualFold(provisioning, "Succeeded")
	return vm, nil
}

func lbResourceGroup(cfg *config.Config) string {
	if cfg.LoadBalancerResourceGroup != "" {
		return cfg.LoadBalancerResourceGroup
	}
	return cfg.ResourceGroup
}

func nicBased(cfg *config.Config) bool {
	return strings.EqualFold(cfg.LoadBalancerBackendPoolConfigurationType, config.BackendPoolNodeIPConfiguration)
}
