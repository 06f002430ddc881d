package servicegateway

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

const (
	uidA = "aaaaaaaa-0000-4000-8000-000000000001"
	uidB = "bbbbbbbb-0000-4000-8000-000000000002"
)

func k(loc, addr string) addrKey {
	return addrKey{netip.MustParseAddr(loc), netip.MustParseAddr(addr)}
}

func set(keys ...addrKey) map[addrKey]struct{} {
	out := map[addrKey]struct{}{}
	for _, x := range keys {
		out[x] = struct{}{}
	}
	return out
}

// wire renders a batch's request as the JSON the SDK sends.
func wire(t *testing.T, b *batch) string {
	t.Helper()
	if b == nil {
		return "nil"
	}
	raw, err := json.Marshal(b.Request)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func nrpLoc(loc string, addrs map[string][]string) *armnetwork.ServiceGatewayAddressLocationResponse {
	l := &armnetwork.ServiceGatewayAddressLocationResponse{AddressLocation: to.Ptr(loc)}
	for a, svcs := range addrs {
		l.Addresses = append(l.Addresses, &armnetwork.ServiceGatewayAddress{Address: to.Ptr(a), Services: to.SliceOfPtrs(svcs...)})
	}
	return l
}

// B13, B15, B16, B25: the wire shapes.
func TestTrackerShapes(t *testing.T) {
	tr := newDiffTracker()
	tr.SetRegistered(uidA, []string{"pool"})
	tr.SetRegistered(uidB, []string{"pool"})
	tr.SetDesired(uidA, set(k("10.1.0.4", "10.2.0.5"), k("10.1.0.4", "10.2.0.6")))
	tr.SetDesired(uidB, set(k("10.1.0.4", "10.2.0.6")))
	if b := tr.Diff(); b != nil {
		t.Fatalf("addresses of Services that are not ready were sent: %s", wire(t, b))
	}
	tr.SetReady(uidA, true)
	tr.SetReady(uidB, true)
	b := tr.Diff()
	want := `{"action":"PartialUpdate","addressLocations":[{"addressLocation":"10.1.0.4","addressUpdateAction":"FullUpdate","addresses":[` +
		`{"address":"10.2.0.5","services":["` + uidA + `"]},{"address":"10.2.0.6","services":["` + uidA + `","` + uidB + `"]}]}]}`
	if got := wire(t, b); got != want {
		t.Fatalf("new location:\n got %s\nwant %s", got, want)
	}
	tr.Applied(b)
	if b := tr.Diff(); b != nil {
		t.Fatalf("in sync, yet: %s", wire(t, b))
	}
	// Service B stops wanting the shared pod: it keeps A; A's other pod
	// leaves: its address is unbound with an empty list.
	tr.SetDesired(uidB, nil)
	tr.SetDesired(uidA, set(k("10.1.0.4", "10.2.0.6")))
	b = tr.Diff()
	want = `{"action":"PartialUpdate","addressLocations":[{"addressLocation":"10.1.0.4","addressUpdateAction":"PartialUpdate","addresses":[` +
		`{"address":"10.2.0.5","services":[]},{"address":"10.2.0.6","services":["` + uidA + `"]}]}]}`
	if got := wire(t, b); got != want {
		t.Fatalf("removals:\n got %s\nwant %s", got, want)
	}
	tr.Applied(b)
	// The last pod leaves: the whole location goes, addresses [].
	tr.SetDesired(uidA, nil)
	b = tr.Diff()
	want = `{"action":"PartialUpdate","addressLocations":[{"addressLocation":"10.1.0.4","addressUpdateAction":"PartialUpdate","addresses":[]}]}`
	if got := wire(t, b); got != want {
		t.Fatalf("empty location:\n got %s\nwant %s", got, want)
	}
	tr.Applied(b)
	if l, a := tr.NRPTotals(); l != 0 || a != 0 {
		t.Errorf("mirror holds %d locations, %d addresses", l, a)
	}
}

// B18, bug 26: NRP answers IPv6 upper-case and may list a location twice;
// the mirror canonicalises, so what matches sends nothing.
func TestTrackerCanonicalisesNRP(t *testing.T) {
	tr := newDiffTracker()
	skipped := tr.LoadNRP([]*armnetwork.ServiceGatewayAddressLocationResponse{
		nrpLoc("FD00:0:0::4", map[string][]string{"FD00:2::A": {strings.ToUpper(uidA)}}),
		nrpLoc("fd00::4", map[string][]string{"fd00:2::b": {uidA}}),
		nrpLoc("not-an-ip", map[string][]string{"fd00:2::c": {uidA}}),
		nrpLoc("10.1.0.4", map[string][]string{"fd00:2::d": {uidA}, "10.2.0.1": {"default-natgw"}}),
	})
	if skipped != 2 {
		t.Errorf("skipped %d, want 2 (a location that is not an IP, an address of the other family)", skipped)
	}
	tr.SetRegistered(uidA, []string{"pool"})
	tr.SetReady(uidA, true)
	tr.SetDesired(uidA, set(k("fd00::4", "fd00:2::a"), k("fd00::4", "fd00:2::b")))
	if b := tr.Diff(); b != nil {
		t.Fatalf("canonical equals sent: %s", wire(t, b))
	}
}

// Outbound and other services azlb does not own stay on their addresses.
func TestTrackerKeepsForeignServices(t *testing.T) {
	tr := newDiffTracker()
	tr.LoadNRP([]*armnetwork.ServiceGatewayAddressLocationResponse{
		nrpLoc("10.1.0.4", map[string][]string{"10.2.0.5": {"default-natgw", uidA}, "10.2.0.9": {"egress-x"}}),
	})
	tr.SetRegistered(uidA, []string{"pool"})
	tr.SetReady(uidA, true)
	tr.SetDesired(uidA, set(k("10.1.0.4", "10.2.0.5")))
	if b := tr.Diff(); b != nil {
		t.Fatalf("in sync: %s", wire(t, b))
	}
	tr.SetDesired(uidA, nil)
	b := tr.Diff()
	want := `{"action":"PartialUpdate","addressLocations":[{"addressLocation":"10.1.0.4","addressUpdateAction":"PartialUpdate","addresses":[{"address":"10.2.0.5","services":["default-natgw"]}]}]}`
	if got := wire(t, b); got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

// An address wanted under two locations (reused on another node before the
// old endpoint is gone) waits until only one remains.
func TestTrackerHoldsBackAnAddressUnderTwoLocations(t *testing.T) {
	tr := newDiffTracker()
	tr.SetRegistered(uidA, []string{"p"})
	tr.SetRegistered(uidB, []string{"p"})
	tr.SetReady(uidA, true)
	tr.SetReady(uidB, true)
	tr.SetDesired(uidA, set(k("10.1.0.4", "10.2.0.5")))
	tr.Applied(tr.Diff())
	tr.SetDesired(uidB, set(k("10.1.0.6", "10.2.0.5")))
	if b := tr.Diff(); b != nil {
		t.Fatalf("sent an address under a second location: %s", wire(t, b))
	}
	tr.SetDesired(uidA, nil) // the old endpoint goes
	b := tr.Diff()
	got := wire(t, b)
	if !strings.Contains(got, `"addressLocation":"10.1.0.4","addressUpdateAction":"PartialUpdate","addresses":[]`) ||
		!strings.Contains(got, `"addressLocation":"10.1.0.6","addressUpdateAction":"FullUpdate","addresses":[{"address":"10.2.0.5","services":["`+uidB+`"]}]`) {
		t.Fatalf("the move is one request: %s", got)
	}
}

// Failed returns keys for the next attempt; Abandon drops them until they
// change; Split halves a batch by location.
func TestTrackerFailedAbandonSplit(t *testing.T) {
	tr := newDiffTracker()
	tr.SetRegistered(uidA, []string{"p"})
	tr.SetReady(uidA, true)
	tr.SetDesired(uidA, set(k("10.1.0.4", "10.2.0.5"), k("10.1.0.5", "10.2.0.6"), k("10.1.0.6", "10.2.0.7")))
	b := tr.Diff()
	tr.Failed(b)
	b2 := tr.Diff()
	if wire(t, b2) != wire(t, b) {
		t.Fatalf("after a failure the same request is due: %s", wire(t, b2))
	}
	first, second, ok := tr.Split(b2)
	if !ok || first.Locations != 1 || second.Locations != 2 {
		t.Fatalf("split %v %d %d", ok, first.Locations, second.Locations)
	}
	tr.Applied(first)
	tr.Abandon(second)
	if b := tr.Diff(); b != nil {
		t.Fatalf("abandoned keys came back: %s", wire(t, b))
	}
	tr.Resync()
	if b := tr.Diff(); b == nil || b.Locations != 2 {
		t.Fatalf("a resync retries what was abandoned: %s", wire(t, b))
	}
}

func FuzzTrackerLoadNRP(f *testing.F) {
	f.Add("10.1.0.4", "10.2.0.5", uidA)
	f.Add("FD00::4", "fd00:2::1", "default-natgw")
	f.Add("::ffff:10.0.0.1", "10.0.0.1%eth0", "")
	f.Fuzz(func(t *testing.T, loc, addr, svc string) {
		tr := newDiffTracker()
		tr.LoadNRP([]*armnetwork.ServiceGatewayAddressLocationResponse{
			nrpLoc(loc, map[string][]string{addr: {svc}}), nil, {AddressLocation: to.Ptr(loc), Addresses: []*armnetwork.ServiceGatewayAddress{nil, {}}},
		})
		tr.SetRegistered(uidA, []string{"p"})
		tr.SetReady(uidA, true)
		if b := tr.Diff(); b != nil {
			// Only removals of azlb's own services can be due.
			for _, l := range b.Request.AddressLocations {
				for _, a := range l.Addresses {
					if a.Services == nil {
						t.Fatalf("null services in %s", wire(t, b))
					}
				}
			}
			tr.Applied(b)
		}
		if b := tr.Diff(); b != nil {
			t.Fatalf("not converged after one update: %s", wire(t, b))
		}
	})
}
