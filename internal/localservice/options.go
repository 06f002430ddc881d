package localservice

import (
	"errors"
	"strings"
	"time"

	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/lbclass"
	"github.com/azlb/azlb/internal/lbstore"
)

// Options are the collaborators and settings of an Updater. Store, Nodes,
// Services, EndpointSlices and Policy.VNetID are required.
type Options struct {
	// Clock drives the tick loop, Retry-After parking and the metric.
	// Default: the real clock.
	Clock clock.WithTicker
	// Recorder records the events on Services; nil drops them.
	Recorder record.EventRecorder
	// Store reads and writes the pools (and says where each lives).
	Store *lbstore.Store
	// Nodes, Services and EndpointSlices are the (shared) informers whose
	// listers the updater reads. The updater registers an EndpointSlice
	// handler in NewUpdater; Run waits for all three to sync.
	Nodes          coreinformers.NodeInformer
	Services       coreinformers.ServiceInformer
	EndpointSlices discoveryinformers.EndpointSliceInformer
	// Class is the load-balancer class azlb serves (--load-balancer-class):
	// only the pools of Services it owns (lbclass.Class.Owns) are written.
	// The zero value: class-less Services.
	Class lbclass.Class
	// Interval is the tick (loadBalancerBackendPoolUpdateIntervalInSeconds).
	// Zero or negative: DefaultInterval.
	Interval time.Duration
	// MaxRetries is loadBalancerBackendPoolUpdateMaxRetries: extra attempts
	// after the first failed one for retriable errors. nil: DefaultMaxRetries;
	// 0 disables retry; negative values mean 0.
	MaxRetries *int
	// Policy is the pool-entry policy (backendpool.PolicyFromConfig).
	Policy backendpool.Policy
	// SubscriptionID and Source label the operation metric. Source defaults
	// to azure.DefaultSource.
	SubscriptionID string
	Source         string
}

// FromConfig fills the settings of o that azure.json decides: Interval,
// MaxRetries, Policy and SubscriptionID. The collaborators are left as they
// are.
func FromConfig(cfg *config.Config, o Options) Options {
	if cfg == nil {
		return o
	}
	o.Interval = time.Duration(cfg.LoadBalancerBackendPoolUpdateIntervalInSeconds) * time.Second
	retries := cfg.BackendPoolUpdateMaxRetries()
	o.MaxRetries = &retries
	o.Policy = backendpool.PolicyFromConfig(cfg)
	o.SubscriptionID = cfg.NetworkSubscriptionID() // of the pools it writes
	return o
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
	if o.Store == nil {
		missing = append(missing, "Store")
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
	if o.Policy.VNetID == "" {
		missing = append(missing, "Policy.VNetID (vnetName must be set for IP-based backend pools)")
	}
	if len(missing) > 0 {
		return errors.New("localservice: NewUpdater: required options missing: " + strings.Join(missing, ", "))
	}
	return nil
}
