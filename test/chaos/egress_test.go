package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/servicegateway"
)

// podBasedConfig is azure.json's pod-based load balancing (Container Load
// Balancer) for the egress fault mix.
func podBasedConfig() map[string]any {
	return map[string]any{
		"serviceGatewayEnabled":                    true,
		"loadBalancerBackendPoolConfigurationType": "podIP",
		"loadBalancerSku":                          "service",
	}
}

// Egress churn events.
const (
	egCreate   = "create-pod"
	egDelete   = "delete-pod"
	egRelabel  = "relabel-pod"
	egDropAll  = "delete-identity-pods"
	egInvalid  = "invalid-identity"
	egReserved = "reserved-identity"
)

// egressIdentities are the valid identities the churn uses; the invalid
// and reserved ones get only Warning events.
var egressIdentities = []string{"team-0", "team-1", "team-2", "team-3", "team-4"}

const (
	egressInvalidIdentity = "Team.Upper"
	egressNodes           = 3
	egressMaxPods         = 30
	// egressInboundPods back the inbound Service and an egress identity
	// at once; they are relabelled but never deleted during the churn.
	egressInboundPods = 3
)

// egressWorld is the pods of the egress fault mix.
type egressWorld struct {
	ns     string
	rng    *rand.Rand
	next   int
	pods   map[string]string // live pod -> identity label
	counts map[string]int
}

// TestEgressFaultMix: pod-based load balancing with egress identities
// under the fault mix. Pods labelled with five identities (some backing an
// inbound Service too, and a few with an invalid or the reserved identity)
// are created, deleted, relabelled and dropped a whole identity at a time
// while a fifth of the ARM calls fail (GET, PUT, DELETE as in TestFaultMix,
// and the gateway's POSTs); when the faults stop, verify (egress
// included) must come clean within the bound, a restart without change
// must make no ARM write, and once every pod is deleted every pod must be
// released and nothing of an identity left (0 leaked NAT gateways, public
// IPs or outbound services; default-natgw kept).
func TestEgressFaultMix(t *testing.T) {
	for seed := 1; seed <= suite.params.Seeds; seed++ {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) { egressFaultMixSeed(t, uint64(seed)) })
	}
}

func egressFaultMixSeed(t *testing.T, seed uint64) {
	p := suite.params
	ctx := context.Background()
	resetCluster(t)
	if err := suite.env.SeedServiceGateway(ctx); err != nil {
		t.Fatal(err)
	}
	w := &egressWorld{ns: fmt.Sprintf("egress%d", seed), rng: rand.New(rand.NewPCG(seed, 30)), pods: map[string]string{}, counts: map[string]int{}}
	newNamespace(t, w.ns, nil)
	t.Cleanup(func() { w.release(t) })
	for i := range egressNodes {
		createEgressNode(t, i)
	}
	c := newCheckerWith(t, podBasedConfig())
	r := startReplicaWith(t, "eg", false, podBasedConfig())
	var inbound []string
	for range egressInboundPods {
		inbound = append(inbound, w.create(t, egressIdentities[len(inbound)%len(egressIdentities)]))
	}
	createInboundService(t, w.ns, "in-0", inbound)
	for range 6 {
		w.create(t, egressIdentities[w.rng.IntN(len(egressIdentities))])
	}
	initial := c.waitClean(t, 2*time.Minute)

	mix := installFaults(t, p.FaultRate)
	postFaults := installPOSTFaults(t, p.FaultRate)
	churnStart := time.Now()
	events := max(p.Events/2, 40)
	for range events {
		w.step(t, inbound)
		// Pacing of the churn, not synchronisation: 0-100 ms, and a burst
		// (no pause) one time in three.
		if w.rng.IntN(3) > 0 {
			time.Sleep(time.Duration(w.rng.IntN(100)) * time.Millisecond)
		}
	}
	churn := time.Since(churnStart)
	time.Sleep(p.FaultTail) // a fixed span of faults, not synchronisation
	postFired := 0
	for _, f := range suite.env.Emulator().Faults() {
		if slices.Contains(postFaults, f.ID) {
			postFired += f.Fired
			suite.env.Emulator().RemoveFault(f.ID)
		}
	}
	fired := mix.stop()
	fired["post-500-or-429"] = postFired
	stopped := time.Now()
	reads, writes := armCalls(r.userAgent, churnStart)
	targets := armTargets(churnStart, stopped)
	converged := c.waitClean(t, p.Bound)
	identities := w.liveIdentities()

	// A restart without change writes nothing.
	r.Stop(20 * time.Second)
	since := time.Now()
	r.restart(t)
	restartReads, restartWrites := waitStartedQuiet(t, r.userAgent, since)
	if restartWrites != 0 {
		t.Errorf("a restart without change made %d ARM writes, want 0", restartWrites)
	}
	if rep, err := c.check(ctx); err != nil || !rep.Clean() {
		t.Errorf("not clean after the restart: %v %v", err, rep)
	}

	// Every pod leaves (the inbound Service's endpoints first, as the
	// endpoint controller would drop them): all released, nothing left.
	removeStart := time.Now()
	if err := suite.cs.DiscoveryV1().EndpointSlices(w.ns).Delete(ctx, "in-0-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for name := range w.pods {
		w.delete(t, name)
	}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, p.Bound, true, func(ctx context.Context) (bool, error) {
		pods, err := suite.cs.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("pods not released within %v after their deletion: %v", p.Bound, err)
	}
	removed := time.Since(removeStart)
	c.waitClean(t, time.Minute)
	leaked := egressLeaks(t, c)
	if len(leaked) > 0 {
		t.Errorf("left behind after every egress pod was deleted: %v", leaked)
	}
	figure(t, "egress-fault-mix", map[string]any{
		"seed": seed, "events": events, "eventKinds": w.counts, "churnSeconds": churn.Seconds(), "faultTailSeconds": p.FaultTail.Seconds(),
		"identitiesAtEnd": identities, "armCallsDuringChurn": reads + writes, "writesDuringChurn": writes,
		"faultsByKind": fired, "armCallsByTarget": targets, "initialConvergeSeconds": initial.Seconds(),
		"cleanSecondsAfterFaultsStopped": converged.Seconds(), "restartReads": restartReads, "restartWrites": restartWrites,
		"secondsToAllReleased": removed.Seconds(), "leaked": len(leaked),
	})
}

// installPOSTFaults makes a share rate of the gateway's POSTs
// (updateServices, updateAddressLocations; installFaults covers GET, PUT
// and DELETE) fail, half with 500, half with 429 and Retry-After; it
// returns the fault ids.
func installPOSTFaults(t *testing.T, rate float64) []string {
	t.Helper()
	emu := suite.env.Emulator()
	var ids []string
	for i, f := range []emulator.Fault{
		{Method: http.MethodPost, Status: http.StatusInternalServerError, Code: "InternalServerError", Probability: rate / 2},
		{Method: http.MethodPost, Status: http.StatusTooManyRequests, Code: "SubscriptionRequestsThrottled", RetryAfter: "1", Probability: (rate / 2) / (1 - rate/2)},
	} {
		id, err := emu.AddFault(f)
		if err != nil {
			t.Fatalf("POST fault %d: %v", i, err)
		}
		ids = append(ids, id)
	}
	return ids
}

// step makes one churn event.
func (w *egressWorld) step(t *testing.T, inbound []string) {
	t.Helper()
	roll := w.rng.IntN(100)
	switch {
	case roll < 40 && len(w.pods) < egressMaxPods || len(w.pods) <= egressInboundPods:
		id := egressIdentities[w.rng.IntN(len(egressIdentities))]
		switch w.rng.IntN(20) {
		case 0:
			id = names.DefaultOutboundService
			w.counts[egReserved]++
		case 1:
			id = egressInvalidIdentity
			w.counts[egInvalid]++
		}
		w.create(t, id)
		w.counts[egCreate]++
	case roll < 70:
		if name := w.pick(inbound); name != "" {
			w.delete(t, name)
			w.counts[egDelete]++
		}
	case roll < 92:
		name := w.pick(nil)
		if name == "" {
			return
		}
		id := egressIdentities[w.rng.IntN(len(egressIdentities))]
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, servicegateway.EgressLabel, id)
		if _, err := suite.cs.CoreV1().Pods(w.ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		w.pods[name] = id
		w.counts[egRelabel]++
	default:
		id := egressIdentities[w.rng.IntN(len(egressIdentities))]
		for name, l := range w.pods {
			if l == id && !slices.Contains(inbound, name) {
				w.delete(t, name)
			}
		}
		w.counts[egDropAll]++
	}
}

// pick returns a live pod not in except, at random ("" if none).
func (w *egressWorld) pick(except []string) string {
	var names []string
	for n := range w.pods {
		if !slices.Contains(except, n) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	return names[w.rng.IntN(len(names))]
}

// create makes a running pod with the identity label on a node, with its
// IP, as the scheduler and the kubelet would.
func (w *egressWorld) create(t *testing.T, identity string) string {
	t.Helper()
	ctx := context.Background()
	w.next++
	name := fmt.Sprintf("p%d", w.next)
	node := w.next % egressNodes
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name, Labels: map[string]string{servicegateway.EgressLabel: identity, "app": name}},
		Spec:       v1.PodSpec{NodeName: egressNodeName(node), Containers: []v1.Container{{Name: "c", Image: "chaos.invalid/egress"}}},
	}
	created, err := suite.cs.CoreV1().Pods(w.ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ip := egressPodIP(w.next)
	created.Status.Phase = v1.PodRunning
	created.Status.PodIP = ip
	created.Status.PodIPs = []v1.PodIP{{IP: ip}}
	if _, err := suite.cs.CoreV1().Pods(w.ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.pods[name] = identity
	return name
}

func (w *egressWorld) delete(t *testing.T, name string) {
	t.Helper()
	err := suite.cs.CoreV1().Pods(w.ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	delete(w.pods, name)
}

// liveIdentities counts the valid identities with pods.
func (w *egressWorld) liveIdentities() int {
	ids := map[string]bool{}
	for _, id := range w.pods {
		if slices.Contains(egressIdentities, id) {
			ids[id] = true
		}
	}
	return len(ids)
}

// release removes what the scenario left in the cluster (pods held by the
// finalizer when the test failed, the Service, the nodes), so the next
// scenario starts clean.
func (w *egressWorld) release(t *testing.T) {
	ctx := context.Background()
	pods, err := suite.cs.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, p := range pods.Items {
			if len(p.Finalizers) > 0 {
				_, _ = suite.cs.CoreV1().Pods(w.ns).Patch(ctx, p.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			}
			_ = suite.cs.CoreV1().Pods(w.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
	}
	for i := range egressNodes {
		_ = suite.cs.CoreV1().Nodes().Delete(ctx, egressNodeName(i), metav1.DeleteOptions{})
	}
}

func egressNodeName(i int) string { return fmt.Sprintf("egress-n%d", i) }

func egressPodIP(n int) string { return fmt.Sprintf("10.244.%d.%d", n/200, 10+n%200) }

// createEgressNode creates a Ready node with an IPv4 InternalIP.
func createEgressNode(t *testing.T, i int) {
	t.Helper()
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: egressNodeName(i)}}
	n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: fmt.Sprintf("10.240.9.%d", 4+i)}, {Type: v1.NodeHostName, Address: n.Name}}
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := suite.cs.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createInboundService creates a LoadBalancer Service whose ready
// endpoints are the pods (which also egress through their identities).
func createInboundService(t *testing.T, ns, name string, pods []string) {
	t.Helper()
	ctx := context.Background()
	svc, err := suite.cs.CoreV1().Services(ns).Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"inbound": name},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-1",
			Labels:          map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "azlb-chaos"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: name, UID: svc.UID}}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for _, p := range pods {
		pod, err := suite.cs.CoreV1().Pods(ns).Get(ctx, p, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{pod.Status.PodIP}, NodeName: ptr.To(pod.Spec.NodeName),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	if _, err := suite.cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitStartedQuiet waits until a replica started at since has made ARM calls and
// then been quiet for 3 s, and returns its reads and writes.
func waitStartedQuiet(t *testing.T, ua string, since time.Time) (reads, writes int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		last := time.Time{}
		for _, rec := range suite.env.Emulator().Requests() {
			if rec.Kind == "arm" && strings.HasPrefix(rec.UserAgent, ua+" ") && rec.Time.After(since) && rec.Time.After(last) {
				last = rec.Time
			}
		}
		return !last.IsZero() && time.Since(last) > 3*time.Second, nil
	})
	if err != nil {
		t.Fatalf("the restarted replica did not start and go quiet: %v", err)
	}
	return armCalls(ua, since)
}

// egressLeaks lists what is left of egress identities: NAT gateways and
// public IPs with the identity tag, outbound services other than the
// default.
func egressLeaks(t *testing.T, c *checker) []string {
	t.Helper()
	ctx := context.Background()
	var left []string
	nats, err := c.clients.NatGateway.List(ctx, devenv.ResourceGroup)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nats {
		if _, ok := n.Tags[servicegateway.TagEgressIdentity]; ok {
			left = append(left, "NAT gateway "+ptr.Deref(n.Name, ""))
		}
	}
	pips, err := c.clients.PublicIP.List(ctx, devenv.ResourceGroup)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pips {
		if _, ok := p.Tags[servicegateway.TagEgressIdentity]; ok {
			left = append(left, "public IP "+ptr.Deref(p.Name, ""))
		}
	}
	svcs, err := c.clients.ServiceGateway.GetServices(ctx, devenv.ResourceGroup, names.ServiceGateway)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs {
		if s.Properties != nil && s.Properties.ServiceType != nil && strings.EqualFold(string(*s.Properties.ServiceType), "Outbound") && ptr.Deref(s.Name, "") != names.DefaultOutboundService {
			left = append(left, "outbound service "+ptr.Deref(s.Name, ""))
		}
	}
	return left
}
