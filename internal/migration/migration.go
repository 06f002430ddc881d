package migration

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/metrics"
	"github.com/azlb/azlb/internal/names"
)

// Event reasons of the migration, recorded on Services.
const (
	// EventReasonMigrating (Normal): the Service's Basic load balancer is
	// being replaced; its frontend comes back on a Standard one.
	EventReasonMigrating = "BasicLoadBalancerMigration"
	// EventReasonMigrationFailed (Warning): a step failed; nothing was lost
	// and the next reconcile tries again.
	EventReasonMigrationFailed = "BasicLoadBalancerMigrationFailed"
	// EventReasonPublicIPStatic (Normal): the Service's Dynamic Basic
	// public IP was made Static to keep its address.
	EventReasonPublicIPStatic = "PublicIPMadeStatic"
	// EventReasonPublicIPUpgraded (Normal): the Service's public IP was
	// upgraded from Basic to Standard, keeping its address.
	EventReasonPublicIPUpgraded = "PublicIPUpgraded"
	// EventReasonPublicIPUpgradeFailed (Warning): the Service's Basic public
	// IP cannot be upgraded (in use by something else, or Dynamic).
	EventReasonPublicIPUpgradeFailed = "PublicIPUpgradeFailed"
)

// Caller labels the migration's changes in the store's wait metric.
const Caller = "BasicMigration"

// Decoupler takes pools out of every scale set model, scale set VM and
// network interface listing them (scaleSetID "": every scale set) and
// returns the writes (nicpool.Writer).
type Decoupler interface {
	DecouplePools(ctx context.Context, pools []*armnetwork.BackendAddressPool, scaleSetID string) (int, error)
}

// Options are the collaborators of a Migrator; Config, Store and PublicIPs
// are required.
type Options struct {
	Config    *config.Config
	Store     *lbstore.Store
	PublicIPs azure.PublicIPClient
	// Decoupler takes nodes out of the Basic pools. nil: a Basic load
	// balancer whose pools have members is not deleted (an error says
	// why).
	Decoupler Decoupler
	// Services returns the cluster's Services, to tell each of a Basic
	// load balancer what happens (events). nil: no events.
	Services func() []*v1.Service
	// Recorder records the events; nil drops them.
	Recorder record.EventRecorder
	// Clock times the migration. Default: the real clock.
	Clock clock.PassiveClock
}

// Migrator migrates the managed Basic load balancers; see the package
// documentation. It is safe for concurrent use, but Runs should not
// overlap (the caller runs it once per start, under its own lock).
type Migrator struct {
	o       Options
	managed map[string]bool // lower-cased names that may be migrated
}

// Applies reports whether the configuration migrates Basic load balancers:
// loadBalancerSku standard (node pools, not pod-based load balancing).
func Applies(cfg *config.Config) bool {
	return strings.EqualFold(cfg.LoadBalancerSKU, config.LoadBalancerSKUStandard) && !cfg.PodIPMode()
}

// New builds a Migrator.
func New(o Options) (*Migrator, error) {
	if o.Config == nil || o.Store == nil || o.PublicIPs == nil {
		return nil, errors.New("migration: Config, Store and PublicIPs are required")
	}
	if o.Recorder == nil {
		o.Recorder = &record.FakeRecorder{}
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	m := &Migrator{o: o, managed: map[string]bool{}}
	bases := []string{o.Config.ClusterName, o.Config.DefaultLoadBalancerName()}
	for _, c := range o.Config.MultipleStandardLoadBalancerConfigurations {
		bases = append(bases, c.Name)
	}
	for _, b := range bases {
		if b != "" {
			m.managed[strings.ToLower(b)] = true
			m.managed[strings.ToLower(names.InternalLB(b))] = true
		}
	}
	return m, nil
}

// Result tells what a Run did.
type Result struct {
	// LoadBalancers are the Basic load balancers deleted, sorted.
	LoadBalancers []string
	// StaticPublicIPs are the Dynamic public IPs made Static.
	StaticPublicIPs []string
	// Decoupled counts the scale set, scale set VM and network interface
	// writes that took nodes out of the Basic pools.
	Decoupled int
}

// basicLB is a managed Basic load balancer and the Services on it.
type basicLB struct {
	lb       *armnetwork.LoadBalancer
	services []*v1.Service
}

func (b basicLB) name() string { return ptr.Deref(b.lb.Name, "") }

// Run finds the managed Basic load balancers and replaces them (see the
// package documentation). Without any it costs one listing and writes
// nothing.
func (m *Migrator) Run(ctx context.Context) (Result, error) {
	log := klog.FromContext(ctx)
	start := m.o.Clock.Now()
	found, err := m.find(ctx)
	if err != nil {
		return Result{}, err
	}
	metrics.SetBasicLoadBalancers(len(found))
	if len(found) == 0 {
		return Result{}, nil
	}
	var lbNames, svcKeys []string
	for _, b := range found {
		lbNames = append(lbNames, b.name())
		for _, s := range b.services {
			svcKeys = append(svcKeys, names.ServiceKey(s))
			m.o.Recorder.Eventf(s, v1.EventTypeNormal, EventReasonMigrating,
				"Basic load balancer %s (retired by Azure on 2025-09-30) is being replaced by a Standard one: this Service's frontend goes away and comes back on the Standard load balancer with the same IP (%s); expect a short interruption",
				b.name(), ingressOf(s))
		}
	}
	log.Info("Basic load balancer migration: found managed Basic load balancers; migrating them to Standard", "loadBalancers", lbNames, "services", svcKeys)

	var res Result
	res.StaticPublicIPs, err = m.keepAddresses(ctx, found)
	metrics.CountMigrationStep(metrics.MigrationStepKeepAddresses, err)
	if err != nil {
		return res, m.failed(found, "keeping the public IPs' addresses (making Dynamic ones Static)", err)
	}
	log.Info("Basic load balancer migration: step 1/3 done: every public IP of the Basic load balancers is Static", "madeStatic", res.StaticPublicIPs)

	res.Decoupled, err = m.decouple(ctx, found)
	metrics.CountMigrationStep(metrics.MigrationStepDecouple, err)
	if err != nil {
		return res, m.failed(found, "taking the nodes out of the Basic pools", err)
	}
	log.Info("Basic load balancer migration: step 2/3 done: no scale set, VM or network interface is in a Basic pool any more", "writes", res.Decoupled)

	for _, b := range found {
		err := m.o.Store.Delete(ctx, Caller, b.name())
		metrics.CountMigrationStep(metrics.MigrationStepDelete, err)
		if err != nil {
			return res, m.failed(found, "deleting "+b.name(), err)
		}
		res.LoadBalancers = append(res.LoadBalancers, b.name())
	}
	metrics.SetBasicLoadBalancers(0)
	d := m.o.Clock.Since(start)
	metrics.ObserveMigration(d)
	log.Info("Basic load balancer migration: step 3/3 done: Basic load balancers deleted; each Service's reconcile now upgrades its public IP to Standard and recreates its frontend on the Standard load balancer, and the nodes join its pool",
		"loadBalancers", res.LoadBalancers, "duration", d)
	return res, nil
}

// find lists the managed Basic load balancers and the Services on them.
func (m *Migrator) find(ctx context.Context) ([]basicLB, error) {
	lbs, err := m.o.Store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("basic load balancer migration: %w", err)
	}
	byBase := map[string]*v1.Service{}
	if m.o.Services != nil {
		for _, s := range m.o.Services() {
			byBase[strings.ToLower(names.FrontendBase(s))] = s
		}
	}
	var out []basicLB
	for _, lb := range lbs {
		if lb.SKU == nil || ptr.Deref(lb.SKU.Name, "") != armnetwork.LoadBalancerSKUNameBasic || !m.managed[strings.ToLower(ptr.Deref(lb.Name, ""))] {
			continue
		}
		b := basicLB{lb: lb}
		seen := map[*v1.Service]bool{}
		for _, fe := range frontends(lb) {
			if s := byBase[strings.ToLower(names.ServiceBaseOfFrontend(ptr.Deref(fe.Name, "")))]; s != nil && !seen[s] {
				seen[s] = true
				b.services = append(b.services, s)
			}
		}
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name() < out[j].name() })
	return out, nil
}

// maxPublicIPWrites bounds the concurrent public IP writes of
// keepAddresses.
const maxPublicIPWrites = 8

// keepAddresses makes every Dynamic Basic public IP the Basic frontends use
// Static, while it is still associated (one listing per resource group,
// then the writes, maxPublicIPWrites at once); it returns their names.
func (m *Migrator) keepAddresses(ctx context.Context, found []basicLB) ([]string, error) {
	type use struct {
		lb, fe string
		svcs   []*v1.Service
	}
	users := map[string]use{} // lower-cased public IP id -> its frontend
	groups := map[string]string{}
	for _, b := range found {
		for _, fe := range frontends(b.lb) {
			if fe.Properties == nil || fe.Properties.PublicIPAddress == nil {
				continue
			}
			id := ptr.Deref(fe.Properties.PublicIPAddress.ID, "")
			rg, _, err := names.ParseID(id)
			if err != nil {
				return nil, err
			}
			groups[strings.ToLower(rg)] = rg
			users[strings.ToLower(id)] = use{lb: b.name(), fe: ptr.Deref(fe.Name, ""), svcs: b.services}
		}
	}
	type job struct {
		rg  string
		pip *armnetwork.PublicIPAddress
		u   use
	}
	var jobs []job
	for _, rg := range groups {
		pips, err := m.o.PublicIPs.List(ctx, rg)
		if err != nil {
			return nil, fmt.Errorf("list public IPs in %s: %w", rg, err)
		}
		for _, pip := range pips {
			if u, ok := users[strings.ToLower(ptr.Deref(pip.ID, ""))]; ok && IsBasic(pip) && isDynamic(pip) && address(pip) != "" {
				jobs = append(jobs, job{rg: rg, pip: pip, u: u})
			}
		}
	}
	var (
		mu   sync.Mutex
		made []string
		errs []error
		wg   sync.WaitGroup
	)
	sem := make(chan struct{}, maxPublicIPWrites)
	for _, j := range jobs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			name := ptr.Deref(j.pip.Name, "")
			_, err := MakeStatic(ctx, m.o.PublicIPs, j.rg, j.pip)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			made = append(made, name)
			klog.FromContext(ctx).Info("Basic load balancer migration: made a Dynamic public IP Static so that it keeps its address",
				"publicIP", name, "address", address(j.pip), "loadBalancer", j.u.lb)
			for _, s := range j.u.svcs {
				if names.Owns(names.FrontendBase(s), j.u.fe) {
					m.o.Recorder.Eventf(s, v1.EventTypeNormal, EventReasonPublicIPStatic,
						"Public IP %s (%s) was Dynamic; made Static so that it keeps its address when Basic load balancer %s is deleted", name, address(j.pip), j.u.lb)
				}
			}
		})
	}
	wg.Wait()
	sort.Strings(made)
	return made, errors.Join(errs...)
}

// decouple takes the nodes out of the Basic load balancers' pools, all at
// once: a scale set model or VM in both a public and an internal pool is
// written once.
func (m *Migrator) decouple(ctx context.Context, found []basicLB) (int, error) {
	var pools []*armnetwork.BackendAddressPool
	for _, b := range found {
		if b.lb.Properties != nil {
			pools = append(pools, b.lb.Properties.BackendAddressPools...)
		}
	}
	if m.o.Decoupler != nil {
		return m.o.Decoupler.DecouplePools(ctx, pools, "")
	}
	for _, p := range pools {
		if p != nil && p.Properties != nil && len(p.Properties.BackendIPConfigurations) > 0 {
			return 0, fmt.Errorf("pool %s has members, and taking them out needs the VM inventory (scale set, VM and network interface clients), which this controller runs without", ptr.Deref(p.ID, ""))
		}
	}
	return 0, nil
}

// failed records a failed step on every Service of the Basic load
// balancers and returns the error.
func (m *Migrator) failed(found []basicLB, step string, err error) error {
	err = fmt.Errorf("basic load balancer migration: %s: %w (nothing was lost; the next reconcile tries again)", step, err)
	for _, b := range found {
		for _, s := range b.services {
			m.o.Recorder.Eventf(s, v1.EventTypeWarning, EventReasonMigrationFailed, "%v", err)
		}
	}
	return err
}

func frontends(lb *armnetwork.LoadBalancer) []*armnetwork.FrontendIPConfiguration {
	if lb == nil || lb.Properties == nil {
		return nil
	}
	return lb.Properties.FrontendIPConfigurations
}

func ingressOf(s *v1.Service) string {
	var ips []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			ips = append(ips, in.IP)
		}
	}
	if len(ips) == 0 {
		return "none recorded"
	}
	return strings.Join(ips, ", ")
}
