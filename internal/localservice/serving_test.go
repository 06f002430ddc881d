package localservice

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azlb/azlb/internal/backendpool"
)

// ep is an endpoint on a node in one of the states a pod goes through.
type ep struct {
	node  string
	state string // "ready", "serving-terminating", "terminating" (not serving), "not-ready"
}

func conditionsOf(state string) discoveryv1.EndpointConditions {
	switch state {
	case "ready":
		return discoveryv1.EndpointConditions{Ready: to.Ptr(true), Serving: to.Ptr(true), Terminating: to.Ptr(false)}
	case "serving-terminating":
		return discoveryv1.EndpointConditions{Ready: to.Ptr(false), Serving: to.Ptr(true), Terminating: to.Ptr(true)}
	case "terminating":
		return discoveryv1.EndpointConditions{Ready: to.Ptr(false), Serving: to.Ptr(false), Terminating: to.Ptr(true)}
	case "not-ready":
		return discoveryv1.EndpointConditions{Ready: to.Ptr(false), Serving: to.Ptr(false), Terminating: to.Ptr(false)}
	}
	panic("unknown endpoint state " + state)
}

func sliceOfEndpoints(eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4}
	for i, e := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.244.0.%d", i+1)},
			NodeName: to.Ptr(e.node), Conditions: conditionsOf(e.state)})
	}
	return s
}

// The rule itself (which endpoint counts, draining, the admin state off)
// is tested in internal/backendpool (TestLocalEndpoints*, TestLocalMembers).

// setConditions writes the Service's one EndpointSlice with the endpoints
// in the given states and waits until the lister shows it and a change is
// queued.
func (h *harness) setConditions(ns, name string, eps ...ep) {
	h.t.Helper()
	es := sliceOfEndpoints(eps...)
	es.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: name + "-slice", Labels: map[string]string{discoveryv1.LabelServiceName: name}}
	slices := h.kube.DiscoveryV1().EndpointSlices(ns)
	if cur, err := slices.Get(h.ctx, es.Name, metav1.GetOptions{}); err == nil {
		es.ResourceVersion = cur.ResourceVersion
		if _, err := slices.Update(h.ctx, es, metav1.UpdateOptions{}); err != nil {
			h.t.Fatalf("update slice: %v", err)
		}
	} else if _, err := slices.Create(h.ctx, es, metav1.CreateOptions{}); err != nil {
		h.t.Fatalf("create slice: %v", err)
	}
	want := backendpool.LocalEndpointsOf([]*discoveryv1.EndpointSlice{es})
	key := ns + "/" + name
	h.eventually(fmt.Sprintf("queued %s = %v", key, eps), func() bool {
		st := h.queued(key, webPool)
		got, err := backendpool.ServiceEndpoints(h.u.slices, ns, name)
		return st != nil && st.pending && err == nil && got.Members.Equal(want.Members) && got.Draining.Equal(want.Draining)
	})
}

// expectEntries asserts the pool's entries as name/adminState.
func (h *harness) expectEntries(pool string, want ...string) {
	h.t.Helper()
	var got []string
	for _, e := range h.poolEntries(pool) { // name=ip/state
		name, rest, _ := strings.Cut(e, "=")
		_, state, _ := strings.Cut(rest, "/")
		got = append(got, name+"/"+state)
	}
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		h.t.Fatalf("pool %s entries = %v, want %v", pool, got, want)
	}
}

// A rolling update, one pod per node (KEP-1672): the node whose pod is
// terminating but still serving stays in the pool Down (its established
// flows go on, new flows go elsewhere) and leaves only when its endpoint is
// gone; when no endpoint of the Service is ready, the serving-terminating
// ones stay None and take traffic.
func TestPoolKeepsServingTerminatingNodesDown(t *testing.T) {
	h, _ := webHarness(t, harnessOptions{})
	h.process()
	h.expectEntries(webPool, "n1/None", "n2/None")

	// n2's pod starts terminating; n1 and (new) n3 are ready.
	h.setConditions("default", "web", ep{"n1", "ready"}, ep{"n2", "serving-terminating"}, ep{"n3", "ready"})
	h.tick(testInterval)
	h.expectEntries(webPool, "n1/None", "n2/Down", "n3/None")

	// It is gone: n2 leaves.
	h.setConditions("default", "web", ep{"n1", "ready"}, ep{"n3", "ready"})
	h.tick(testInterval)
	h.expectEntries(webPool, "n1/None", "n3/None")

	// Every endpoint terminating (a Recreate rollout, a scale to zero):
	// they still take traffic.
	h.setConditions("default", "web", ep{"n1", "serving-terminating"}, ep{"n3", "serving-terminating"})
	h.tick(testInterval)
	h.expectEntries(webPool, "n1/None", "n3/None")

	// A ready one appears on n2: the terminating nodes go Down.
	h.setConditions("default", "web", ep{"n1", "serving-terminating"}, ep{"n2", "ready"}, ep{"n3", "terminating"})
	h.tick(testInterval)
	h.expectEntries(webPool, "n1/Down", "n2/None")
}
