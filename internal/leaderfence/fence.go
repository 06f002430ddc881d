package leaderfence

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	coordinationinformers "k8s.io/client-go/informers/coordination/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Options configure a Fence.
type Options struct {
	// Client reads and watches the Lease (the elector's own identity).
	Client kubernetes.Interface
	// Namespace and Name name the leader-election Lease.
	Namespace, Name string
	// RenewDeadline is the elector's --leader-elect-renew-deadline: a lease
	// renewed longer ago than this no longer lets this replica write.
	RenewDeadline time.Duration
	// Clock is the real clock unless set (tests step a fake one).
	Clock clock.PassiveClock
}

// Fence admits writes while this replica holds a fresh lease.
type Fence struct {
	opts Options
	view atomic.Pointer[view]
}

// view is what the fence last saw of the lease.
type view struct {
	identity string
	holder   string
	renew    time.Time
}

// New returns a closed fence; Start opens it.
func New(opts Options) (*Fence, error) {
	if opts.Client == nil || opts.Namespace == "" || opts.Name == "" {
		return nil, errors.New("leader fence: a client and the lease's namespace and name are required")
	}
	if opts.RenewDeadline <= 0 {
		return nil, fmt.Errorf("leader fence: renew deadline %v must be positive", opts.RenewDeadline)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Fence{opts: opts}, nil
}

// Start learns this replica's identity from the lease it has just acquired
// and follows the lease until ctx ends. It returns at once; reading the
// lease is retried (every second) until it succeeds.
func (f *Fence) Start(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("lease", f.opts.Namespace+"/"+f.opts.Name)
	go func() {
		var lease *coordinationv1.Lease
		err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
			l, err := f.opts.Client.CoordinationV1().Leases(f.opts.Namespace).Get(ctx, f.opts.Name, metav1.GetOptions{})
			if err != nil {
				logger.Error(err, "Reading the leader lease; ARM writes wait for it")
				return false, nil
			}
			lease = l
			return true, nil
		})
		if err != nil {
			return
		}
		identity := ""
		if lease.Spec.HolderIdentity != nil {
			identity = *lease.Spec.HolderIdentity
		}
		if identity == "" {
			logger.Error(nil, "The leader lease names no holder; this replica writes nothing to Azure")
			return
		}
		f.observe(identity, lease)
		logger.Info("Write fence follows the leader lease", "identity", identity)
		f.follow(ctx, identity)
	}()
}

// follow keeps the view current from a watch of the one lease.
func (f *Fence) follow(ctx context.Context, identity string) {
	byName := fields.OneTermEqualSelector("metadata.name", f.opts.Name).String()
	inf := coordinationinformers.NewFilteredLeaseInformer(f.opts.Client, f.opts.Namespace, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.FieldSelector = byName })
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { f.observeObject(identity, obj) },
		UpdateFunc: func(_, obj any) { f.observeObject(identity, obj) },
		DeleteFunc: func(any) { f.view.Store(&view{identity: identity}) },
	})
	inf.RunWithContext(ctx)
}

func (f *Fence) observeObject(identity string, obj any) {
	if l, ok := obj.(*coordinationv1.Lease); ok {
		f.observe(identity, l)
	}
}

func (f *Fence) observe(identity string, l *coordinationv1.Lease) {
	v := &view{identity: identity}
	if l.Spec.HolderIdentity != nil {
		v.holder = *l.Spec.HolderIdentity
	}
	if l.Spec.RenewTime != nil {
		v.renew = l.Spec.RenewTime.Time
	}
	f.view.Store(v)
}

// ErrNotLeader is what Allow's refusals unwrap to.
var ErrNotLeader = errors.New("this replica does not hold a fresh leader lease")

// Allow is nil while this replica may write: the lease names it and was
// renewed less than RenewDeadline ago.
func (f *Fence) Allow() error {
	v := f.view.Load()
	switch {
	case v == nil:
		return fmt.Errorf("%w: lease %s/%s not read yet", ErrNotLeader, f.opts.Namespace, f.opts.Name)
	case v.holder != v.identity:
		return fmt.Errorf("%w: lease %s/%s is held by %q, this replica is %q", ErrNotLeader, f.opts.Namespace, f.opts.Name, v.holder, v.identity)
	}
	if age := f.opts.Clock.Since(v.renew); age >= f.opts.RenewDeadline {
		return fmt.Errorf("%w: lease %s/%s last renewed %v ago, renew deadline %v", ErrNotLeader, f.opts.Namespace, f.opts.Name,
			age.Round(time.Millisecond), f.opts.RenewDeadline)
	}
	return nil
}
