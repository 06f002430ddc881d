package lbstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// acquireAsync starts an acquire and returns where its result arrives.
func acquireAsync(ctx context.Context, w *writeSlots, n int64) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := w.acquire(ctx, n)
		done <- err
	}()
	return done
}

// free reports whether n of the budget is free now (taking nothing).
func free(w *writeSlots, n int64) bool {
	if !w.sem.TryAcquire(n) {
		return false
	}
	w.sem.Release(n)
	return true
}

// The budget bounds what is in flight; a transfer larger than the budget
// takes all of it (and runs alone) rather than waiting forever; a zero
// weight still counts one.
func TestWriteSlotsBound(t *testing.T) {
	w := newWriteSlots(10)
	ctx := context.Background()
	if n, err := w.acquire(ctx, 6); n != 6 || err != nil {
		t.Fatalf("first acquire: %d, %v", n, err)
	}
	if free(w, 5) || !free(w, 4) {
		t.Fatal("6 of 10 taken: 4 must be free, 5 not")
	}
	big := acquireAsync(ctx, w, 8) // does not fit beside the 6
	select {
	case err := <-big:
		t.Fatalf("an acquire over the budget returned at once: %v", err)
	case <-time.After(50 * time.Millisecond): // a short look: it must still wait
	}
	w.release(6)
	if err := <-big; err != nil {
		t.Fatal(err)
	}
	w.release(8)

	if n, err := w.acquire(ctx, 100); n != 10 || err != nil {
		t.Fatalf("oversized acquire: %d, %v; want 10", n, err)
	}
	if free(w, 1) {
		t.Fatal("an oversized transfer must take the whole budget")
	}
	w.release(10)
	if n, _ := w.acquire(ctx, 0); n != 1 {
		t.Fatalf("zero acquire took %d, want 1", n)
	}
	w.release(1)
	if !free(w, 10) {
		t.Fatal("the budget is not whole after releasing everything")
	}
}

// A cancelled wait returns the context's error and takes nothing.
func TestWriteSlotsCancelledWait(t *testing.T) {
	w := newWriteSlots(10)
	if _, err := w.acquire(context.Background(), 5); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	big := acquireAsync(ctx, w, 10)
	cancel()
	if err := <-big; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled acquire: %v", err)
	}
	w.release(5)
	if !free(w, 10) {
		t.Fatal("a cancelled wait kept part of the budget")
	}
}

func TestWriteWeight(t *testing.T) {
	lb := &armnetwork.LoadBalancer{Properties: &armnetwork.LoadBalancerPropertiesFormat{
		FrontendIPConfigurations: make([]*armnetwork.FrontendIPConfiguration, 2),
		LoadBalancingRules:       make([]*armnetwork.LoadBalancingRule, 3),
		Probes:                   make([]*armnetwork.Probe, 3),
		BackendAddressPools: []*armnetwork.BackendAddressPool{
			{Name: to.Ptr("p"), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
				LoadBalancerBackendAddresses: make([]*armnetwork.LoadBalancerBackendAddress, 1250)}},
			nil,
		},
	}}
	if got, want := writeWeight(lb), int64(1+2+3+3+2+1250); got != want {
		t.Errorf("weight %d, want %d", got, want)
	}
	if got := writeWeight(&armnetwork.LoadBalancer{}); got != 1 {
		t.Errorf("empty load balancer weight %d, want 1", got)
	}
}
