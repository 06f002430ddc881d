package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// world drives the churn: Services created, changed and deleted, their
// access settings (source ranges, service tags, deny-all, no NSG rule), their
// endpoints, node taints and labels, nodes joining and leaving. Every event
// is one change through the Kubernetes API, chosen by a seeded generator.
// Apart from the access settings, only valid input is generated (bad input
// has its own fuzz targets), so every Service can be served; the access
// events add invalid source ranges (which must fail closed) and, rarely, a
// combination azlb refuses (access_test.go).
type world struct {
	rnd      *rand.Rand
	prefix   string
	ns       []string // namespaces; the last is labelled team=c (lb-3)
	services []svcRef
	nodes    []string
	nextSvc  int
	nextNode int
	// counts by event kind; accessCounts by kind of access change
	counts       map[string]int
	accessCounts map[string]int
}

type svcRef struct{ ns, name string }

const (
	evSvcCreate = "service-create"
	evSvcUpdate = "service-update"
	evSvcDelete = "service-delete"
	evEndpoints = "endpoints"
	evTaint     = "taint"
	evNodeJoin  = "node-join"
	evNodeLeave = "node-leave"
	evNodeLabel = "node-label"
	evAccess    = "access"
)

// newWorld creates the scenario's namespaces; prefix keeps its names apart
// from earlier scenarios' (namespaces are never deleted: the suites run no
// namespace controller).
func newWorld(t interface{ Fatal(...any) }, seed uint64, prefix string) *world {
	w := &world{rnd: rand.New(rand.NewPCG(seed, 0x5eed)), prefix: prefix, counts: map[string]int{}, accessCounts: map[string]int{}}
	ctx := context.Background()
	for i, labels := range []map[string]string{nil, {"team": "b"}, {"team": "c"}} {
		name := fmt.Sprintf("%s-%d", prefix, i)
		l := map[string]string{chaosLabel: "true"}
		for k, v := range labels {
			l[k] = v
		}
		_, err := suite.cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		w.ns = append(w.ns, name)
	}
	return w
}

// populate adds nodes and Services to start from.
func (w *world) populate(ctx context.Context, nodes, services int) error {
	for range nodes {
		if err := w.nodeJoin(ctx); err != nil {
			return err
		}
	}
	for range services {
		if err := w.svcCreate(ctx); err != nil {
			return err
		}
	}
	return nil
}

// step makes one random change and returns its kind.
func (w *world) step(ctx context.Context) (string, error) {
	type choice struct {
		kind   string
		weight int
		ok     bool
		do     func(context.Context) error
	}
	choices := []choice{
		{evSvcCreate, 14, len(w.services) < 40, w.svcCreate},
		{evSvcUpdate, 20, len(w.services) > 0, w.svcUpdate},
		{evAccess, 12, len(w.services) > 0, w.access},
		{evSvcDelete, 9, len(w.services) > 3, w.svcDelete},
		{evEndpoints, 24, len(w.services) > 0 && len(w.nodes) > 0, w.endpoints},
		{evTaint, 13, len(w.nodes) > 0, w.taint},
		{evNodeJoin, 6, len(w.nodes) < 20, w.nodeJoin},
		{evNodeLeave, 5, len(w.nodes) > 4, w.nodeLeave},
		{evNodeLabel, 9, len(w.nodes) > 0, w.nodeLabel},
	}
	total := 0
	for _, c := range choices {
		if c.ok {
			total += c.weight
		}
	}
	n := w.rnd.IntN(total)
	for _, c := range choices {
		if !c.ok {
			continue
		}
		if n < c.weight {
			w.counts[c.kind]++
			return c.kind, c.do(ctx)
		}
		n -= c.weight
	}
	return "", fmt.Errorf("no event chosen")
}

// run makes n changes with short random pauses (0-30 ms); before each, at
// says what to do at that index (a crash, say).
func (w *world) run(ctx context.Context, n int, at func(i int)) error {
	for i := range n {
		if at != nil {
			at(i)
		}
		if _, err := w.step(ctx); err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
		time.Sleep(time.Duration(w.rnd.IntN(30)) * time.Millisecond) // pacing of the churn, not synchronisation
	}
	return nil
}

func (w *world) pick(list []string) string { return list[w.rnd.IntN(len(list))] }

// Services.

var portChoices = []struct {
	port  int32
	proto v1.Protocol
}{{80, v1.ProtocolTCP}, {443, v1.ProtocolTCP}, {8080, v1.ProtocolTCP}, {53, v1.ProtocolUDP}, {9000, v1.ProtocolTCP}, {5000, v1.ProtocolUDP}}

func (w *world) randomPorts() []v1.ServicePort {
	idx := w.rnd.Perm(len(portChoices))[:1+w.rnd.IntN(3)]
	slices.Sort(idx)
	var out []v1.ServicePort
	for _, i := range idx {
		pc := portChoices[i]
		out = append(out, v1.ServicePort{Name: fmt.Sprintf("p%d", pc.port), Port: pc.port, Protocol: pc.proto, TargetPort: intstr.FromInt32(pc.port)})
	}
	return out
}

// eligibleConfigs are the load balancer configurations a Service in the
// namespace may name (lb-3 takes only namespaces labelled team=c).
func (w *world) eligibleConfigs(ns string) []string {
	if ns == w.ns[2] {
		return []string{"kubernetes", "lb-2", "lb-3"}
	}
	return []string{"kubernetes", "lb-2"}
}

// randomAnnotations are valid annotations azlb interprets.
func (w *world) randomAnnotations(ns string) map[string]string {
	a := map[string]string{}
	const p = "service.beta.kubernetes.io/"
	if w.rnd.IntN(100) < 15 {
		a[p+"azure-load-balancer-internal"] = "true"
	}
	if w.rnd.IntN(100) < 25 {
		a[p+"azure-load-balancer-tcp-idle-timeout"] = strconv.Itoa(4 + w.rnd.IntN(27))
	}
	if w.rnd.IntN(100) < 10 {
		a[p+"azure-disable-load-balancer-floating-ip"] = "true"
	}
	if w.rnd.IntN(100) < 10 {
		a[p+"azure-load-balancer-disable-tcp-reset"] = "true"
	}
	if w.rnd.IntN(100) < 15 {
		a[p+"azure-load-balancer-health-probe-interval"] = strconv.Itoa(5 + w.rnd.IntN(16))
		a[p+"azure-load-balancer-health-probe-num-of-probe"] = strconv.Itoa(1 + w.rnd.IntN(4))
	}
	if w.rnd.IntN(100) < 10 {
		a[p+"azure-load-balancer-health-probe-protocol"] = "Http"
		a[p+"azure-load-balancer-health-probe-request-path"] = "/ready"
	}
	if w.rnd.IntN(100) < 20 {
		cfgs := w.eligibleConfigs(ns)
		a[p+"azure-load-balancer-configurations"] = w.pick(cfgs)
	}
	// An internal Service published through a Private Link Service
	// (docs/private-link.md): its PLS writes join the fault mix.
	if a[p+"azure-load-balancer-internal"] == "true" && w.rnd.IntN(100) < 40 {
		a[plsCreate] = "true"
		if w.rnd.IntN(2) == 0 {
			a[p+"azure-pls-visibility"] = "*"
		}
	}
	w.randomAccessAnnotations(a)
	return a
}

// plsCreate asks for a Private Link Service, which only an internal
// Service (or floating IP off) may: a Service made public drops its
// azure-pls-* annotations, to stay valid input.
const plsCreate = "service.beta.kubernetes.io/azure-pls-create"

func dropPrivateLink(a map[string]string) {
	for k := range a {
		if strings.HasPrefix(k, "service.beta.kubernetes.io/azure-pls-") {
			delete(a, k)
		}
	}
}

func (w *world) svcCreate(ctx context.Context) error {
	ns := w.pick(w.ns)
	w.nextSvc++
	name := fmt.Sprintf("s%d", w.nextSvc)
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: w.randomAnnotations(ns), Labels: map[string]string{"app": name}},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name}, Ports: w.randomPorts()},
	}
	if w.nextSvc == 1 {
		// The first Service of every scenario has a Private Link Service.
		svc.Annotations["service.beta.kubernetes.io/azure-load-balancer-internal"] = "true"
		svc.Annotations[plsCreate] = "true"
	}
	if w.rnd.IntN(100) < 35 {
		svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	}
	if w.rnd.IntN(100) < 15 {
		svc.Spec.LoadBalancerSourceRanges = w.randomRanges()
	}
	settleAccess(svc, false)
	if _, err := suite.cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	w.services = append(w.services, svcRef{ns, name})
	return nil
}

func (w *world) svcUpdate(ctx context.Context) error {
	ref := w.services[w.rnd.IntN(len(w.services))]
	what := w.rnd.IntN(5)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		svc, err := suite.cs.CoreV1().Services(ref.ns).Get(ctx, ref.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		switch what {
		case 0:
			svc.Spec.Ports = w.randomPorts()
		case 1:
			if svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal {
				svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
				svc.Spec.HealthCheckNodePort = 0
			} else {
				svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			}
		case 2:
			svc.Annotations = w.randomAnnotations(ref.ns)
		case 3:
			const k = "service.beta.kubernetes.io/azure-load-balancer-internal"
			if svc.Annotations[k] == "true" {
				delete(svc.Annotations, k)
				dropPrivateLink(svc.Annotations)
			} else {
				if svc.Annotations == nil {
					svc.Annotations = map[string]string{}
				}
				svc.Annotations[k] = "true"
			}
		default:
			svc.Labels["rev"] = strconv.Itoa(w.rnd.IntN(1000))
		}
		settleAccess(svc, false)
		_, err = suite.cs.CoreV1().Services(ref.ns).Update(ctx, svc, metav1.UpdateOptions{})
		return err
	})
}

func (w *world) svcDelete(ctx context.Context) error {
	i := w.rnd.IntN(len(w.services))
	ref := w.services[i]
	w.services = slices.Delete(w.services, i, i+1)
	err := suite.cs.CoreV1().Services(ref.ns).Delete(ctx, ref.name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	err = suite.cs.DiscoveryV1().EndpointSlices(ref.ns).Delete(ctx, ref.name+"-chaos", metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// endpoints gives a Service's EndpointSlice endpoints on 0-4 random nodes,
// most ready, some with ready unset, some not ready.
func (w *world) endpoints(ctx context.Context) error {
	ref := w.services[w.rnd.IntN(len(w.services))]
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ref.ns, Name: ref.name + "-chaos", Labels: map[string]string{discoveryv1.LabelServiceName: ref.name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: ptr.To[int32](80)}},
	}
	for i, idx := range w.rnd.Perm(len(w.nodes))[:min(len(w.nodes), w.rnd.IntN(5))] {
		ep := discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.244.%d.%d", w.rnd.IntN(200), 10+i)}, NodeName: ptr.To(w.nodes[idx])}
		switch r := w.rnd.IntN(10); {
		case r < 7:
			ep.Conditions.Ready = ptr.To(true)
		case r < 9:
		default:
			ep.Conditions.Ready = ptr.To(false)
		}
		slice.Endpoints = append(slice.Endpoints, ep)
	}
	slices := suite.cs.DiscoveryV1().EndpointSlices(ref.ns)
	cur, err := slices.Get(ctx, slice.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = slices.Create(ctx, slice, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	slice.ResourceVersion = cur.ResourceVersion
	_, err = slices.Update(ctx, slice, metav1.UpdateOptions{})
	return err
}

// Nodes.

var taintChoices = []v1.Taint{
	{Key: "node.kubernetes.io/out-of-service", Value: "nodeshutdown", Effect: v1.TaintEffectNoExecute},
	{Key: "node.cloudprovider.kubernetes.io/shutdown", Effect: v1.TaintEffectNoSchedule},
	{Key: "cloudprovider.azure.microsoft.com/draining", Value: "spot-eviction", Effect: v1.TaintEffectNoSchedule},
	{Key: "cloudprovider.azure.microsoft.com/draining", Value: "maintenance", Effect: v1.TaintEffectNoSchedule},
	{Key: "example.com/dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule},
	{Key: "ToBeDeletedByClusterAutoscaler", Value: "1", Effect: v1.TaintEffectNoSchedule},
}

// taint adds or removes one of the taints on a node (ToBeDeleted less
// often: it makes the node leave the pools at the next node sync).
func (w *world) taint(ctx context.Context) error {
	node := w.pick(w.nodes)
	tt := taintChoices[w.rnd.IntN(len(taintChoices)-1)]
	if w.rnd.IntN(10) == 0 {
		tt = taintChoices[len(taintChoices)-1]
	}
	return w.updateNode(ctx, node, func(n *v1.Node) {
		for i, x := range n.Spec.Taints {
			if x.Key == tt.Key {
				n.Spec.Taints = slices.Delete(n.Spec.Taints, i, i+1)
				if x.Value == tt.Value {
					return // removed
				}
				break
			}
		}
		n.Spec.Taints = append(n.Spec.Taints, tt)
	})
}

func (w *world) nodeJoin(ctx context.Context) error {
	w.nextNode++
	i := w.nextNode
	name := fmt.Sprintf("%s-n%d", w.prefix, i)
	labels := map[string]string{"kubernetes.io/hostname": name}
	switch r := w.rnd.IntN(100); {
	case r < 30:
		labels["pool"] = "two"
	case r < 45:
		labels["kubernetes.azure.com/agentpool"] = "pool3"
	case r < 52:
		labels["node.kubernetes.io/exclude-from-external-load-balancers"] = "true"
	case r < 56:
		labels["node-role.kubernetes.io/control-plane"] = ""
	}
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: fmt.Sprintf("10.240.%d.%d", 1+i/200, 10+i%200)}, {Type: v1.NodeHostName, Address: name}}
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := suite.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		return err
	}
	w.nodes = append(w.nodes, name)
	return nil
}

func (w *world) nodeLeave(ctx context.Context) error {
	i := w.rnd.IntN(len(w.nodes))
	name := w.nodes[i]
	w.nodes = slices.Delete(w.nodes, i, i+1)
	err := suite.cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// nodeLabel toggles one of the labels that decide where a node's backends
// go: the exclusion label, lb-2's node selector (pool=two), lb-3's agent
// pool (pool3) or the control-plane role. The exclusion label is acted on by
// the service controller's node sync; the others by the node-label
// controller (internal/nodelabels).
func (w *world) nodeLabel(ctx context.Context) error {
	node := w.pick(w.nodes)
	kv := [...][2]string{
		{"node.kubernetes.io/exclude-from-external-load-balancers", "true"},
		{"pool", "two"},
		{"kubernetes.azure.com/agentpool", "pool3"},
		{"node-role.kubernetes.io/control-plane", ""},
	}[w.rnd.IntN(4)]
	key, value := kv[0], kv[1]
	return w.updateNode(ctx, node, func(n *v1.Node) {
		if _, ok := n.Labels[key]; ok {
			delete(n.Labels, key)
		} else {
			n.Labels[key] = value
		}
	})
}

func (w *world) updateNode(ctx context.Context, name string, edit func(*v1.Node)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := suite.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		edit(n)
		_, err = suite.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}
