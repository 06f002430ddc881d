package localservice

import (
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azlb/azlb/internal/emulator"
)

func TestPoolAlreadyRightCostsOneGETAndNoEvent(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.tick(testInterval)
	h.expectEvents(key + " " + reasonUpdated)

	// The same nodes again (a pod restarted on the same node).
	h.setEndpoints("default", "web", "n2", "n1")
	h.resetRequests()
	h.tick(testInterval)
	if g, p := h.pools.attempts("get"), h.pools.attempts("put"); g != 2 || p != 1 {
		t.Fatalf("client calls: %d GET, %d PUT; want the second tick to GET only", g, p)
	}
	if _, p := h.armCalls(webPool); p != 0 {
		t.Fatalf("%d PUTs for an unchanged pool", p)
	}
	h.expectEvents()
	h.expectMetrics(2, 0) // both terminal successes
}

func TestUpToDateAfterRetriesClosesTheRetryingStory(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.fault(http.MethodPut, webPool, emulator.Fault{Status: http.StatusConflict, Count: conflictsPerTick})
	h.tick(testInterval)
	h.expectEvents(key + " " + reasonRetrying)
	// Someone else (the Service reconcile) writes the right pool meanwhile.
	entry := func(name, ip string) *armnetwork.LoadBalancerBackendAddress {
		return &armnetwork.LoadBalancerBackendAddress{Name: to.Ptr(name), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
			IPAddress: to.Ptr(ip), VirtualNetwork: &armnetwork.SubResource{ID: to.Ptr(h.u.policy.VNetID)},
			AdminState: to.Ptr(armnetwork.LoadBalancerBackendAddressAdminStateNone),
		}}
	}
	if _, err := h.inspect.BackendPool.CreateOrUpdate(h.ctx, h.rg(), testLB, webPool, armnetwork.BackendAddressPool{
		Properties: &armnetwork.BackendAddressPoolPropertiesFormat{LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{
			entry("n1", "10.240.0.4"), entry("n2", "10.240.0.5"),
		}, DrainPeriodInSeconds: to.Ptr(h.u.policy.DrainPeriodInSeconds)},
	}, ""); err != nil {
		t.Fatal(err)
	}
	h.resetRequests()
	h.tick(testInterval)
	if _, p := h.armCalls(webPool); p != 0 {
		t.Fatalf("%d PUTs for a pool already right", p)
	}
	evs := h.expectEvents(key + " " + reasonUpdated)
	if !strings.Contains(evs[0].message, "is up to date after 1 retries: 2 node(s)") {
		t.Errorf("message = %q", evs[0].message)
	}
	h.expectQueued()
	h.expectMetrics(1, 0)
}
