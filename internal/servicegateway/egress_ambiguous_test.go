package servicegateway

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
)

// lossyNAT applies a NAT gateway detach and then reports it failed, once
// (a connection reset after ARM took the write, an operation timeout while
// polling), and calls then() right after.
type lossyNAT struct {
	azure.NatGatewayClient
	mu   sync.Mutex
	done bool
	then func()
}

func (l *lossyNAT) CreateOrUpdate(ctx context.Context, rg, name string, nat armnetwork.NatGateway) (*armnetwork.NatGateway, error) {
	out, err := l.NatGatewayClient.CreateOrUpdate(ctx, rg, name, nat)
	detach := nat.Properties != nil && azcore.IsNullValue(nat.Properties.ServiceGateway)
	l.mu.Lock()
	lose := detach && err == nil && !l.done
	l.done = l.done || lose
	l.mu.Unlock()
	if !lose {
		return out, err
	}
	l.then()
	return nil, errors.New("read tcp: connection reset by peer")
}

// A detach that Azure applied but reported as failed must not leave the
// engine believing the NAT gateway is still attached: when a pod of the
// identity comes back before the teardown ends, the NAT gateway is
// attached again and the pod registered. (Before, the engine skipped the
// attach and the identity stayed without egress for good: the chaos
// fault mix's "NAT gateway team-2 is not attached".)
func TestEgressDetachLostThenPodReturns(t *testing.T) {
	h, _ := emulatorHarness(t, emulator.Options{ServiceGatewayPOSTStatus: emulator.SGWPostOK})
	lossy := &lossyNAT{NatGatewayClient: h.clients.NatGateway}
	lossy.then = func() { h.egressPod("p2", "team-a", "n1", "10.244.0.11") } // the identity comes back
	h.opts = func(o *Options) { o.NatGateways = lossy }
	h.start()
	h.node("n1", "10.240.0.4")
	h.egressPod("p1", "team-a", "n1", "10.244.0.10")
	h.stepUntil(time.Second, "p1 registered", func() bool {
		return slices.Equal(gatewayAddresses(t, h.clients), []string{"10.240.0.4: 10.244.0.10=team-a"})
	})
	h.deletePod("p1")
	h.stepUntil(time.Second, "p2 registered behind an attached NAT gateway", func() bool {
		nat, err := h.clients.NatGateway.Get(context.Background(), devenv.ResourceGroup, "team-a")
		attached := err == nil && nat.Properties != nil && nat.Properties.ServiceGateway != nil && nat.Properties.ServiceGateway.ID != nil
		return attached && slices.Equal(gatewayAddresses(t, h.clients), []string{"10.240.0.4: 10.244.0.11=team-a"})
	})
	lossy.mu.Lock()
	defer lossy.mu.Unlock()
	if !lossy.done {
		t.Fatal("the detach was never lost: the test did not test the case")
	}
}

// lossyGateway applies an updateServices that removes the identity's
// Outbound service and then reports it failed, once, and calls then().
type lossyGateway struct {
	azure.ServiceGatewayClient
	id   string
	mu   sync.Mutex
	done bool
	then func()
}

func (l *lossyGateway) UpdateServices(ctx context.Context, rg, gw string, req armnetwork.ServiceGatewayUpdateServicesRequest) error {
	err := l.ServiceGatewayClient.UpdateServices(ctx, rg, gw, req)
	removes := slices.ContainsFunc(req.ServiceRequests, func(r *armnetwork.ServiceGatewayServiceRequest) bool {
		return r != nil && r.IsDelete != nil && *r.IsDelete && r.Service != nil && r.Service.Name != nil && *r.Service.Name == l.id
	})
	l.mu.Lock()
	lose := removes && err == nil && !l.done
	l.done = l.done || lose
	l.mu.Unlock()
	if !lose {
		return err
	}
	l.then()
	return errors.New("read tcp: connection reset by peer")
}

// An unregistration Azure applied but reported as failed must not leave
// the engine believing the Outbound service is still there: a pod that
// comes back registers it again, and its address is registered.
func TestEgressUnregisterLostThenPodReturns(t *testing.T) {
	h, _ := emulatorHarness(t, emulator.Options{ServiceGatewayPOSTStatus: emulator.SGWPostOK})
	lossy := &lossyGateway{ServiceGatewayClient: h.clients.ServiceGateway, id: "team-a"}
	lossy.then = func() { h.egressPod("p2", "team-a", "n1", "10.244.0.11") }
	h.opts = func(o *Options) { o.Gateway = lossy }
	h.start()
	h.node("n1", "10.240.0.4")
	h.egressPod("p1", "team-a", "n1", "10.244.0.10")
	h.stepUntil(time.Second, "p1 registered", func() bool {
		return slices.Equal(gatewayAddresses(t, h.clients), []string{"10.240.0.4: 10.244.0.10=team-a"})
	})
	h.deletePod("p1")
	var svcs, addrs []string
	defer func() {
		if t.Failed() {
			t.Logf("gateway services %v, addresses %v, events %v", svcs, addrs, h.events.All())
		}
	}()
	h.stepUntil(time.Second, "p2 registered under a registered Outbound service", func() bool {
		svcs, addrs = h.gatewayServices(), gatewayAddresses(t, h.clients)
		return slices.Contains(svcs, "team-a:Outbound") && slices.Equal(addrs, []string{"10.240.0.4: 10.244.0.11=team-a"})
	})
	lossy.mu.Lock()
	defer lossy.mu.Unlock()
	if !lossy.done {
		t.Fatal("the unregistration was never lost: the test did not test the case")
	}
}
