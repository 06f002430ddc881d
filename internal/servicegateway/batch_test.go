package servicegateway

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/testutil"
)

// serviceBatches are the updateServices requests FakeARM served, as the
// service names of each.
func (h *harness) serviceBatches() [][]string {
	var out [][]string
	for _, c := range h.arm.Calls() {
		if c.Op != "sgw.update_services" {
			continue
		}
		var names []string
		for _, r := range c.Body.(*armnetwork.ServiceGatewayUpdateServicesRequest).ServiceRequests {
			names = append(names, *r.Service.Name)
		}
		out = append(out, names)
	}
	return out
}

// existing creates n LoadBalancer Services that the engine picks up when
// it starts (as after a restart).
func existing(h *harness, n int) []*v1.Service {
	svcs := make([]*v1.Service, n)
	for i := range svcs {
		svcs[i] = h.service("default", fmt.Sprintf("svc-%d", i))
	}
	return svcs
}

// The registrations of a round go out together: 7 Services with a batch
// size of 3 take ceil(7/3) = 3 updateServices, none larger than 3; their
// deletions are batched the same way.
func TestRegistrationsBatched(t *testing.T) {
	h := newHarness(t)
	h.cfg.ServiceGatewayUpdateServicesBatchSize = 3
	svcs := existing(h, 7)
	h.start()
	for _, s := range svcs {
		h.waitReady(s)
	}
	h.idle()
	batches := h.serviceBatches()
	if len(batches) != 3 {
		t.Fatalf("%d updateServices for 7 registrations with a batch size of 3, want 3: %v", len(batches), batches)
	}
	total := 0
	for _, b := range batches {
		if len(b) > 3 {
			t.Errorf("an updateServices carried %d services, more than 3: %v", len(b), b)
		}
		total += len(b)
	}
	if total != 7 {
		t.Errorf("%d registrations sent, want 7: %v", total, batches)
	}
}

// Deletions are batched too: 6 Services deleted while the controller was
// down are unlinked in one updateServices and unregistered in another.
func TestUnregistrationsBatched(t *testing.T) {
	h := newHarness(t)
	svcs := existing(h, 6)
	h.start()
	for _, s := range svcs {
		h.waitReady(s)
	}
	h.idle()
	h.shutdown()
	for _, s := range svcs {
		cur := h.get(s)
		now := metav1.Now()
		cur.DeletionTimestamp = &now
		if _, err := h.cs.CoreV1().Services(s.Namespace).Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.arm.ResetCalls()
	h.start()
	for _, s := range svcs {
		h.waitGone(s)
	}
	h.idle()
	batches := h.serviceBatches()
	if len(batches) != 2 || len(batches[0]) != 6 || len(batches[1]) != 6 {
		t.Fatalf("updateServices %v, want the 6 unlinks together, then the 6 unregistrations", batches)
	}
}

// A batch the gateway refuses because of one Service's entry is split: the
// others are registered, the refused one is parked with its event.
func TestRefusedRegistrationDoesNotLoseOthers(t *testing.T) {
	h := newHarness(t)
	svcs := existing(h, 5)
	bad := uid(svcs[2])
	h.setFail(func(c testutil.Call) error {
		if c.Op != "sgw.update_services" {
			return nil
		}
		for _, r := range c.Body.(*armnetwork.ServiceGatewayUpdateServicesRequest).ServiceRequests {
			if *r.Service.Name == bad {
				return testutil.RespErr(http.StatusBadRequest, "InvalidServiceGatewayService")
			}
		}
		return nil
	})
	h.start()
	for i, s := range svcs {
		if i != 2 {
			h.waitReady(s)
		}
	}
	testutil.Poll(t, waitFor, "refused", func() bool {
		return len(h.events.Find("default/"+svcs[2].Name, EventConfigurationRejected)) == 1
	})
	h.idle()
	batches := h.serviceBatches()
	if len(batches) == 0 || len(batches[0]) != 5 {
		t.Fatalf("the first updateServices carried %v, want the 5 registrations together", batches)
	}
	if h.registered(svcs[2]) {
		t.Error("the refused Service is registered")
	}
	for _, b := range batches[1:] {
		if len(b) >= 5 {
			t.Errorf("the refused batch was sent again whole: %v", b)
		}
	}
	if len(h.events.Find("", EventConfigurationRejected)) != 1 {
		t.Errorf("events %v, want one rejection", h.events.All())
	}
}

// Against the emulator enforcing a maximum of 3 services per
// updateServices: the engine's batches of 3 are all accepted; batches of 5
// are refused, split, and every Service still ends registered.
func TestBatchesWithinTheEmulatorsMaximum(t *testing.T) {
	for _, tc := range []struct {
		batch   int
		refused bool
	}{{3, false}, {5, true}} {
		t.Run(fmt.Sprintf("batch-%d", tc.batch), func(t *testing.T) {
			h, env := emulatorHarness(t, emulator.Options{ServiceGatewayMaxServicesPerUpdate: 3})
			h.cfg.ServiceGatewayUpdateServicesBatchSize = tc.batch
			svcs := existing(h, 7)
			env.Emulator().ResetRequests()
			h.start()
			for _, s := range svcs {
				h.waitReady(s)
			}
			h.idle()
			var posts, refusals int
			for _, r := range env.Emulator().Requests() {
				if r.Kind == "arm" && r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/updateServices") {
					posts++
					if r.Status == http.StatusBadRequest {
						refusals++
					}
				}
			}
			if got := refusals > 0; got != tc.refused {
				t.Errorf("%d of %d updateServices refused", refusals, posts)
			}
			if !tc.refused && posts != 3 {
				t.Errorf("%d updateServices for 7 registrations in batches of 3, want 3", posts)
			}
			if n := h.events.Count(EventConfigurationRejected); n != 0 {
				t.Errorf("%d Services rejected", n)
			}
		})
	}
}
