package localservice

import (
	"errors"
	"fmt"
	"strings"
	"time"

	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
)

// Locker is the service-reconcile lock (provider.ReconcileLock). Lock
// records the wait under caller.
type Locker interface {
	Lock(caller string)
	Unlock()
}

// PoolBackend reaches the backend pools (provider.Provider implements it).
type PoolBackend interface {
	// ResourceGroup is the load balancers' resource group.
	ResourceGroup() string
	// BackendPools is the ARM backend pool client.
	BackendPools() azure.BackendPoolClient
	// InvalidateCache makes the provider re-read the load balancer; called
	// around every pool write.
	InvalidateCache(lbName string)
}

// Options are the collaborators and settings of an Updater. Lock, Pools,
// Nodes, Services, EndpointSlices and VirtualNetworkID are required.
type Options struct {
	// Clock drives the tick loop, Retry-After parking and the metric.
	// Default: the real clock.
	Clock clock.WithTicker
	// Recorder records the events on Services; nil drops them.
	Recorder record.EventRecorder
	// Lock is the service-reconcile lock, taken for a whole tick.
	Lock Locker
	// Pools reads and writes the pools.
	Pools PoolBackend
	// Nodes, Services and EndpointSlices are the (shared) informers whose
	// listers the updater reads. The updater registers an EndpointSlice
	// handler in NewUpdater; Run waits for all three to sync.
	Nodes          coreinformers.NodeInformer
	Services       coreinformers.ServiceInformer
	EndpointSlices discoveryinformers.EndpointSliceInformer
	// Interval is the tick (loadBalancerBackendPoolUpdateIntervalInSeconds).
	// Zero or negative: DefaultInterval.
	Interval time.Duration
	// MaxRetries is loadBalancerBackendPoolUpdateMaxRetries: extra attempts
	// after the first failed one for retriable errors. nil: DefaultMaxRetries;
	// 0 disables retry; negative values mean 0.
	MaxRetries *int
	// VirtualNetworkID is the ARM id of the cluster's virtual network; every
	// pool entry references it (as the provider writes them).
	VirtualNetworkID string
	// IncludeControlPlaneNodes keeps control-plane nodes in the pools
	// (excludeMasterFromStandardLB: false). Default: they are left out.
	IncludeControlPlaneNodes bool
	// DisableAdminState writes every entry with AdminState None
	// (enableLoadBalancerAdminState: false); by default entries carry the
	// state the node's taints call for, as every other pool writer does.
	DisableAdminState bool
	// SubscriptionID and Source label the operation metric. Source defaults
	// to azure.DefaultSource.
	SubscriptionID string
	Source         string
}

// FromConfig fills the settings of o that azure.json decides: Interval,
// MaxRetries, VirtualNetworkID, IncludeControlPlaneNodes and
// SubscriptionID. The collaborators are left as they are.
func FromConfig(cfg *config.Config, o Options) Options {
	if cfg == nil {
		return o
	}
	o.Interval = time.Duration(cfg.LoadBalancerBackendPoolUpdateIntervalInSeconds) * time.Second
	retries := cfg.BackendPoolUpdateMaxRetries()
	o.MaxRetries = &retries
	o.VirtualNetworkID = VirtualNetworkID(cfg)
	o.IncludeControlPlaneNodes = cfg.ExcludeMasterFromStandardLB != nil && !*cfg.ExcludeMasterFromStandardLB
	o.DisableAdminState = !cfg.AdminStateEnabled()
	o.SubscriptionID = cfg.SubscriptionID
	return o
}

// VirtualNetworkID is the id of the virtual network pool entries reference:
// vnetName in vnetResourceGroup (default: resourceGroup).
func VirtualNetworkID(cfg *config.Config) string {
	rg := cfg.VnetResourceGroup
	if rg == "" {
		rg = cfg.ResourceGroup
	}
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/virtualNetworks/%s",
		cfg.SubscriptionID, rg, cfg.VnetName)
}

// EffectiveMaxRetries normalises a MaxRetries setting: nil is
// DefaultMaxRetries, negative is 0.
func EffectiveMaxRetries(p *int) int {
	switch {
	case p == nil:
		return DefaultMaxRetries
	case *p < 0:
		return 0
	default:
		return *p
	}
}

func (o Options) validate() error {
	var missing []string
	if o.Lock == nil {
		missing = append(missing, "Lock")
	}
	if o.Pools == nil {
		missing = append(missing, "Pools")
	}
	if o.Nodes == nil {
		missing = append(missing, "Nodes")
	}
	if o.Services == nil {
		missing = append(missing, "Services")
	}
	if o.EndpointSlices == nil {
		missing = append(missing, "EndpointSlices")
	}
	if o.VirtualNetworkID == "" {
		missing = append(missing, "VirtualNetworkID (vnetName must be set for IP-based backend pools)")
	}
	if len(missing) > 0 {
		return errors.New("localservice: NewUpdater: required options missing: " + strings.Join(missing, ", "))
	}
	return nil
}
