package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/readinessgate"
	"github.com/azlb/azlb/internal/testutil"
)

// podRolloutPort is the pods' port (the Service's targetPort).
const podRolloutPort = 8080

// podReadinessLead is how long before it exits a readiness-first pod fails
// its readiness probe: its address must leave the gateway meanwhile (the
// API's and the gateway's latency, which is not scaled down; a preStop
// sleep of a few seconds gives a real pod the same).
const podReadinessLead = 2 * time.Second

// TestPodBasedRollingUpdate is a rolling update of a 3-replica pod-based
// Service end to end: the real controller with pod-based load balancing,
// a real API server, the emulator's data plane carrying 200 new
// connections per second through the Service's load balancer to the pod
// addresses the service gateway holds (loopback addresses, each answered
// by its pod's server).
//
// The namespace opts in to azlb's readiness gate and the pods declare it.
// The rollout (maxSurge 1, maxUnavailable 0) is played as the kubelet and
// the EndpointSlice controller write it: for each old pod a_i a new pod b_i
// starts (containers ready, not Ready: its gate), becomes Ready once the
// gate is True, and then a_i terminates: it serves for 5 s (its endpoint
// serving and terminating), then exits and leaves the slice. Three
// sessions (keep-alive connections, a request every 100 ms) to each old pod
// close before its address leaves the gateway: the emulator applies no
// drain period to a pool the gateway fills (Azure does not document that
// it does), so flows a pod has then are reset. Two ways for the old pod to
// end:
//
//   - readiness-first: it fails its readiness probe podReadinessLead before
//     it exits (serving false), as docs/admin-state.md advises.
//   - exits-while-serving: its endpoint says serving until it is gone.
//
// Wanted in both: no session reset, and no new connection failing except
// around an old pod's removal (in flight to it then, or sent to it between
// its exit and its address leaving the gateway); those are reported.
func TestPodBasedRollingUpdate(t *testing.T) {
	for _, sc := range []struct {
		name           string
		readinessFirst bool
	}{{"readiness-first", true}, {"exits-while-serving", false}} {
		t.Run(sc.name, func(t *testing.T) { podRollout(t, sc.readinessFirst) })
	}
}

func podRollout(t *testing.T, readinessFirst bool) {
	ctx := context.Background()
	public, nodeNet, podNet := testutil.LoopbackNet(t), testutil.LoopbackNet(t), testutil.LoopbackNet(t)
	// The API server refuses loopback endpoint addresses: pods have
	// addresses of a pod network, which the data plane reaches on podNet.
	podCIDR := netip.MustParsePrefix("10.244.77.0/24")
	env, err := devenv.Start(ctx, t.TempDir(), emulator.Options{DataPlane: true, PublicIPv4CIDR: public.String(),
		PodLoopback: emulator.PrefixMap{From: podCIDR, To: podNet}},
		nil, devenv.WithNetwork(devenv.NodeNetwork(nodeNet)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() }) // after the controller stops
	notThrottled(t, env)
	if err := env.SeedServiceGateway(ctx); err != nil {
		t.Fatal(err)
	}
	allowPodPort(t, env)
	nodes := []string{"podroll-n1", "podroll-n2", "podroll-n3"}
	for i, n := range nodes {
		createNode(t, n, testutil.Nth(nodeNet, i+1).String(), nil)
	}
	startController(t, "a", writeConfigFor(t, env, map[string]any{
		"serviceGatewayEnabled":                    true,
		"loadBalancerBackendPoolConfigurationType": "podIP",
		"loadBalancerSku":                          "service",
	}), false)
	ns := createNamespace(t)
	optInReadinessGate(t, ns)

	// Pod i's address is podCIDR.i (a1-a3 are 1-3, b1-b3 4-6); its server
	// listens on podNet.i.
	podIndex := func(pod string) int {
		i := int(pod[1] - '0')
		if pod[0] == 'b' {
			i += 3
		}
		return i
	}
	podAddr := func(pod string) string { return testutil.Nth(podCIDR, podIndex(pod)).String() }
	servers := map[string]*testutil.Backend{}
	serve := func(pod string) {
		servers[pod] = testutil.StartBackend(t, pod, netip.AddrPortFrom(testutil.Nth(podNet, podIndex(pod)), podRolloutPort))
	}
	pods := &rolloutPods{t: t, ns: ns}
	es := &rolloutSlice{ns: ns, name: "web-1", svc: "web", addr: podAddr}
	for i, n := range nodes {
		a := fmt.Sprintf("a%d", i+1)
		serve(a)
		pods.create(a, n, podAddr(a), true)
		es.add(a, n, "ready")
	}
	svc := loadBalancerService(ns, "web", int32(testutil.FreePort(t, testutil.Nth(public, 1))))
	svc.Spec.Ports[0].TargetPort = intstr.FromInt32(podRolloutPort)
	created, err := suite.cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteServiceAndWait(t, ns, "web") })
	es.create(t)
	frontend := netip.AddrPortFrom(netip.MustParseAddr(ingressIP(t, ns, "web")), uint16(created.Spec.Ports[0].Port))
	eventually(t, 30*time.Second, "a1, a2 and a3 eligible in the data plane", func(context.Context) (bool, error) {
		st, _ := env.Emulator().DataPlaneStatus()
		for _, r := range st.Rules {
			if r.Frontend == frontend.String() {
				n := 0
				for _, m := range r.Members {
					if m.Eligible {
						n++
					}
				}
				return n == 3, nil
			}
		}
		return false, nil
	})

	old := map[string]*sessions{}
	for _, a := range []string{"a1", "a2", "a3"} {
		old[a] = openSessions(t, frontend, a, 3)
	}
	var gateWaits []time.Duration
	var removedMu sync.Mutex
	var removed []time.Time // when an old pod's address was taken out (its readiness failed, or it exited)
	removal := func() {
		removedMu.Lock()
		defer removedMu.Unlock()
		removed = append(removed, time.Now())
	}
	sessionEnd := rolloutSessionEnd
	if readinessFirst {
		// Before its address leaves: the flows a pod has then are reset
		// (the emulator applies no drain period to a pool the gateway
		// fills).
		sessionEnd = rolloutGrace - podReadinessLead - 500*time.Millisecond
	}
	rep, resets, took := playRollout(t, "pod-rolling-update", frontend, "a3", 60*time.Second, old, len(nodes), func(i int, p *rolloutPlay) {
		node := []string{nodes[1], nodes[2], nodes[0]}[i]
		b, a := fmt.Sprintf("b%d", i+1), fmt.Sprintf("a%d", i+1)
		serve(b) // the kubelet starts its container
		pods.create(b, node, podAddr(b), false)
		es.set(t, b, node, "not-ready")
		gateWaits = append(gateWaits, pods.waitGate(b)) // the rollout waits for the new pod to be Ready
		pods.setReady(b)
		es.set(t, b, node, "ready")
		es.set(t, a, nodes[i], "serving-terminating")
		p.endSessions(old[a], sessionEnd)
		srv := servers[a]
		p.later(func() {
			if readinessFirst {
				time.Sleep(rolloutGrace - podReadinessLead) // the schedule: the pod stops accepting
				removal()
				es.set(t, a, nodes[i], "terminating")
				time.Sleep(podReadinessLead) // the schedule: it exits
			} else {
				time.Sleep(rolloutGrace) // the schedule: it exits
				removal()
			}
			srv.Stop()
			es.remove(t, a)
		})
	})
	served := map[string]int{}
	for _, r := range rep.Results {
		if !r.Start.Before(rep.Event) && r.Err == nil {
			served[r.Node]++
		}
	}
	t.Logf("pod-based rolling update: %d new connections from its start on, %d failed; %d of 9 sessions reset; "+
		"the rollout took %v; readiness gate waits %v; new connections served by pod: %v",
		rep.Sent, rep.Failed, resets, took.Round(time.Millisecond), gateWaits, served)
	for _, r := range rep.Results {
		if r.Err != nil && !r.Start.Before(rep.Event) {
			t.Logf("failed new connection %v after the start: %v", r.Start.Sub(rep.Event).Round(time.Millisecond), r.Err)
		}
	}
	t.Logf("timeline of a3, the last old pod (100 ms per character; # a3, x failed, . other pods, | start):\n%s",
		rep.Timeline("a3", 100*time.Millisecond))
	if resets != 0 {
		t.Errorf("the rolling update reset %d sessions; want 0", resets)
	}
	// A new connection may fail only around the moment an old pod's address
	// is taken out: one in flight to it then is reset, and one sent to a pod
	// that exited before its address left fails. Anywhere else is a defect.
	removedMu.Lock()
	defer removedMu.Unlock()
	for _, r := range rep.Results {
		if r.Err == nil || r.Start.Before(rep.Event) {
			continue
		}
		if !slices.ContainsFunc(removed, func(at time.Time) bool {
			return r.Start.After(at.Add(-time.Second)) && r.Start.Before(at.Add(2*time.Second))
		}) {
			t.Errorf("new connection %v after the start failed away from any old pod's removal: %v", r.Start.Sub(rep.Event).Round(time.Millisecond), r.Err)
		}
	}
	for _, b := range []string{"b1", "b2", "b3"} {
		if served[b] == 0 {
			t.Errorf("new pod %s served no new connection: the data plane did not carry traffic to it", b)
		}
	}
}

// allowPodPort adds the operator's rule that lets clients reach the pods'
// port through the nodes' subnet security group: azlb writes no security
// rules for pod-based Services (container-load-balancer.md).
func allowPodPort(t *testing.T, env *devenv.Env) {
	t.Helper()
	ctx := context.Background()
	cl, err := env.Clients(ctx, azure.ClientOptions{Source: "e2e-operator"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	sg, err := cl.SecurityGroup.Get(ctx, devenv.ResourceGroup, devenv.SecurityGroupName)
	if err != nil {
		t.Fatal(err)
	}
	if sg.Properties == nil {
		sg.Properties = &armnetwork.SecurityGroupPropertiesFormat{}
	}
	sg.Properties.SecurityRules = append(sg.Properties.SecurityRules, &armnetwork.SecurityRule{Name: to.Ptr("allow-pods-8080"),
		Properties: &armnetwork.SecurityRulePropertiesFormat{Priority: to.Ptr[int32](4000), Access: to.Ptr(armnetwork.SecurityRuleAccessAllow),
			Direction: to.Ptr(armnetwork.SecurityRuleDirectionInbound), Protocol: to.Ptr(armnetwork.SecurityRuleProtocolTCP),
			SourceAddressPrefix: to.Ptr("*"), SourcePortRange: to.Ptr("*"), DestinationAddressPrefix: to.Ptr("*"),
			DestinationPortRange: to.Ptr(fmt.Sprint(podRolloutPort))}})
	if _, err := cl.SecurityGroup.CreateOrUpdate(ctx, devenv.ResourceGroup, devenv.SecurityGroupName, *sg, ptr.Deref(sg.Etag, "")); err != nil {
		t.Fatal(err)
	}
}

// optInReadinessGate labels the namespace so that azlb's readiness gate
// applies to its pods.
func optInReadinessGate(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	obj, err := suite.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	obj.Labels[readinessgate.LabelOptIn] = readinessgate.LabelOptInValue
	if _, err := suite.cs.CoreV1().Namespaces().Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// rolloutPods writes the rollout's pods as the API server and the kubelet
// would: every pod declares azlb's readiness gate.
type rolloutPods struct {
	t  *testing.T
	ns string
}

// create creates the pod on node with its address; ready: Ready with the
// gate True (an old pod), else only its containers ready (a new pod held by
// the gate).
func (p *rolloutPods) create(name, node, addr string, ready bool) {
	ctx := context.Background()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: name, Labels: map[string]string{"app": "web"}},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "web", Image: "web"}},
			ReadinessGates: []v1.PodReadinessGate{{ConditionType: readinessgate.ConditionType}}}}
	pod, err := suite.cs.CoreV1().Pods(p.ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		p.t.Errorf("create pod %s: %v", name, err)
		return
	}
	now := metav1.Now()
	pod.Status = v1.PodStatus{Phase: v1.PodRunning, PodIP: addr, PodIPs: []v1.PodIP{{IP: addr}}, Conditions: []v1.PodCondition{
		{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: now},
		{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "ReadinessGatesNotReady", LastTransitionTime: now}}}
	if ready {
		pod.Status.Conditions[1] = v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: now}
		pod.Status.Conditions = append(pod.Status.Conditions, v1.PodCondition{Type: readinessgate.ConditionType, Status: v1.ConditionTrue,
			Reason: readinessgate.ReasonReady, LastTransitionTime: now})
	}
	if _, err := suite.cs.CoreV1().Pods(p.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		p.t.Errorf("pod %s status: %v", name, err)
	}
}

// waitGate waits for azlb's gate to turn True on the pod and returns how
// long that took (it may run outside the test's goroutine).
func (p *rolloutPods) waitGate(name string) time.Duration {
	start := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		pod, err := suite.cs.CoreV1().Pods(p.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(pod.Status.Conditions, func(c v1.PodCondition) bool {
			return c.Type == readinessgate.ConditionType && c.Status == v1.ConditionTrue
		}), nil
	})
	if err != nil {
		p.t.Errorf("the readiness gate of %s: %v", name, err)
	}
	return time.Since(start).Round(time.Millisecond)
}

// setReady marks the pod Ready, as the kubelet does once every gate is True.
func (p *rolloutPods) setReady(name string) {
	ctx := context.Background()
	pod, err := suite.cs.CoreV1().Pods(p.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		p.t.Errorf("pod %s: %v", name, err)
		return
	}
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == v1.PodReady {
			pod.Status.Conditions[i] = v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.Now()}
		}
	}
	if _, err := suite.cs.CoreV1().Pods(p.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		p.t.Errorf("pod %s Ready: %v", name, err)
	}
}
