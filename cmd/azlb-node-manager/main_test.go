package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	cloudproviderapi "k8s.io/cloud-provider/api"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/azlb/azlb/internal/imds"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const vmMetadata = `{"compute":{"name":"pool1_1","location":"eastus","zone":"2","platformFaultDomain":"0",
"resourceId":"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/pool1/virtualMachines/1",
"vmSize":"Standard_D2s_v3","osProfile":{"computerName":"aks-pool1-000001"}},
"network":{"interface":[{"ipv4":{"ipAddress":[{"privateIpAddress":"ADDR"}]},"ipv6":{"ipAddress":[]}}]}}`

func uninitialized(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{Taints: []v1.Taint{
		{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule}}}}
}

// The node manager initializes its own node from instance metadata, leaves
// every other node alone, and follows an address change.
func TestInitializesOwnNodeOnly(t *testing.T) {
	var addr, size atomic.Value
	addr.Store("10.0.0.5")
	size.Store("Standard_D2s_v3")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Metadata") != "true" {
			http.Error(w, `{"error":"Bad request. Required metadata header not specified"}`, http.StatusBadRequest)
			return
		}
		body := strings.Replace(vmMetadata, "ADDR", addr.Load().(string), 1)
		_, _ = w.Write([]byte(strings.Replace(body, "Standard_D2s_v3", size.Load().(string), 1)))
	}))
	defer srv.Close()
	cs := fake.NewClientset(uninitialized("aks-pool1-000001"), uninitialized("aks-pool1-000002"))
	cloud := &imds.Cloud{Node: &imds.Instances{NodeName: "aks-pool1-000001", Client: &imds.Client{Endpoint: srv.URL, HTTP: srv.Client()}}}
	clk := clocktesting.NewFakeClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := run(ctx, cs, "aks-pool1-000001", cloud, 100*time.Millisecond, clk); err != nil {
			t.Error(err)
		}
	})
	defer func() { cancel(); wg.Wait() }()

	get := func(name string) *v1.Node {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFor(t, "the node initialized", func() bool { return len(get("aks-pool1-000001").Spec.Taints) == 0 })
	n := get("aks-pool1-000001")
	if n.Spec.ProviderID != "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/pool1/virtualMachines/1" {
		t.Fatalf("providerID %q", n.Spec.ProviderID)
	}
	for k, want := range map[string]string{v1.LabelInstanceTypeStable: "Standard_D2s_v3", v1.LabelTopologyZone: "eastus-2", v1.LabelTopologyRegion: "eastus"} {
		if n.Labels[k] != want {
			t.Errorf("label %s=%q, want %q", k, n.Labels[k], want)
		}
	}
	waitFor(t, "the node's addresses", func() bool { return hasAddress(get("aks-pool1-000001"), "10.0.0.5") })

	addr.Store("10.0.0.9")
	waitFor(t, "the new address", func() bool {
		n := get("aks-pool1-000001")
		return hasAddress(n, "10.0.0.9") && !hasAddress(n, "10.0.0.5")
	})
	// The VM is resized (deallocated, resized, started): its node keeps
	// its name and gets the new instance type.
	size.Store("Standard_D4s_v3")
	waitFor(t, "the new instance-type label", func() bool {
		clk.Step(100 * time.Millisecond) // the label keeper's period
		n := get("aks-pool1-000001")
		return n.Labels[v1.LabelInstanceTypeStable] == "Standard_D4s_v3" && n.Labels[v1.LabelInstanceType] == "Standard_D4s_v3"
	})
	if other := get("aks-pool1-000002"); len(other.Spec.Taints) != 1 || other.Spec.ProviderID != "" {
		t.Fatalf("the other node was touched: %+v", other.Spec)
	}
}

func hasAddress(n *v1.Node, ip string) bool {
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP && a.Address == ip {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func TestStartNeedsANodeName(t *testing.T) {
	if err := start(context.Background(), options{}); err == nil {
		t.Fatal("started without a node name")
	}
	if _, err := imdsHTTPClient("/nonexistent"); err == nil {
		t.Fatal("a missing CA file")
	}
}
