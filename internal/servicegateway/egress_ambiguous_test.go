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

// lostWrite turns one applied write into a reported failure (a connection
// reset after ARM took the write, an operation timeout while polling), and
// then creates the pod that brings the identity back.
type lostWrite struct {
	mu   sync.Mutex
	done bool
	then func()
}

// lose reports whether this applied write (one the wrapper picks) is the
// one to report as failed; the first time, it runs then.
func (l *lostWrite) lose(picked bool, err error) error {
	l.mu.Lock()
	lose := picked && err == nil && !l.done
	l.done = l.done || lose
	l.mu.Unlock()
	if !lose {
		return err
	}
	l.then()
	return errors.New("read tcp: connection reset by peer")
}

func (l *lostWrite) happened() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done
}

// lossyNAT loses the identity's NAT gateway detach.
type lossyNAT struct {
	azure.NatGatewayClient
	*lostWrite
}

func (l lossyNAT) CreateOrUpdate(ctx context.Context, rg, name string, nat armnetwork.NatGateway) (*armnetwork.NatGateway, error) {
	out, err := l.NatGatewayClient.CreateOrUpdate(ctx, rg, name, nat)
	if err := l.lose(nat.Properties != nil && azcore.IsNullValue(nat.Properties.ServiceGateway), err); err != nil {
		return nil, err
	}
	return out, nil
}

// lossyGateway loses the updateServices that removes the identity's
// Outbound service.
type lossyGateway struct {
	azure.ServiceGatewayClient
	*lostWrite
}

func (l lossyGateway) UpdateServices(ctx context.Context, rg, gw string, req armnetwork.ServiceGatewayUpdateServicesRequest) error {
	err := l.ServiceGatewayClient.UpdateServices(ctx, rg, gw, req)
	return l.lose(slices.ContainsFunc(req.ServiceRequests, func(r *armnetwork.ServiceGatewayServiceRequest) bool {
		return r != nil && r.IsDelete != nil && *r.IsDelete && r.Service != nil && r.Service.Name != nil && *r.Service.Name == "team-a"
	}), err)
}

// podReturnsAfterLostWrite: team-a's only pod p1 is deleted; a write of
// the teardown is applied but reported failed, and right then p2 of team-a
// appears. The engine must not trust its record of what the failed write
// did: p2 ends registered behind an attached NAT gateway and a registered
// Outbound service. (Before, the identity stayed without egress for good:
// the chaos fault mix's "NAT gateway team-2 is not attached".)
func podReturnsAfterLostWrite(t *testing.T, wrap func(h *harness, l *lostWrite) func(*Options)) {
	h, _ := emulatorHarness(t, emulator.Options{ServiceGatewayPOSTStatus: emulator.SGWPostOK})
	l := &lostWrite{then: func() { h.egressPod("p2", "team-a", "n1", "10.244.0.11") }}
	h.opts = wrap(h, l)
	h.start()
	h.node("n1", "10.240.0.4")
	h.egressPod("p1", "team-a", "n1", "10.244.0.10")
	h.stepUntil(time.Second, "p1 registered", func() bool {
		return slices.Equal(gatewayAddresses(t, h.clients), []string{"10.240.0.4: 10.244.0.10=team-a"})
	})
	h.deletePod("p1")
	var svcs, addrs []string
	attached := false
	defer func() {
		if t.Failed() {
			t.Logf("NAT gateway attached %v, gateway services %v, addresses %v", attached, svcs, addrs)
		}
	}()
	h.stepUntil(time.Second, "p2 registered behind an attached NAT gateway and a registered Outbound service", func() bool {
		nat, err := h.clients.NatGateway.Get(context.Background(), devenv.ResourceGroup, "team-a")
		attached = err == nil && nat.Properties != nil && nat.Properties.ServiceGateway != nil && nat.Properties.ServiceGateway.ID != nil
		svcs, addrs = h.gatewayServices(), gatewayAddresses(t, h.clients)
		return attached && slices.Contains(svcs, "team-a:Outbound") && slices.Equal(addrs, []string{"10.240.0.4: 10.244.0.11=team-a"})
	})
	if !l.happened() {
		t.Fatal("no write was lost: the test did not test the case")
	}
}

func TestEgressDetachLostThenPodReturns(t *testing.T) {
	podReturnsAfterLostWrite(t, func(h *harness, l *lostWrite) func(*Options) {
		return func(o *Options) { o.NatGateways = lossyNAT{NatGatewayClient: h.clients.NatGateway, lostWrite: l} }
	})
}

func TestEgressUnregisterLostThenPodReturns(t *testing.T) {
	podReturnsAfterLostWrite(t, func(h *harness, l *lostWrite) func(*Options) {
		return func(o *Options) {
			o.Gateway = lossyGateway{ServiceGatewayClient: h.clients.ServiceGateway, lostWrite: l}
		}
	})
}

// lossyPIP loses the delete of the identity's public IP.
type lossyPIP struct {
	azure.PublicIPClient
	*lostWrite
}

func (l lossyPIP) Delete(ctx context.Context, rg, name string) error {
	err := l.PublicIPClient.Delete(ctx, rg, name)
	return l.lose(name == egressPIPName("team-a", false), err)
}

// The public IP's delete is applied but reported failed (the chaos egress
// fault mix, seed 2: every NAT gateway PUT then named a public IP that was
// gone, for good).
func TestEgressPublicIPDeleteLostThenPodReturns(t *testing.T) {
	podReturnsAfterLostWrite(t, func(h *harness, l *lostWrite) func(*Options) {
		return func(o *Options) { o.PublicIPs = lossyPIP{PublicIPClient: h.clients.PublicIP, lostWrite: l} }
	})
}
