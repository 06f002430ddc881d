package devenv

import (
	"context"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/emulator"
)

// The Basic cluster as an earlier cloud provider left it: Basic load
// balancers whose NIC-based pools hold every VM of the scale set, Basic
// public IPs (a Dynamic one has its address while the frontend uses it),
// the Services' status holding those addresses.
func TestSeedBasicCluster(t *testing.T) {
	ctx := context.Background()
	env, err := Start(ctx, t.TempDir(), emulator.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	cs := fake.NewClientset()
	got, err := env.SeedBasicCluster(ctx, cs, BasicOptions{Namespace: "demo", Nodes: 2, Services: []BasicService{
		{Name: "web", Port: 80, Dynamic: true},
		{Name: "api", Port: 8080},
		{Name: "ilb", Port: 443, Internal: true},
		{Name: "byo", Port: 81, UserPIP: "my-ip"},
		{Name: "byaddr", Port: 82, UserPIP: "my-other-ip", ByAddress: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Nodes) != 2 || len(got.IPs) != 5 {
		t.Fatalf("nodes %v ips %v", got.Nodes, got.IPs)
	}
	clients, err := env.Clients(ctx, azure.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer clients.Close()
	for _, name := range []string{"kubernetes", "kubernetes-internal"} {
		lb, err := clients.LoadBalancer.Get(ctx, ResourceGroup, name)
		if err != nil {
			t.Fatal(err)
		}
		if *lb.SKU.Name != armnetwork.LoadBalancerSKUNameBasic || len(lb.Properties.BackendAddressPools[0].Properties.BackendIPConfigurations) != 2 {
			t.Fatalf("%s: sku %s, pool %+v", name, *lb.SKU.Name, lb.Properties.BackendAddressPools[0].Properties)
		}
	}
	for svc, pipName := range got.PublicIPs {
		pip, err := clients.PublicIP.Get(ctx, ResourceGroup, pipName)
		if err != nil {
			t.Fatal(err)
		}
		if *pip.SKU.Name != armnetwork.PublicIPAddressSKUNameBasic || ptr.Deref(pip.Properties.IPAddress, "") != got.IPs[svc] || pip.Properties.IPConfiguration == nil {
			t.Fatalf("public IP of %s: %+v %+v, want Basic, associated, %s", svc, pip.SKU, pip.Properties, got.IPs[svc])
		}
		wantAlloc := armnetwork.IPAllocationMethodStatic
		if svc == "web" {
			wantAlloc = armnetwork.IPAllocationMethodDynamic
		}
		if *pip.Properties.PublicIPAllocationMethod != wantAlloc {
			t.Fatalf("public IP of %s is %s", svc, *pip.Properties.PublicIPAllocationMethod)
		}
	}
	for name, ip := range got.IPs {
		svc, err := cs.CoreV1().Services("demo").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(svc.Status.LoadBalancer.Ingress) != 1 || svc.Status.LoadBalancer.Ingress[0].IP != ip {
			t.Fatalf("status of %s: %+v, want %s", name, svc.Status.LoadBalancer, ip)
		}
	}
	if svc, _ := cs.CoreV1().Services("demo").Get(ctx, "byaddr", metav1.GetOptions{}); svc.Spec.LoadBalancerIP != got.IPs["byaddr"] {
		t.Fatalf("byaddr asks for %q, want %s", svc.Spec.LoadBalancerIP, got.IPs["byaddr"])
	}
}
