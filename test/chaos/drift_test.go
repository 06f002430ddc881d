package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/devenv"
)

// driftPeriod is the suite's driftRepairIntervalInSeconds (clusterConfig).
const driftPeriod = 15 * time.Second

// outOfBand changes Azure behind azlb's back, as an operator or another
// tool would: one load-balancing rule deleted, the admin state of one pool
// entry of a node in service flipped to Down, and one of azlb's security
// rules deleted. It returns what it changed.
func outOfBand(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	clients, err := suite.env.Clients(ctx, azure.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer clients.Close()
	var did []string
	lbs, err := clients.LoadBalancer.List(ctx, devenv.ResourceGroup)
	if err != nil {
		t.Fatal(err)
	}
	for _, lb := range lbs {
		p := lb.Properties
		if p == nil || len(p.LoadBalancingRules) == 0 {
			continue
		}
		name := ptr.Deref(lb.Name, "")
		did = append(did, "rule "+ptr.Deref(p.LoadBalancingRules[0].Name, "")+" deleted from "+name)
		p.LoadBalancingRules = p.LoadBalancingRules[1:]
		for _, pool := range p.BackendAddressPools {
			if !strings.EqualFold(ptr.Deref(pool.Name, ""), "kubernetes") || pool.Properties == nil {
				continue
			}
			for _, e := range pool.Properties.LoadBalancerBackendAddresses {
				if e.Properties != nil && ptr.Deref(e.Properties.AdminState, armnetwork.LoadBalancerBackendAddressAdminStateNone) == armnetwork.LoadBalancerBackendAddressAdminStateNone {
					e.Properties.AdminState = ptr.To(armnetwork.LoadBalancerBackendAddressAdminStateDown)
					did = append(did, "entry "+ptr.Deref(e.Name, "")+" of "+name+"/kubernetes set Down")
					break
				}
			}
		}
		if _, err := clients.LoadBalancer.CreateOrUpdate(ctx, devenv.ResourceGroup, name, *lb, ptr.Deref(lb.Etag, "")); err != nil {
			t.Fatalf("out-of-band write of %s: %v", name, err)
		}
		break
	}
	sg, err := clients.SecurityGroup.Get(ctx, devenv.ResourceGroup, devenv.SecurityGroupName)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range sg.Properties.SecurityRules {
		if strings.HasPrefix(ptr.Deref(r.Name, ""), "k8s-azure-lb") {
			did = append(did, "security rule "+ptr.Deref(r.Name, "")+" deleted")
			sg.Properties.SecurityRules = append(sg.Properties.SecurityRules[:i], sg.Properties.SecurityRules[i+1:]...)
			if _, err := clients.SecurityGroup.CreateOrUpdate(ctx, devenv.ResourceGroup, devenv.SecurityGroupName, *sg, ptr.Deref(sg.Etag, "")); err != nil {
				t.Fatalf("out-of-band write of the NSG: %v", err)
			}
			break
		}
	}
	if len(did) == 0 {
		t.Fatal("nothing to change out of band: no load balancer with a rule")
	}
	return did
}

// driftRepaired changes Azure out of band on a converged cluster and
// requires verify to come clean within one drift period (plus the pass's
// own time: a pass that began just before the change may miss it, so the
// bound is two periods).
func driftRepaired(t *testing.T, c *checker, seed uint64) {
	t.Helper()
	did := outOfBand(t)
	took := c.waitClean(t, 2*driftPeriod+10*time.Second)
	figure(t, "drift-repair", map[string]any{"seed": seed, "changed": did, "periodSeconds": driftPeriod.Seconds(), "repairedSeconds": took.Seconds()})
}
