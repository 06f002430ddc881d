package e2e

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/names"
)

// TestPublicIPPrefixChange: through the controller binary, a Service's
// azure-pip-prefix-id moves from one prefix to another; its public IP is
// replaced by one from the new prefix (PublicIPReplaced), the status
// follows, and exactly one public IP of the Service is left, which goes
// with the Service (issue 40 item 4).
func TestPublicIPPrefixChange(t *testing.T) {
	ctx := context.Background()
	createNode(t, "pfx-n1", "10.240.9.1", nil)
	startController(t, "a", writeConfig(t, nil), false)
	ns := createNamespace(t)
	first, firstBlock := putPublicIPPrefix(t, "pfx-first")
	second, secondBlock := putPublicIPPrefix(t, "pfx-second")

	svc := loadBalancerService(ns, "web", 80)
	svc.Annotations = map[string]string{annotations.KeyPIPPrefixID: first}
	if _, err := suite.cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old := ingressIP(t, ns, "web")
	if !firstBlock.Contains(netip.MustParseAddr(old)) {
		t.Fatalf("address %s is not from the first prefix %s", old, firstBlock)
	}

	cur, err := suite.cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Annotations[annotations.KeyPIPPrefixID] = second
	if _, err := suite.cs.CoreV1().Services(ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var now string
	eventually(t, 60*time.Second, "an address from the second prefix", func(ctx context.Context) (bool, error) {
		s, err := suite.cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return false, err
		}
		now = s.Status.LoadBalancer.Ingress[0].IP
		return secondBlock.Contains(netip.MustParseAddr(now)), nil
	})
	eventually(t, 30*time.Second, "event PublicIPReplaced", serviceEvent(ns, "web", "PublicIPReplaced", now))
	owned := servicePublicIPs(t, ns+"/web")
	if len(owned) != 1 || owned[0] != now {
		t.Fatalf("public IPs of the Service: %v, want exactly [%s]", owned, now)
	}
	deleteServiceAndWait(t, ns, "web")
	if left := servicePublicIPs(t, ns+"/web"); len(left) != 0 {
		t.Fatalf("public IPs left after the Service was deleted: %v", left)
	}
}

// putPublicIPPrefix creates a /30 public IPv4 prefix in the emulator and
// returns its id and block.
func putPublicIPPrefix(t *testing.T, name string) (string, netip.Prefix) {
	t.Helper()
	c, err := armnetwork.NewPublicIPPrefixesClient(suite.env.Config.SubscriptionID, arm(t).Credential(), arm(t).ARMClientOptions("e2e"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	poller, err := c.BeginCreateOrUpdate(ctx, devenv.ResourceGroup, name, armnetwork.PublicIPPrefix{
		Location: to.Ptr(suite.env.Config.Location),
		SKU:      &armnetwork.PublicIPPrefixSKU{Name: to.Ptr(armnetwork.PublicIPPrefixSKUNameStandard)},
		Properties: &armnetwork.PublicIPPrefixPropertiesFormat{PrefixLength: to.Ptr[int32](30),
			PublicIPAddressVersion: to.Ptr(armnetwork.IPVersionIPv4)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got.Properties == nil || got.Properties.IPPrefix == nil {
		t.Fatalf("prefix %s has no block", name)
	}
	return ptr.Deref(got.ID, ""), netip.MustParsePrefix(*got.Properties.IPPrefix)
}

// servicePublicIPs are the addresses of the public IPs tagged for the
// Service (azlb's service tag).
func servicePublicIPs(t *testing.T, key string) []string {
	t.Helper()
	pips, err := arm(t).PublicIP.List(context.Background(), devenv.ResourceGroup)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pips {
		for k, v := range p.Tags {
			if strings.EqualFold(k, names.TagServiceName) && v != nil && strings.Contains(*v, key) && p.Properties != nil {
				out = append(out, ptr.Deref(p.Properties.IPAddress, ""))
			}
		}
	}
	return out
}
