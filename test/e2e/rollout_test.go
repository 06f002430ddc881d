package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/readinessgate"
	"github.com/azlb/azlb/internal/testutil"
)

// Rollout timing (docs/admin-state.md, "Rolling updates"). Time is scaled
// down so the test is short: the pool's batching window is 1 s (30 s by
// default), its drain period 2 s (30 s by default), and an old pod serves
// for 5 s after it starts terminating (its graceful shutdown, longer than the
// drain period, as a pod with long-lived connections has).
const (
	rolloutInterval   = 1 // loadBalancerBackendPoolUpdateIntervalInSeconds
	rolloutDrain      = 2 // loadBalancerBackendPoolDrainPeriodInSeconds
	rolloutStartup    = 500 * time.Millisecond
	rolloutGrace      = 5 * time.Second
	rolloutSessionEnd = rolloutGrace - time.Second // sessions close this long after their pod starts terminating
)

// TestLocalServiceRollingUpdate is a rolling update of a 3-replica
// externalTrafficPolicy Local Service end to end: the real controller
// (multiple Standard load balancers: Local Services have dedicated pools),
// a real API server, the emulator's data plane carrying 200 new connections
// per second to four loopback nodes whose simulated kube-proxy forwards as
// kube-proxy does (ready endpoints, else terminating-but-serving ones).
//
// The Deployment's rollout (maxSurge 1, maxUnavailable 0) is played on the
// EndpointSlice as the EndpointSlice controller writes it: old pods a1, a2,
// a3 on n1, n2, n3; for each i a new pod b_i is created (not ready), is
// ready 500 ms later, and then a_i starts terminating (ready false, serving
// true, terminating true) and leaves the slice 5 s later. b1 goes to n4,
// b2 to n1 and b3 to n2, so n3 ends without a pod. Before the rollout three
// sessions (keep-alive connections, a request every 100 ms) are opened to
// each of n1, n2 and n3; each closes 1 s before its node's old pod is gone.
//
// Wanted: no new connection fails and no session is reset. A node whose
// only pod is terminating must stay in the pool, Down, until the pod is
// gone: removing it at once would reset its sessions when the (shorter)
// drain period ends.
func TestLocalServiceRollingUpdate(t *testing.T) {
	ctx := context.Background()
	c := startRolloutCluster(t)
	n1, n2, n3, n4 := c.nodes[0], c.nodes[1], c.nodes[2], c.nodes[3]
	ingress := testutil.Nth(c.public, 1)
	svc := loadBalancerService(c.ns, "web", int32(testutil.FreePort(t, ingress)))
	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	svc.Annotations = map[string]string{annotations.KeyDisableFloatingIP: "true"}
	es := &rolloutSlice{ns: c.ns, name: "web-1", svc: "web"}
	for i, n := range []string{n1, n2, n3} {
		es.add(fmt.Sprintf("a%d", i+1), n, "ready")
	}
	created, err := suite.cs.CoreV1().Services(c.ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteServiceAndWait(t, c.ns, "web") })
	es.create(t)
	if ip := ingressIP(t, c.ns, "web"); ip != ingress.String() {
		t.Fatalf("ingress IP %s, want %s", ip, ingress)
	}
	frontend := netip.AddrPortFrom(ingress, uint16(created.Spec.Ports[0].Port))
	pool := c.ns + ".web" // names.LocalServicePool
	c.waitPool(t, pool, n1+"/None", n2+"/None", n3+"/None")
	eventually(t, 30*time.Second, "n1, n2 and n3 probed up in the data plane", func(context.Context) (bool, error) {
		st, _ := c.env.Emulator().DataPlaneStatus()
		up := 0
		for _, r := range st.Rules {
			for _, m := range r.Members {
				if m.Eligible {
					up++
				}
			}
		}
		return up == 3, nil
	})

	watch := c.watchPool(t, pool)
	old := map[string]*sessions{n1: openSessions(t, frontend, n1, 3), n2: openSessions(t, frontend, n2, 3), n3: openSessions(t, frontend, n3, 3)}
	steps := []struct{ newNode, oldNode string }{{n4, n1}, {n1, n2}, {n2, n3}}
	rep, resets, took := playRollout(t, "rolling-update", frontend, n3, 30*time.Second, old, len(steps), func(i int, p *rolloutPlay) {
		step := steps[i]
		b, a := fmt.Sprintf("b%d", i+1), fmt.Sprintf("a%d", i+1)
		es.set(t, b, step.newNode, "not-ready")
		time.Sleep(rolloutStartup) // the rollout's schedule: the new pod starts
		es.set(t, b, step.newNode, "ready")
		es.set(t, a, step.oldNode, "serving-terminating")
		p.endSessions(old[step.oldNode], rolloutSessionEnd)
		p.later(func() {
			time.Sleep(rolloutGrace) // the schedule: the old pod's graceful shutdown
			es.remove(t, a)
		})
	})
	final := []string{n1 + "/None", n2 + "/None", n4 + "/None"}
	c.waitPool(t, pool, final...)
	changes := watch.stop()
	var settled time.Time
	var seen []string
	for _, ch := range changes {
		seen = append(seen, fmt.Sprintf("+%v %s", ch.at.Sub(rep.Event).Round(10*time.Millisecond), strings.Join(ch.entries, ",")))
		if slices.Equal(ch.entries, final) {
			settled = ch.at
		}
	}
	t.Logf("the pool during the rollout (time from its start):\n  %s", strings.Join(seen, "\n  "))
	t.Logf("rolling update: %d new connections from its start on, %d failed; %d of 9 sessions reset; "+
		"the rollout took %v (last old pod gone); the pool held the new pods' nodes only, all None, %v after its start",
		rep.Sent, rep.Failed, resets, took.Round(time.Millisecond), settled.Sub(rep.Event).Round(10*time.Millisecond))
	t.Logf("timeline of %s, whose pod terminates last and gets no new one (100 ms per character; # %s, x failed, . other nodes, | start):\n%s",
		n3, n3, rep.Timeline(n3, 100*time.Millisecond))
	if rep.Failed != 0 || resets != 0 {
		t.Errorf("the rolling update failed %d new connections and reset %d sessions; want 0 and 0", rep.Failed, resets)
	}
}

// rolloutPlay is a rollout played in the background while RunCutover
// measures: its steps run in order; a step can end an old pod's sessions
// and schedule the old pod's end, which run beside the next steps.
type rolloutPlay struct {
	mu     sync.Mutex
	timers []*time.Timer
	wg     sync.WaitGroup
}

// endSessions finishes s after d (the old pod closing its sessions while
// it terminates).
func (p *rolloutPlay) endSessions(s *sessions, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.timers = append(p.timers, time.AfterFunc(d, s.finish))
}

// later runs fn beside the next steps (an old pod's graceful shutdown).
func (p *rolloutPlay) later(fn func()) { p.wg.Go(fn) }

// playRollout opens new connections to frontend, plays steps 0 to n-1 of
// the rollout once the load is steady, and measures until the last of them
// and of what they scheduled has run; last names the backend that answers
// last among the old ones (its timeline is the one to show). It returns
// the report, how many of the old sessions were reset, and how long the
// rollout took.
func playRollout(t *testing.T, name string, frontend netip.AddrPort, last string, maxAfter time.Duration,
	old map[string]*sessions, n int, step func(i int, p *rolloutPlay)) (testutil.CutoverReport, int, time.Duration) {
	t.Helper()
	p := &rolloutPlay{}
	var finished time.Time
	done := make(chan struct{})
	rep := testutil.RunCutover(t, testutil.CutoverScenario{Name: name, Taint: true}, testutil.Cutover{
		Frontend: frontend, Node: last, Quiet: 2 * time.Second, MaxAfter: maxAfter,
		Taint: func(context.Context) error { // the rollout starts
			go func() {
				defer close(done)
				for i := range n {
					step(i, p)
				}
				p.wg.Wait()
				finished = time.Now()
			}()
			return nil
		},
		Stop: func() { <-done }, // the measurement goes on until the last old pod is gone
	})
	resets := 0
	for _, s := range old {
		resets += s.wait()
	}
	p.mu.Lock()
	for _, tm := range p.timers {
		tm.Stop()
	}
	p.mu.Unlock()
	return rep, resets, finished.Sub(rep.Event)
}

// rolloutCluster is a data plane cluster (startDataPlaneClusterWith) with
// multiple Standard load balancers, the short batching window and drain
// period of the rollout, and four nodes.
type rolloutCluster struct{ *dataPlaneCluster }

func startRolloutCluster(t *testing.T) *rolloutCluster {
	t.Helper()
	return &rolloutCluster{startDataPlaneClusterWith(t, "roll", 4, clusterOptions{proxies: true,
		features: []string{emulator.FeatureConnectionDraining},
		config: map[string]any{
			"multipleStandardLoadBalancerConfigurations":     []map[string]any{{"name": lbName}},
			"loadBalancerBackendPoolUpdateIntervalInSeconds": rolloutInterval,
			"loadBalancerBackendPoolDrainPeriodInSeconds":    rolloutDrain,
		}})}
}

// waitPool waits until the pool's entries are exactly want (name/adminState,
// sorted).
func (c *rolloutCluster) waitPool(t *testing.T, pool string, want ...string) {
	t.Helper()
	cl, err := c.env.Clients(context.Background(), azure.ClientOptions{Source: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	eventually(t, 30*time.Second, "pool "+pool+" = "+strings.Join(want, ","), func(ctx context.Context) (bool, error) {
		p, err := cl.BackendPool.Get(ctx, devenv.ResourceGroup, lbName, pool)
		if err != nil {
			return false, nil
		}
		got = poolEntries(p)
		return slices.Equal(got, want), nil
	})
}

// poolWatch records the pool's entries every time they change.
type poolWatch struct {
	cancel  context.CancelFunc
	done    chan struct{}
	changes []poolChange
}

type poolChange struct {
	at      time.Time
	entries []string // name/adminState, sorted
}

// watchPool polls the pool every 20 ms until stop.
func (c *rolloutCluster) watchPool(t *testing.T, pool string) *poolWatch {
	t.Helper()
	cl, err := c.env.Clients(context.Background(), azure.ClientOptions{Source: "e2e-watch"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &poolWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer cl.Close()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if p, err := cl.BackendPool.Get(ctx, devenv.ResourceGroup, lbName, pool); err == nil {
				got := poolEntries(p)
				if n := len(w.changes); n == 0 || !slices.Equal(w.changes[n-1].entries, got) {
					w.changes = append(w.changes, poolChange{at: time.Now(), entries: got})
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

// stop ends the watch and returns the changes seen.
func (w *poolWatch) stop() []poolChange {
	w.cancel()
	<-w.done
	return w.changes
}

// poolEntries lists the pool's entries as name/adminState, sorted.
func poolEntries(p *armnetwork.BackendAddressPool) []string {
	var out []string
	if p == nil || p.Properties == nil {
		return out
	}
	for _, a := range p.Properties.LoadBalancerBackendAddresses {
		out = append(out, ptr.Deref(a.Name, "")+"/"+string(backendpool.AdminStateOf(a)))
	}
	slices.Sort(out)
	return out
}

// rolloutSlice is the Service's one EndpointSlice, written as the
// EndpointSlice controller writes it while pods start and terminate.
type rolloutSlice struct {
	ns, name, svc string
	// addr gives a pod's address (default: 10.244.8.<creation order>).
	addr func(pod string) string
	mu   sync.Mutex
	pods []string // in creation order
	eps  map[string]discoveryv1.Endpoint
}

// add records a pod's endpoint (not written yet).
func (s *rolloutSlice) add(pod, node, state string) {
	if s.eps == nil {
		s.eps = map[string]discoveryv1.Endpoint{}
	}
	if _, ok := s.eps[pod]; !ok {
		s.pods = append(s.pods, pod)
	}
	a := fmt.Sprintf("10.244.8.%d", slices.Index(s.pods, pod)+1)
	if s.addr != nil {
		a = s.addr(pod)
	}
	s.eps[pod] = discoveryv1.Endpoint{Addresses: []string{a},
		NodeName: ptr.To(node), TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: s.ns, Name: pod},
		Conditions: rolloutConditions(state)}
}

func rolloutConditions(state string) discoveryv1.EndpointConditions {
	switch state {
	case "ready":
		return discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}
	case "serving-terminating":
		return discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
	case "terminating": // no longer serving: its readiness probe failed
		return discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(true)}
	default: // not-ready
		return discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(false)}
	}
}

func (s *rolloutSlice) object() *discoveryv1.EndpointSlice {
	out := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: s.ns, Name: s.name, Labels: map[string]string{discoveryv1.LabelServiceName: s.svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: ptr.To[int32](80)}},
	}
	for _, p := range s.pods {
		if ep, ok := s.eps[p]; ok {
			out.Endpoints = append(out.Endpoints, ep)
		}
	}
	return out
}

func (s *rolloutSlice) create(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := suite.cs.DiscoveryV1().EndpointSlices(s.ns).Create(context.Background(), s.object(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// set writes the pod's endpoint in the state.
func (s *rolloutSlice) set(t *testing.T, pod, node, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.add(pod, node, state)
	s.write(t)
}

// remove takes the pod's endpoint out of the slice (the pod is gone).
func (s *rolloutSlice) remove(t *testing.T, pod string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.eps, pod)
	s.write(t)
}

func (s *rolloutSlice) write(t *testing.T) {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := suite.cs.DiscoveryV1().EndpointSlices(s.ns).Get(context.Background(), s.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Endpoints = s.object().Endpoints
		_, err = suite.cs.DiscoveryV1().EndpointSlices(s.ns).Update(context.Background(), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Errorf("update EndpointSlice %s: %v", s.name, err)
	}
}

// TestPodReadinessGate: with pod-based load balancing, a pod that declares
// azlb's readiness gate in a namespace that opted in becomes Ready only
// once the service gateway holds its address. The pod's status is written
// as the kubelet writes it (containers ready, Ready False because of the
// gate) and its endpoint as the EndpointSlice controller writes it (not
// ready, not serving): the gateway must register it anyway, or neither
// would ever happen.
func TestPodReadinessGate(t *testing.T) {
	ctx := context.Background()
	cfg := podIPConfig(t)
	createNode(t, "gate-n1", "10.240.5.1", nil)
	startController(t, "a", cfg, false)
	ns := createNamespace(t)
	nsObj, err := suite.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if nsObj.Labels == nil {
		nsObj.Labels = map[string]string{}
	}
	nsObj.Labels[readinessgate.LabelOptIn] = readinessgate.LabelOptInValue
	if _, err := suite.cs.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := suite.cs.CoreV1().Services(ns).Create(ctx, loadBalancerService(ns, "web", 80), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteServiceAndWait(t, ns, "web") })
	podSlice(t, svc, map[string][]string{"gate-n1": {"10.244.5.9"}}) // an older, ready pod
	ingressIP(t, ns, "web")
	uid := names.ServiceUID(svc.UID)
	eventually(t, 30*time.Second, "the ready pod registered", func(context.Context) (bool, error) {
		return slices.Equal(gatewayAddresses(t), []string{"10.240.5.1 10.244.5.9 " + uid}), nil
	})

	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-new", Labels: map[string]string{"app": "web"}},
		Spec: v1.PodSpec{NodeName: "gate-n1", Containers: []v1.Container{{Name: "web", Image: "web"}},
			ReadinessGates: []v1.PodReadinessGate{{ConditionType: readinessgate.ConditionType}}}}
	pod, err = suite.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The kubelet: the containers are ready, the pod is not (its gate).
	now := metav1.Now()
	pod.Status = v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.244.5.10", PodIPs: []v1.PodIP{{IP: "10.244.5.10"}}, Conditions: []v1.PodCondition{
		{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: now},
		{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "ReadinessGatesNotReady", LastTransitionTime: now}}}
	if _, err := suite.cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// The EndpointSlice controller: the new pod's endpoint, not ready.
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-gated", Labels: map[string]string{discoveryv1.LabelServiceName: "web"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "web", UID: svc.UID}}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.5.10"}, NodeName: ptr.To("gate-n1"),
			TargetRef:  &v1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-new", UID: pod.UID},
			Conditions: rolloutConditions("not-ready")}},
	}
	if _, err := suite.cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, es, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var gate *v1.PodCondition
	eventually(t, 60*time.Second, "the readiness gate True", func(ctx context.Context) (bool, error) {
		p, err := suite.cs.CoreV1().Pods(ns).Get(ctx, "web-new", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for i := range p.Status.Conditions {
			if c := p.Status.Conditions[i]; c.Type == readinessgate.ConditionType && c.Status == v1.ConditionTrue {
				gate = &c
			}
		}
		return gate != nil, nil
	})
	took := time.Since(start)
	got := gatewayAddresses(t)
	t.Logf("gate %s after %v (reason %s: %s); gateway: %v", readinessgate.ConditionType, took.Round(time.Millisecond), gate.Reason, gate.Message, got)
	if gate.Reason != readinessgate.ReasonReady {
		t.Errorf("gate reason %q, want %q", gate.Reason, readinessgate.ReasonReady)
	}
	if !slices.Contains(got, "10.240.5.1 10.244.5.10 "+uid) {
		t.Errorf("gate True but the gateway does not hold the new pod: %v", got)
	}
}
