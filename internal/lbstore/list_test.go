package lbstore_test

import (
	"context"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/testutil"
)

// List caches what it read: a mutation that changes nothing then costs no
// call at all.
func TestListWarmsTheCache(t *testing.T) {
	f := testutil.NewFakeARM()
	f.Seed(&armnetwork.LoadBalancer{Name: to.Ptr("svc-a"), Properties: &armnetwork.LoadBalancerPropertiesFormat{
		FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{Name: to.Ptr("frontend")}}}})
	s := newStore(t, f, nil)
	ctx := context.Background()
	lbs, err := s.List(ctx)
	if err != nil || len(lbs) != 1 {
		t.Fatalf("List = %v, %v", lbs, err)
	}
	f.ResetCalls()
	if _, err := s.UpdateLB(ctx, "test", "svc-a", lbstore.UpdateOptions{}, addFrontend("frontend")); err != nil {
		t.Fatal(err)
	}
	if calls := f.Calls(); len(calls) != 0 {
		t.Errorf("an unchanged load balancer after List cost %v", calls)
	}
}

// AssumeAbsent creates a load balancer without reading it first; a
// conflict retry still reads.
func TestAssumeAbsentSkipsTheRead(t *testing.T) {
	f := testutil.NewFakeARM()
	s := newStore(t, f, nil)
	ctx := context.Background()
	if _, err := s.UpdateLB(ctx, "test", "svc-b", lbstore.UpdateOptions{Create: true, AssumeAbsent: true}, addFrontend("frontend")); err != nil {
		t.Fatal(err)
	}
	if got := f.Count("lb.get", ""); got != 0 {
		t.Errorf("%d GETs, want none", got)
	}
	if got := f.Count("lb.put", ""); got != 1 || len(frontends(f.LB("svc-b"))) != 1 {
		t.Errorf("%d PUTs; stored %v", got, frontends(f.LB("svc-b")))
	}
	// Without Create the option is ignored: the store reads.
	f.ResetCalls()
	if _, err := s.UpdateLB(ctx, "test", "svc-c", lbstore.UpdateOptions{AssumeAbsent: true}, addFrontend("frontend")); err != nil {
		t.Fatal(err)
	}
	if got := f.Count("lb.get", ""); got != 1 {
		t.Errorf("%d GETs without Create, want 1", got)
	}
}
