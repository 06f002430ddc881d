package provider

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/privatelink"
)

// Two internal Services share one IP and the first's Private Link Service;
// deleting the owner first keeps the frontend (and its Private Link
// Service) for the other, and deleting the other then removes both: it
// must not be refused for ever with
// LoadBalancerFrontendIpConfigurationInUseByPrivateLinkService (issue 40
// item 6).
func TestSharedFrontendPrivateLinkOwnerDeletedFirst(t *testing.T) {
	h := newRefusalHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	owner := testService("owner", "b1111111-2222-3333-4444-555555555555", map[string]string{
		annotations.KeyInternal: "true", privatelink.KeyCreate: "true"}, 80)
	if err := h.ensure(t, owner); err != nil {
		t.Fatal(err)
	}
	fe := serviceFrontend(h.lb(t, "kubernetes-internal"), owner, v1.IPv4Protocol)
	if fe == nil || fe.Properties == nil || fe.Properties.PrivateIPAddress == nil {
		t.Fatal("the owner has no internal frontend")
	}
	addr := *fe.Properties.PrivateIPAddress
	other := testService("other", "b2111111-2222-3333-4444-555555555555", map[string]string{
		annotations.KeyInternal: "true", annotations.KeyIPv4: addr}, 81)
	if err := h.ensure(t, other); err != nil {
		t.Fatal(err)
	}
	pls := func() string {
		got, err := h.p.pls.Manager().Store().ByFrontend(ctx, devenv.ResourceGroup, *fe.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got == nil {
			return ""
		}
		return ptr.Deref(got.Name, "")
	}
	if pls() == "" {
		t.Fatal("no Private Link Service on the shared frontend")
	}

	h.svcs.remove(owner)
	if err := h.p.EnsureLoadBalancerDeleted(ctx, "kubernetes", owner); err != nil {
		t.Fatalf("delete the owner: %v", err)
	}
	if findFrontend(h.lb(t, "kubernetes-internal"), *fe.Name) == nil {
		t.Fatal("the shared frontend went with its owner while the other Service uses it")
	}

	h.svcs.remove(other)
	if err := h.p.EnsureLoadBalancerDeleted(ctx, "kubernetes", other); err != nil {
		t.Fatalf("delete the other Service: %v", err)
	}
	if lb := h.lb(t, "kubernetes-internal"); findFrontend(lb, *fe.Name) != nil {
		t.Error("the shared frontend is still there after both Services were deleted")
	}
	h.p.pls.Manager().Store().Invalidate(devenv.ResourceGroup)
	if name := pls(); name != "" {
		t.Errorf("Private Link Service %s is still there after both Services were deleted", name)
	}
}
