package readinessgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// The names users see (docs/admin-state.md, "Pod readiness gates").
const (
	// LabelOptIn on a namespace, with the value LabelOptInValue, turns the
	// gate on for the pods there that declare it.
	LabelOptIn      = "cloudprovider.azure.microsoft.com/pod-readiness-gate"
	LabelOptInValue = "enabled"
	// ConditionType is the readiness gate's condition type: pods declare it
	// in spec.readinessGates.
	ConditionType v1.PodConditionType = "cloudprovider.azure.microsoft.com/load-balancer-ready"

	// Condition reasons.
	ReasonReady           = "LoadBalancerReady"
	ReasonNotLoadBalanced = "NotLoadBalanced"
	ReasonTimeout         = "Timeout"

	// EventReasonTimeout (Warning, on the pod): the gate was opened by the
	// fail-open timeout, not by the gateway.
	EventReasonTimeout = "LoadBalancerReadinessGateTimeout"

	// ControllerName names the controller in logs and its workqueue.
	ControllerName = "pod-readiness-gate"
)

// Defaults of Options.
const (
	// DefaultTimeout is the fail-open timeout: the gate turns True this
	// long after the pod's containers became ready even if the gateway does
	// not hold its address by then. Below the Deployment's default
	// progressDeadlineSeconds (600 s), so a stuck gateway slows a rollout
	// but does not fail it.
	DefaultTimeout = 5 * time.Minute
	// DefaultPoll is how often a gated pod is checked again (the gateway's
	// state changes without an event the controller sees).
	DefaultPoll = 200 * time.Millisecond
)

// Gateway is what the controller needs of the service gateway engine.
type Gateway interface {
	// HoldsPodAddress reports whether the gateway holds one of the pod
	// addresses for the Service with this UID; managed is false when the
	// gateway has no record of the Service or withholds its pods.
	HoldsPodAddress(svc types.UID, ips ...netip.Addr) (held, managed bool)
	// RecheckEndpoints has the gateway read the Service's endpoints again.
	RecheckEndpoints(namespace, service string)
}

// Options are the controller's collaborators and settings. Client, Pods,
// Namespaces, Services and Gateway are required.
type Options struct {
	// Client patches pod status.
	Client     kubernetes.Interface
	Pods       coreinformers.PodInformer
	Namespaces coreinformers.NamespaceInformer
	Services   coreinformers.ServiceInformer
	Gateway    Gateway
	// Owns says whether azlb serves a Service (its load-balancer class);
	// nil: every LoadBalancer Service.
	Owns func(*v1.Service) bool
	// Recorder records pod events; nil drops them.
	Recorder record.EventRecorder
	// Clock: default the real clock.
	Clock clock.WithTicker
	// Timeout is the fail-open timeout (DefaultTimeout when 0 or less);
	// Poll the re-check interval (DefaultPoll).
	Timeout, Poll time.Duration
}

// Controller sets the readiness gate condition of gated pods.
type Controller struct {
	client     kubernetes.Interface
	pods       corelisters.PodLister
	namespaces corelisters.NamespaceLister
	services   corelisters.ServiceLister
	gateway    Gateway
	owns       func(*v1.Service) bool
	recorder   record.EventRecorder
	clock      clock.WithTicker
	timeout    time.Duration
	poll       time.Duration
	synced     []cache.InformerSynced
	queue      workqueue.TypedRateLimitingInterface[string]

	// mu guards done: the UIDs of pods whose condition this controller
	// wrote (their informer copy may lag behind the patch).
	mu   sync.Mutex
	done map[types.UID]struct{}
}

// New builds the controller and registers its handlers. Call Run.
func New(o Options) (*Controller, error) {
	var missing []string
	for _, f := range []struct {
		name  string
		unset bool
	}{{"Client", o.Client == nil}, {"Pods", o.Pods == nil}, {"Namespaces", o.Namespaces == nil}, {"Services", o.Services == nil}, {"Gateway", o.Gateway == nil}} {
		if f.unset {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("readinessgate: required options missing: %s", strings.Join(missing, ", "))
	}
	c := &Controller{
		client: o.Client, pods: o.Pods.Lister(), namespaces: o.Namespaces.Lister(), services: o.Services.Lister(),
		gateway: o.Gateway, owns: o.Owns, recorder: o.Recorder, clock: o.Clock, timeout: o.Timeout, poll: o.Poll,
		done: map[types.UID]struct{}{},
	}
	if c.owns == nil {
		c.owns = func(*v1.Service) bool { return true }
	}
	if c.recorder == nil {
		c.recorder = &record.FakeRecorder{} // a nil channel: events are dropped
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.poll <= 0 {
		c.poll = DefaultPoll
	}
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig[string](workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "readinessgate", Clock: c.clock})
	pr, err := o.Pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onPod,
		UpdateFunc: func(_, n any) { c.onPod(n) },
		DeleteFunc: c.onPodDelete,
	})
	if err != nil {
		return nil, fmt.Errorf("readinessgate: register pod handler: %w", err)
	}
	nr, err := o.Namespaces.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onNamespace,
		UpdateFunc: func(_, n any) { c.onNamespace(n) },
	})
	if err != nil {
		return nil, fmt.Errorf("readinessgate: register namespace handler: %w", err)
	}
	c.synced = []cache.InformerSynced{pr.HasSynced, nr.HasSynced, o.Services.Informer().HasSynced}
	return c, nil
}

// Name is the controller's name.
func (c *Controller) Name() string { return ControllerName }

// Run processes gated pods until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	log := klog.FromContext(ctx).WithName("readinessgate")
	ctx = klog.NewContext(ctx, log)
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("readinessgate: informers did not sync")
	}
	log.Info("Starting pod readiness gate controller", "timeout", c.timeout, "conditionType", ConditionType, "namespaceLabel", LabelOptIn+"="+LabelOptInValue)
	var wg sync.WaitGroup
	wg.Go(func() {
		for c.processNext(ctx) {
		}
	})
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	return nil
}

func (c *Controller) onPod(obj any) {
	if p, ok := obj.(*v1.Pod); ok && declaresGate(p) && !gateTrue(p) {
		c.queue.Add(p.Namespace + "/" + p.Name)
	}
}

func (c *Controller) onPodDelete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if p, ok := obj.(*v1.Pod); ok {
		c.mu.Lock()
		delete(c.done, p.UID)
		c.mu.Unlock()
	}
}

// onNamespace queues the gated pods of a namespace that opted in.
func (c *Controller) onNamespace(obj any) {
	ns, ok := obj.(*v1.Namespace)
	if !ok || !optedIn(ns) {
		return
	}
	pods, _ := c.pods.Pods(ns.Name).List(labels.Everything()) // a lister's List does not fail
	for _, p := range pods {
		c.onPod(p)
	}
}

func optedIn(ns *v1.Namespace) bool { return ns != nil && ns.Labels[LabelOptIn] == LabelOptInValue }

func declaresGate(p *v1.Pod) bool {
	for _, g := range p.Spec.ReadinessGates {
		if g.ConditionType == ConditionType {
			return true
		}
	}
	return false
}

func condition(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func gateTrue(p *v1.Pod) bool {
	c := condition(p, ConditionType)
	return c != nil && c.Status == v1.ConditionTrue
}

// containersReadySince is when the pod's containers became ready, and
// whether they are.
func containersReadySince(p *v1.Pod) (time.Time, bool) {
	c := condition(p, v1.ContainersReady)
	if c == nil || c.Status != v1.ConditionTrue {
		return time.Time{}, false
	}
	return c.LastTransitionTime.Time, true
}

// HeldByGate reports whether the pod's endpoints may be registered in the
// gateway although they are not ready: the pod is in an opted-in
// namespace, declares the gate, is not being deleted and its containers
// are ready. It stays so once the gate is True, until the pod's endpoints
// turn ready (the EndpointSlice follows the pod's Ready condition a moment
// later), so the address does not leave the gateway in between.
func (c *Controller) HeldByGate(namespace, name string) bool {
	p, err := c.pods.Pods(namespace).Get(name)
	if err != nil {
		return false
	}
	return c.held(p)
}

func (c *Controller) held(p *v1.Pod) bool {
	if !declaresGate(p) || p.DeletionTimestamp != nil {
		return false
	}
	if _, ready := containersReadySince(p); !ready {
		return false
	}
	ns, err := c.namespaces.Get(p.Namespace)
	return err == nil && optedIn(ns)
}

// pending: held, and the gate is not True yet (nor written by this
// controller: the informer's copy may lag behind the patch).
func (c *Controller) pending(p *v1.Pod) bool {
	if !c.held(p) || gateTrue(p) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, written := c.done[p.UID]
	return !written
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	again, err := c.sync(ctx, key)
	switch {
	case err != nil:
		klog.FromContext(ctx).Info("Pod readiness gate update failed; retrying", "pod", key, "err", err)
		c.queue.AddRateLimited(key)
	case again > 0:
		c.queue.Forget(key)
		c.queue.AddAfter(key, again)
	default:
		c.queue.Forget(key)
	}
	return true
}

// sync checks one pod. It returns when to check it again (0: not), or an
// error to retry with backoff.
func (c *Controller) sync(ctx context.Context, key string) (time.Duration, error) {
	ns, name, _ := strings.Cut(key, "/")
	p, err := c.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if !c.pending(p) {
		return 0, nil // not ours, already True, or its containers are not ready yet (a pod event brings it back)
	}
	since, _ := containersReadySince(p)
	waiting, lb := c.waitingFor(p)
	now := c.clock.Now()
	switch {
	case len(waiting) == 0 && len(lb) == 0:
		return 0, c.open(ctx, p, ReasonNotLoadBalanced, "No LoadBalancer Service served by azlb selects the pod.", "not_load_balanced", since, now)
	case len(waiting) == 0:
		return 0, c.open(ctx, p, ReasonReady, "The service gateway holds the pod's address for "+strings.Join(lb, ", ")+".", "ready", since, now)
	case !now.Before(since.Add(c.timeout)):
		msg := fmt.Sprintf("The service gateway did not hold the pod's address for %s within %v; opened anyway (fail-open).", strings.Join(waiting, ", "), c.timeout)
		if err := c.open(ctx, p, ReasonTimeout, msg, "timeout", since, now); err != nil {
			return 0, err
		}
		c.recorder.Event(p, v1.EventTypeWarning, EventReasonTimeout, msg)
		return 0, nil
	}
	for _, s := range waiting {
		c.gateway.RecheckEndpoints(ns, s)
	}
	return min(c.poll, since.Add(c.timeout).Sub(now)), nil
}

// waitingFor lists, sorted, the LoadBalancer Services the gateway serves
// that select the pod (lb), and those of them for which the gateway does
// not hold one of the pod's addresses yet (waiting). A Service the gateway
// has no record of is not waited for: it is not azlb's (another
// load-balancer class), or not admitted yet (being created: no rollout
// waits on it).
func (c *Controller) waitingFor(p *v1.Pod) (waiting, lb []string) {
	var ips []netip.Addr
	for _, a := range p.Status.PodIPs {
		if ip, err := netip.ParseAddr(a.IP); err == nil {
			ips = append(ips, ip)
		}
	}
	if len(ips) == 0 && p.Status.PodIP != "" {
		if ip, err := netip.ParseAddr(p.Status.PodIP); err == nil {
			ips = append(ips, ip)
		}
	}
	svcs, _ := c.services.Services(p.Namespace).List(labels.Everything()) // a lister's List does not fail
	for _, s := range svcs {
		if s.Spec.Type != v1.ServiceTypeLoadBalancer || len(s.Spec.Selector) == 0 || !c.owns(s) ||
			!labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(p.Labels)) {
			continue
		}
		held, managed := c.gateway.HoldsPodAddress(s.UID, ips...)
		if !managed {
			continue // not a Service the gateway serves (another class, or not admitted)
		}
		lb = append(lb, s.Name)
		if !held {
			waiting = append(waiting, s.Name)
		}
	}
	sort.Strings(waiting)
	sort.Strings(lb)
	return waiting, lb
}

// open writes the gate condition True (a strategic-merge patch of the
// status, the pod's UID as precondition) and records the latency.
func (c *Controller) open(ctx context.Context, p *v1.Pod, reason, message, result string, since, now time.Time) error {
	patch := map[string]any{
		"metadata": map[string]any{"uid": p.UID},
		"status": map[string]any{"conditions": []v1.PodCondition{{Type: ConditionType, Status: v1.ConditionTrue,
			Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(now)}}},
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or replaced (another UID): a new pod is checked on its own
	}
	if err != nil {
		return fmt.Errorf("patch the readiness gate condition of pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	c.mu.Lock()
	c.done[p.UID] = struct{}{}
	c.mu.Unlock()
	observe(result, now.Sub(since))
	klog.FromContext(ctx).V(2).Info("Pod readiness gate True", "pod", klog.KObj(p), "reason", reason, "after", now.Sub(since))
	return nil
}
