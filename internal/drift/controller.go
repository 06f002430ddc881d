package drift

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/metrics"
	"github.com/azlb/azlb/internal/provider"
)

// ControllerName is the drift controller's name in --controllers.
const ControllerName = "drift-repair"

// EventReasonDriftRepaired (Normal): a pass wrote back what the Service
// calls for; the message names what was written.
const EventReasonDriftRepaired = "DriftRepaired"

// Workers is how many Services a pass repairs at once: enough for their
// writes to share the writers' rounds, few enough to leave the ARM rate
// limits to the service controller.
const Workers = 4

// Repairer reads and repairs Azure; *provider.Provider is one.
type Repairer interface {
	BeginRepairPass(ctx context.Context) (context.Context, []provider.Repair, error)
	RepairService(ctx context.Context, svc *v1.Service, nodes []*v1.Node) ([]provider.Repair, error)
}

// Options configure a Controller.
type Options struct {
	// Interval between passes; 0 or less: Run returns at once.
	Interval time.Duration
	Repairer Repairer
	Services corelisters.ServiceLister
	Nodes    corelisters.NodeLister
	// Serves reports whether azlb serves the Service (its load-balancer
	// class); nil: every LoadBalancer Service without a class.
	Serves   func(*v1.Service) bool
	Recorder record.EventRecorder
	// Clock; default the real clock.
	Clock clock.WithTicker
}

// Controller runs drift passes.
type Controller struct {
	o Options
}

// New returns a drift controller.
func New(o Options) (*Controller, error) {
	if o.Repairer == nil || o.Services == nil || o.Nodes == nil || o.Recorder == nil {
		return nil, errors.New("drift: Repairer, Services, Nodes and Recorder are required")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Serves == nil {
		o.Serves = func(s *v1.Service) bool { return s.Spec.LoadBalancerClass == nil }
	}
	return &Controller{o: o}, nil
}

// Name is the controller's name.
func (c *Controller) Name() string { return ControllerName }

// Run runs a pass every interval until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	if c.o.Interval <= 0 {
		klog.FromContext(ctx).Info("Drift pass off (driftRepairIntervalInSeconds is 0)")
		return nil
	}
	t := c.o.Clock.NewTicker(c.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			_, _ = c.Pass(ctx)
		}
	}
}

// Stats sums up one pass.
type Stats struct {
	Services int // Services looked at
	Repairs  int // objects written back
	Failed   int // Services whose repair failed
}

// Pass runs one drift pass now.
func (c *Controller) Pass(ctx context.Context) (Stats, error) {
	log := klog.FromContext(ctx).WithName("drift")
	start := c.o.Clock.Now()
	var st Stats
	err := c.pass(ctx, log, &st)
	metrics.ObserveDriftPass(err == nil, c.o.Clock.Since(start))
	if err != nil {
		log.Error(err, "Drift pass failed; the next one runs on time", "services", st.Services, "repairs", st.Repairs)
		return st, err
	}
	log.V(2).Info("Drift pass done", "services", st.Services, "repairs", st.Repairs, "duration", c.o.Clock.Since(start))
	return st, nil
}

func (c *Controller) pass(ctx context.Context, log klog.Logger, st *Stats) error {
	pctx, repairs, err := c.o.Repairer.BeginRepairPass(ctx)
	for _, r := range repairs {
		metrics.CountDriftRepair(r.Kind)
		st.Repairs++
		log.Info("Repaired drift", "object", r.What)
	}
	if err != nil {
		return err
	}
	svcs, err := c.o.Services.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list Services: %w", err)
	}
	nodes, err := c.o.Nodes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	work := make(chan *v1.Service)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range Workers {
		wg.Go(func() {
			for svc := range work {
				repairs, err := c.o.Repairer.RepairService(pctx, svc, nodes)
				c.report(log, svc, repairs)
				mu.Lock()
				st.Repairs += len(repairs)
				if err != nil {
					st.Failed++
					errs = append(errs, fmt.Errorf("service %s/%s: %w", svc.Namespace, svc.Name, err))
				}
				mu.Unlock()
			}
		})
	}
	for _, svc := range svcs {
		if svc.Spec.Type != v1.ServiceTypeLoadBalancer || !c.o.Serves(svc) {
			continue
		}
		st.Services++
		select {
		case work <- svc:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// report makes the repairs of one Service an event, log lines and metrics.
func (c *Controller) report(log klog.Logger, svc *v1.Service, repairs []provider.Repair) {
	if len(repairs) == 0 {
		return
	}
	what := make([]string, 0, len(repairs))
	for _, r := range repairs {
		metrics.CountDriftRepair(r.Kind)
		what = append(what, r.What)
	}
	log.Info("Repaired drift", "service", klog.KObj(svc), "objects", what)
	c.o.Recorder.Eventf(svc, v1.EventTypeNormal, EventReasonDriftRepaired,
		"Azure differed from what the Service calls for; wrote back: %s", strings.Join(what, "; "))
}
