package servicegateway

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/testutil"
)

// emulatorHarness is the harness against the ARM emulator (seeded with the
// gateway and default-natgw), through the real SDK.
func emulatorHarness(t testing.TB, eo emulator.Options) (*harness, *devenv.Env) {
	t.Helper()
	env := testutil.StartEmulator(t, eo, devenv.PodIP)
	if err := env.SeedServiceGateway(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	h.cfg = env.Config
	h.clients = testutil.Clients(t, env, azure.ClientOptions{Source: "servicegateway-test", PollFrequency: 5 * time.Millisecond})
	return h, env
}

// gatewayAddresses renders GET addressLocations like FakeARM.Addresses.
func gatewayAddresses(t testing.TB, c *azure.Clients) []string {
	t.Helper()
	locs, err := c.ServiceGateway.GetAddressLocations(context.Background(), devenv.ResourceGroup, names.ServiceGateway)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range locs {
		var as []string
		for _, a := range l.Addresses {
			var s []string
			for _, x := range a.Services {
				s = append(s, *x)
			}
			as = append(as, strings.ToLower(*a.Address)+"="+strings.Join(s, ","))
		}
		slices.Sort(as)
		out = append(out, strings.ToLower(*l.AddressLocation)+": "+strings.Join(as, " "))
	}
	slices.Sort(out)
	return out
}

func armWrites(e *emulator.Emulator) []string {
	var out []string
	for _, r := range e.Requests() {
		if r.Kind == "arm" && r.Method != http.MethodGet {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	return out
}

// The whole lifecycle against the emulator, whose validation is strict: in
// NRP's observed mode (200 on the POSTs) and the specification's (202 and
// polling), with the RP's default-natgw on a shared pod left alone.
func TestAgainstTheEmulator(t *testing.T) {
	for _, status := range []int{emulator.SGWPostOK, emulator.SGWPostAccepted} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			h, env := emulatorHarness(t, emulator.Options{ServiceGatewayPOSTStatus: status, ServiceGatewayPageSize: 2})
			ctx := context.Background()
			// default-natgw also maps the pod 10.244.0.11.
			if err := h.clients.ServiceGateway.UpdateAddressLocations(ctx, devenv.ResourceGroup, names.ServiceGateway,
				armnetwork.ServiceGatewayUpdateAddressLocationsRequest{Action: ptr.To(armnetwork.UpdateActionPartialUpdate),
					AddressLocations: []*armnetwork.ServiceGatewayAddressLocation{{AddressLocation: ptr.To("10.240.0.4"),
						AddressUpdateAction: ptr.To(armnetwork.AddressUpdateActionFullUpdate),
						Addresses:           []*armnetwork.ServiceGatewayAddress{{Address: ptr.To("10.244.0.11"), Services: []*string{ptr.To(names.DefaultOutboundService)}}}}}}); err != nil {
				t.Fatal(err)
			}
			h.start()
			h.node("n1", "10.240.0.4", "fd00:10::4")
			h.node("n2", "10.240.0.5", "fd00:10::5")
			web := h.service("default", "web")
			v6 := h.service("default", "v6", func(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol} })
			h.slice(web, "a", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.244.0.10"), readyOn("n1", "10.244.0.11"), readyOn("n2", "10.244.1.10"))
			h.slice(v6, "a", discoveryv1.AddressTypeIPv6, readyOn("n2", "fd00:244::10"))
			for _, s := range []*v1.Service{web, v6} {
				if err := h.ensure(s); err != nil {
					t.Fatal(err)
				}
				h.waitReady(s)
			}
			natWeb := strings.Join(slices.Sorted(slices.Values([]string{names.DefaultOutboundService, uid(web)})), ",")
			want := []string{"10.240.0.4: 10.244.0.10=" + uid(web) + " 10.244.0.11=" + natWeb, "10.240.0.5: 10.244.1.10=" + uid(web), "fd00:10::5: fd00:244::10=" + uid(v6)}
			testutil.Poll(t, waitFor, "addresses in the gateway", func() bool { return slices.Equal(gatewayAddresses(t, h.clients), want) })

			// A restart of the unchanged cluster writes nothing.
			h.idle()
			env.Emulator().ResetRequests()
			h.restart()
			h.idle()
			if w := armWrites(env.Emulator()); len(w) != 0 {
				t.Errorf("the restart wrote %v", w)
			}

			// An address update whose operation fails is retried.
			if _, err := env.Emulator().AddFault(emulator.Fault{Method: http.MethodPost, PathRegex: "updateAddressLocations$", LROResult: "Failed", Count: 1}); err != nil {
				t.Fatal(err)
			}
			h.slice(web, "a", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.244.0.11"), readyOn("n2", "10.244.1.10"))
			want[0] = "10.240.0.4: 10.244.0.11=" + natWeb
			h.stepUntil(time.Second, "address removed", func() bool { return slices.Equal(gatewayAddresses(t, h.clients), want) })

			// Deleting both leaves only the default outbound service.
			h.remove(web)
			h.remove(v6)
			h.stepUntil(time.Second, "torn down", func() bool { return h.get(web) == nil && h.get(v6) == nil })
			if got := gatewayAddresses(t, h.clients); !slices.Equal(got, []string{"10.240.0.4: 10.244.0.11=" + names.DefaultOutboundService}) {
				t.Errorf("addresses left: %v", got)
			}
			svcs, err := h.clients.ServiceGateway.GetServices(ctx, devenv.ResourceGroup, names.ServiceGateway)
			if err != nil || len(svcs) != 1 || *svcs[0].Name != names.DefaultOutboundService {
				t.Errorf("services left: %v %v", svcs, err)
			}
			lbs, err := h.clients.LoadBalancer.List(ctx, devenv.ResourceGroup)
			if err != nil || len(lbs) != 0 {
				t.Errorf("load balancers left: %d %v", len(lbs), err)
			}
		})
	}
}

// azure.json tags and tagsMap go on the Service's public IP and load
// balancer too (docs/configuration.md, Tags), and a later tags-only change
// rewrites the load balancer's tags alone.
func TestConfigTagsOnPodBasedResources(t *testing.T) {
	h, _ := emulatorHarness(t, emulator.Options{})
	h.cfg.Tags = "team=net"
	h.start()
	h.node("n1", "10.240.0.4", "fd00:10::4")
	web := h.service("default", "web")
	h.slice(web, "a", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.244.0.10"))
	if err := h.ensure(web); err != nil {
		t.Fatal(err)
	}
	h.waitReady(web)
	ctx := context.Background()
	pip, err := h.clients.PublicIP.Get(ctx, devenv.ResourceGroup, names.ServicePublicIP(web.UID))
	if err != nil {
		t.Fatal(err)
	}
	lb, err := h.clients.LoadBalancer.Get(ctx, devenv.ResourceGroup, uid(web))
	if err != nil {
		t.Fatal(err)
	}
	for what, tags := range map[string]map[string]*string{"public IP": pip.Tags, "load balancer": lb.Tags} {
		if ptr.Deref(tags["team"], "") != "net" || ptr.Deref(tags[names.TagClusterName], "") == "" {
			t.Errorf("%s tags %v: want team=net and the cluster's", what, tags)
		}
	}
}
