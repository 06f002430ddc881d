package verify

import (
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/testutil"
)

// localDrainFixture is the multiple-SLB fixture with web Local: its
// dedicated pool default.web holds the entries, and its one EndpointSlice
// the endpoints (node -> "ready", "serving-terminating", or "terminating"
// with serving unset).
func localDrainFixture(eps map[string]string, entries ...*armnetwork.LoadBalancerBackendAddress) *Snapshot {
	s := multiFixture()
	testutil.Local(s.Services[0])
	lb := lbOf(s)
	lb.LoadBalancingRules[0].Properties.BackendAddressPool.ID = ptr.To(lbID + "/backendAddressPools/default.web")
	healthCheckProbe(s)
	lb.BackendAddressPools = append(lb.BackendAddressPools, &armnetwork.BackendAddressPool{Name: ptr.To("default.web"),
		Properties: &armnetwork.BackendAddressPoolPropertiesFormat{LoadBalancerBackendAddresses: entries}})
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for _, node := range []string{"n1", "n2"} {
		var c discoveryv1.EndpointConditions
		switch eps[node] {
		case "":
			continue
		case "ready":
			c = discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}
		case "serving-terminating":
			c = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
		case "terminating":
			c = discoveryv1.EndpointConditions{Ready: ptr.To(false), Terminating: ptr.To(true)}
		}
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.0.1"}, NodeName: ptr.To(node), Conditions: c})
	}
	s.Slices = []*discoveryv1.EndpointSlice{slice}
	return s
}

// A Local Service's node whose endpoints all terminate but serve stays in
// its pool Down while another node is ready (admin-state.md, Rolling
// updates): verify accepts exactly that, and reports it otherwise.
func TestLocalPoolDrainingNode(t *testing.T) {
	draining := map[string]string{"n1": "ready", "n2": "serving-terminating"}
	noneReady := map[string]string{"n1": "serving-terminating", "n2": "serving-terminating"}
	for _, tc := range []struct {
		name    string
		eps     map[string]string
		entries []*armnetwork.LoadBalancerBackendAddress
		off     bool   // enableLoadBalancerAdminState: false
		want    string // "" = clean
	}{
		{name: "draining node Down: clean", eps: draining,
			entries: []*armnetwork.LoadBalancerBackendAddress{entry("n1", "10.0.0.1", "None"), entry("n2", "10.0.0.2", "Down")}},
		{name: "draining node None: reported", eps: draining,
			entries: []*armnetwork.LoadBalancerBackendAddress{entry("n1", "10.0.0.1", "None"), entry("n2", "10.0.0.2", "None")},
			want:    "pool kubernetes/default.web: entry n2 has adminState None, want Down (the node's endpoints of the Service are all terminating but serving"},
		{name: "draining node gone early: reported", eps: draining,
			entries: []*armnetwork.LoadBalancerBackendAddress{entry("n1", "10.0.0.1", "None")},
			want:    "pool kubernetes/default.web: lacks node n2"},
		{name: "no ready endpoint: serving-terminating nodes None, clean", eps: noneReady,
			entries: []*armnetwork.LoadBalancerBackendAddress{entry("n1", "10.0.0.1", "None"), entry("n2", "10.0.0.2", "None")}},
		{name: "no ready endpoint: a Down entry is reported", eps: noneReady,
			entries: []*armnetwork.LoadBalancerBackendAddress{entry("n1", "10.0.0.1", "None"), entry("n2", "10.0.0.2", "Down")},
			want:    "entry n2 (node n2) has adminState Down, want None"},
		{name: "terminating with serving unset is not serving: its node does not belong",
			eps:     map[string]string{"n1": "ready", "n2": "terminating"},
			entries: []*armnetwork.LoadBalancerBackendAddress{entry("n1", "10.0.0.1", "None"), entry("n2", "10.0.0.2", "Down")},
			want:    "pool kubernetes/default.web: holds node n2, which does not belong"},
		{name: "admin state off: the draining node has left, clean", eps: draining, off: true,
			entries: []*armnetwork.LoadBalancerBackendAddress{entry("n1", "10.0.0.1", "None")}},
		{name: "admin state off: a draining node kept is reported", eps: draining, off: true,
			entries: []*armnetwork.LoadBalancerBackendAddress{entry("n1", "10.0.0.1", "None"), entry("n2", "10.0.0.2", "None")},
			want:    "pool kubernetes/default.web: holds node n2, which does not belong"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := localDrainFixture(tc.eps, tc.entries...)
			if tc.off {
				s.Config.EnableLoadBalancerAdminState = ptr.To(false)
			}
			r := Check(s)
			got := findings(r)
			switch {
			case tc.want == "" && !r.Clean():
				t.Fatalf("want clean, got:\n%s", got)
			case tc.want != "" && (len(r.Findings) != 1 || !strings.Contains(got, tc.want)):
				t.Fatalf("want one finding %q, got:\n%s", tc.want, got)
			}
		})
	}
}
