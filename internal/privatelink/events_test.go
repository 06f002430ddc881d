package privatelink

import (
	"errors"
	"strings"
	"testing"

	"github.com/azlb/azlb/internal/annotations"
)

// Every annotation's bad value, through the Manager: a Warning event
// InvalidPrivateLinkService whose message names the annotation, and nothing
// written: neither a new PLS (nor the NAT subnet's policy) for a Service
// that has none, nor a change to the PLS a Service already has, even when
// its other annotations changed validly in the same edit.
func TestBadAnnotationsWarnAndWriteNothing(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	good := map[string]string{KeyCreate: "true", KeyVisibility: subA}
	owner := svc("owner", clone(good))
	created, err := e.mgr.Reconcile(ctx, owner, e.fe("fe1"))
	if err != nil {
		t.Fatal(err)
	}
	e.events()
	cases := []struct{ key, value string }{
		{KeyCreate, "yes"},
		{KeyName, "-bad"},
		{KeyResourceGroup, "bad/rg"},
		{KeySubnet, "sub/net"},
		{KeyIPCount, "9"},
		{KeyIPAddresses, "10.0.0.300"},
		{KeyFQDNs, "a..example.com"},
		{KeyProxyProtocol, "on"},
		{KeyVisibility, "not-a-guid"},
		{KeyAutoApproval, subB}, // not visible
	}
	for _, tc := range cases {
		t.Run(tc.key[len(annotations.Prefix):], func(t *testing.T) {
			puts, dels := e.writes()
			// A new Service on fe2: no PLS, no subnet write.
			fresh := svc("fresh", map[string]string{KeyCreate: "true", tc.key: tc.value})
			checkRefused(t, e, fresh, tc.key, func() error { _, err := e.mgr.Reconcile(ctx, fresh, e.fe("fe2")); return err })
			// The owner: a valid change (fqdns; proxy protocol when the
			// bad value is the fqdns') goes with the bad value, so nothing
			// changes.
			ann := clone(good)
			ann[KeyFQDNs] = "new.example.com"
			if tc.key == KeyFQDNs {
				ann[KeyProxyProtocol] = "true"
			}
			ann[tc.key] = tc.value
			owner.Annotations = ann
			checkRefused(t, e, owner, tc.key, func() error { _, err := e.mgr.Reconcile(ctx, owner, e.fe("fe1")); return err })
			if p, d := e.writes(); p != puts || d != dels {
				t.Fatalf("writes: %d PUT and %d DELETE, want none", p-puts, d-dels)
			}
			cur, err := e.client.Get(ctx, rg, *created.Name)
			if err != nil || cur == nil || *cur.Etag != *created.Etag {
				t.Fatalf("the owner's PLS changed: %v", err)
			}
		})
	}
	// A Service sharing the owner's frontend may not configure it.
	sharer := svc("sharer", map[string]string{KeyCreate: "true", KeyFQDNs: "x.example.com"})
	puts, dels := e.writes()
	checkRefused(t, e, sharer, KeyFQDNs, func() error { _, err := e.mgr.Reconcile(ctx, sharer, e.fe("fe1")); return err })
	if p, d := e.writes(); p != puts || d != dels {
		t.Fatalf("a sharing Service's configuration wrote: %d PUT, %d DELETE", p-puts, d-dels)
	}
}

// checkRefused runs reconcile and wants an *annotations.Error for key and
// exactly one Warning InvalidPrivateLinkService event naming key.
func checkRefused(t *testing.T, e *env, s interface{ GetName() string }, key string, reconcile func() error) {
	t.Helper()
	err := reconcile()
	var ae *annotations.Error
	if !errors.As(err, &ae) || ae.Key != key {
		t.Fatalf("%s: error %v does not name %s", s.GetName(), err, key)
	}
	evs := e.events()
	if len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning "+EventReasonInvalid+" ") || !strings.Contains(evs[0], key) {
		t.Fatalf("%s: events %q, want one Warning %s naming %s", s.GetName(), evs, EventReasonInvalid, key)
	}
}

func clone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// A name another frontend's PLS held is refused only after a fresh look:
// that PLS deleted outside this Store since it listed no longer blocks it.
func TestNameConflictRecheckedFresh(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	a := svc("a", map[string]string{KeyCreate: "true", KeyName: "one"})
	if _, err := e.mgr.Reconcile(ctx, a, e.fe("fe1")); err != nil {
		t.Fatal(err)
	}
	b := svc("b", map[string]string{KeyCreate: "true", KeyName: "one"})
	var ae *annotations.Error
	if _, err := e.mgr.Reconcile(ctx, b, e.fe("fe2")); !errors.As(err, &ae) || ae.Key != KeyName {
		t.Fatalf("a name another frontend's PLS holds: %v", err)
	}
	// Deleted outside the Store (its cache still holds it).
	if err := e.client.Delete(ctx, rg, "one"); err != nil {
		t.Fatal(err)
	}
	pls, err := e.mgr.Reconcile(ctx, b, e.fe("fe2"))
	if err != nil || pls == nil || FrontendOf(pls) != e.feID("fe2") {
		t.Fatalf("after the other PLS went: %v", err)
	}
}

// The NAT subnet is read, not guessed (issue 37, item 8): a subnet that does
// not exist and a static NAT address outside its subnet (or one Azure
// reserves there) are refused before anything is sent to Azure, with one
// Warning naming the annotation, and Check says the same with no event.
func TestNATSubnetRead(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	cases := []struct {
		name string
		ann  map[string]string
		key  string
	}{
		{"missing subnet", map[string]string{KeySubnet: "nowhere"}, KeySubnet},
		{"address outside", map[string]string{KeyIPAddresses: "10.0.9.10"}, KeyIPAddresses},
		{"address reserved", map[string]string{KeyIPAddresses: "10.0.0.3"}, KeyIPAddresses},
		{"broadcast", map[string]string{KeyIPAddresses: "10.0.0.255"}, KeyIPAddresses},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ann := map[string]string{KeyCreate: "true"}
			for k, v := range tc.ann {
				ann[k] = v
			}
			s := svc("s", ann)
			puts, dels := e.writes()
			var ae *annotations.Error
			if err := e.mgr.Check(ctx, s, e.fe("fe1")); !errors.As(err, &ae) || ae.Key != tc.key || !strings.Contains(err.Error(), "subnet") {
				t.Fatalf("Check: %v, want an error naming %s and the subnet", err, tc.key)
			}
			if evs := e.events(); len(evs) != 0 {
				t.Fatalf("Check recorded events %q", evs)
			}
			checkRefused(t, e, s, tc.key, func() error { _, err := e.mgr.Reconcile(ctx, s, e.fe("fe1")); return err })
			if p, d := e.writes(); p != puts || d != dels {
				t.Fatalf("writes: %d PUT and %d DELETE, want none", p-puts, d-dels)
			}
		})
	}
	// An address Azure hands out in the subnet is taken.
	s := svc("ok", map[string]string{KeyCreate: "true", KeyIPAddresses: "10.0.0.10"})
	if err := e.mgr.Check(ctx, s, e.fe("fe1")); err != nil {
		t.Fatalf("Check of a usable address: %v", err)
	}
	if _, err := e.mgr.Reconcile(ctx, s, e.fe("fe1")); err != nil {
		t.Fatalf("Reconcile of a usable address: %v", err)
	}
}
