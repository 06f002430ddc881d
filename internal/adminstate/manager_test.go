package adminstate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/apimachinery/pkg/types"

	"github.com/azlb/azlb/internal/lbstore"
)

const (
	down = armnetwork.LoadBalancerBackendAddressAdminStateDown
	none = armnetwork.LoadBalancerBackendAddressAdminStateNone
)

// clusterLayout is a multiple-SLB, dual-stack cluster: two public load
// balancers and an internal one, each with an IPv4 and an IPv6 cluster pool,
// plus an IPv4 local-service pool holding only n1.
func clusterLayout(f *fakeARM) {
	v4 := []addr{{"n1", "10.0.0.1", ""}, {"n2", "10.0.0.2", ""}, {"n3", "10.0.0.3", ""}}
	v6 := []addr{{"n1", "fd00::1", ""}, {"n2", "fd00::2", ""}, {"n3", "fd00::3", ""}}
	for _, lb := range []string{"lb-a", "lb-b", "lb-a-internal"} {
		f.addPool(lb, "kubernetes", v4...)
		f.addPool(lb, "kubernetes-IPv6", v6...)
	}
	f.addPool("lb-b", "default-web", addr{"n1", "10.0.0.1", ""})
}

var (
	n1IPs = []string{"10.0.0.1", "fd00::1"}
	n2IPs = []string{"10.0.0.2", "fd00::2"}
)

func allPools() []lbstore.PoolRef {
	var out []lbstore.PoolRef
	for _, lb := range []string{"lb-a", "lb-a-internal", "lb-b"} {
		out = append(out, lbstore.PoolRef{LoadBalancer: lb, Pool: "kubernetes"}, lbstore.PoolRef{LoadBalancer: lb, Pool: "kubernetes-IPv6"})
	}
	return out
}

func TestManagerResolvesEveryPoolOfTheNode(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	m := newTestManager(t, f)
	res := m.ApplyNodes(context.Background(), []Target{{Node: "n1", UID: "u1", IPs: n1IPs, State: down}})
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	want := append(allPools(), lbstore.PoolRef{LoadBalancer: "lb-b", Pool: "default-web"})
	for _, p := range want {
		ip := "10.0.0.1"
		if p.Pool == "kubernetes-IPv6" {
			ip = "fd00::1"
		}
		if got := f.state(p.LoadBalancer, p.Pool, ip); got != down {
			t.Errorf("%s n1 = %q, want Down", p, got)
		}
		if got := f.state(p.LoadBalancer, p.Pool, "10.0.0.2"); p.Pool == "kubernetes" && got != none {
			t.Errorf("%s n2 = %q, want untouched None", p, got)
		}
		if n := f.putsOf(p.LoadBalancer, p.Pool); n != 1 {
			t.Errorf("%s: %d PUTs, want 1", p, n)
		}
	}
	if len(res[0].Pools) != 7 || res[0].Changed != 7 {
		t.Errorf("result pools=%v changed=%d, want 7 and 7", res[0].Pools, res[0].Changed)
	}
	gets, puts := f.counts()
	if gets != 3 || puts != 7 {
		t.Errorf("gets=%d puts=%d, want 3 and 7 (a GET per pool of lb-b, whose 3 pools are written concurrently; the 2 pools of the others are written from the cache; no 412)", gets, puts)
	}
	if obs, fails := opMetric(t, m.source); obs != 1 || fails != 0 {
		t.Errorf("operation metric: observed %d failures %v, want 1 and 0", obs, fails)
	}
}

func TestManagerTransitions(t *testing.T) {
	tests := []struct {
		name      string
		initial   State
		want      State
		wantPuts  int
		wantState State
	}{
		{"None to Down", "", down, 6, down},
		{"Down to None", down, none, 6, none},
		{"Down stays Down", down, down, 0, down},
		{"None stays None", none, none, 0, none},
		{"unset stays None", "", none, 0, none},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeARM(t)
			for _, lb := range []string{"lb-a", "lb-a-internal", "lb-b"} {
				f.addPool(lb, "kubernetes", addr{"n1", "10.0.0.1", tc.initial}, addr{"n2", "10.0.0.2", ""})
				f.addPool(lb, "kubernetes-IPv6", addr{"n1", "fd00::1", tc.initial})
			}
			m := newTestManager(t, f)
			res := m.ApplyNodes(context.Background(), []Target{{Node: "n1", UID: "u1", IPs: n1IPs, State: tc.want}})
			if res[0].Err != nil {
				t.Fatal(res[0].Err)
			}
			if _, puts := f.counts(); puts != tc.wantPuts {
				t.Errorf("puts = %d, want %d", puts, tc.wantPuts)
			}
			for _, p := range allPools() {
				ip := "10.0.0.1"
				if p.Pool == "kubernetes-IPv6" {
					ip = "fd00::1"
				}
				if got := f.state(p.LoadBalancer, p.Pool, ip); got != tc.wantState {
					t.Errorf("%s = %q, want %q", p, got, tc.wantState)
				}
			}
		})
	}
}

func TestManagerCoalescesNodesIntoOnePutPerPool(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	m := newTestManager(t, f)
	res := m.ApplyNodes(context.Background(), []Target{
		{Node: "n1", UID: "u1", IPs: n1IPs, State: down},
		{Node: "n2", UID: "u2", IPs: n2IPs, State: down},
	})
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("target %d: %v", i, r.Err)
		}
	}
	for _, p := range allPools() {
		if n := f.putsOf(p.LoadBalancer, p.Pool); n != 1 {
			t.Errorf("%s: %d PUTs, want 1 for both nodes", p, n)
		}
		if f.state(p.LoadBalancer, p.Pool, "10.0.0.2") != down && f.state(p.LoadBalancer, p.Pool, "fd00::2") != down {
			t.Errorf("%s: n2 not Down", p)
		}
	}
	if res[1].Changed != 6 || len(res[1].Pools) != 6 {
		t.Errorf("n2 result: pools %v changed %d, want 6 and 6", res[1].Pools, res[1].Changed)
	}
}

func TestManagerLastAppliedCache(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	m := newTestManager(t, f)
	ctx := context.Background()
	n1 := Target{Node: "n1", UID: "u1", IPs: n1IPs, State: down}
	if r := m.ApplyNodes(ctx, []Target{n1}); r[0].Err != nil || r[0].Skipped {
		t.Fatalf("first apply: %+v", r[0])
	}
	gets, puts := f.counts()

	// Same state, same UID: no ARM call.
	calls := len(f.Calls())
	if r := m.ApplyNodes(ctx, []Target{n1}); r[0].Err != nil || !r[0].Skipped {
		t.Fatalf("repeat apply: %+v, want skipped", r[0])
	}
	if n := len(f.Calls()); n != calls {
		t.Errorf("repeat apply made %d calls", n-calls)
	}

	// A replacement node (new UID) with the same addresses is verified.
	r := m.ApplyNodes(ctx, []Target{{Node: "n1", UID: "u1b", IPs: n1IPs, State: down}})
	if r[0].Err != nil || r[0].Skipped {
		t.Fatalf("new UID: %+v, want verified", r[0])
	}
	if g, p := f.counts(); g == gets || p != puts {
		t.Errorf("new UID: gets %d->%d (want more), puts %d->%d (want none)", gets, g, puts, p)
	}

	// Changed addresses are verified too.
	gets, _ = f.counts()
	if r := m.ApplyNodes(ctx, []Target{{Node: "n1", UID: "u1", IPs: []string{"10.0.0.1"}, State: down}}); r[0].Skipped {
		t.Error("changed addresses skipped")
	}
	if g, _ := f.counts(); g == gets {
		t.Error("changed addresses made no GET")
	}

	// Forget drops the memory.
	m.Forget("u1")
	gets, _ = f.counts()
	if r := m.ApplyNodes(ctx, []Target{n1}); r[0].Skipped {
		t.Error("forgotten UID skipped")
	}
	if g, _ := f.counts(); g == gets {
		t.Error("forgotten UID made no GET")
	}

	// A fresh Manager (restart) verifies with GETs and writes nothing.
	m2 := newTestManager(t, f)
	gets, puts = f.counts()
	if r := m2.ApplyNodes(ctx, []Target{n1}); r[0].Err != nil || r[0].Skipped || r[0].Changed != 0 {
		t.Fatalf("restart apply: %+v", r[0])
	}
	if g, p := f.counts(); g != gets+7 || p != puts {
		t.Errorf("restart: gets +%d (want 7), puts +%d (want 0)", g-gets, p-puts)
	}
}

// TestManagerWritesPoolsOfOneLoadBalancerTogether: a load balancer with more
// than two changed pools has them read and written concurrently, without
// If-Match (they share its etag, so with it all but one would fail); one or
// two changed pools are written from the cached load balancer without a
// read, one after another, each with If-Match: the first on the cached
// etag, the second on the etag the first write returned.
func TestManagerWritesPoolsOfOneLoadBalancerTogether(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	f.addPool("lb-solo", "kubernetes", addr{"n1", "10.0.0.1", ""})
	arrived := make(chan string, 3)
	release := make(chan struct{})
	var (
		overlapped bool
		once       sync.Once
	)
	f.onPut = func(lb, pool string) {
		if lb != "lb-b" {
			return
		}
		arrived <- pool
		if len(arrived) == 2 {
			once.Do(func() { overlapped = true; close(release) })
		}
		select {
		case <-release:
		case <-time.After(5 * time.Second): // no other PUT started
		}
	}
	m := newTestManager(t, f)
	before := map[string]string{}
	for _, lb := range []string{"lb-a", "lb-a-internal", "lb-solo"} {
		before[lb] = f.etag(lb)
	}
	res := m.ApplyNodes(context.Background(), []Target{{Node: "n1", UID: "u1", IPs: n1IPs, State: down}})
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if !overlapped {
		t.Error("the pools of lb-b were not written concurrently")
	}
	for _, pool := range []string{"kubernetes", "kubernetes-IPv6", "default-web"} {
		if got := f.ifMatch("lb-b/" + pool); !slices.Equal(got, []string{""}) {
			t.Errorf("lb-b/%s: If-Match %q, want one PUT without it", pool, got)
		}
	}
	for _, lb := range []string{"lb-a", "lb-a-internal"} {
		v4, v6 := f.ifMatch(lb+"/kubernetes"), f.ifMatch(lb+"/kubernetes-IPv6")
		if len(v4) != 1 || len(v6) != 1 {
			t.Errorf("%s: If-Match %q and %q, want one PUT of each pool", lb, v4, v6)
			continue
		}
		first, second := v4[0], v6[0]
		if second == before[lb] {
			first, second = second, first
		}
		if first != before[lb] || second == "" || second == first {
			t.Errorf("%s: If-Match %q then %q, want %s then the etag the first write returned", lb, first, second, before[lb])
		}
	}
	if got := f.ifMatch("lb-solo/kubernetes"); !slices.Equal(got, []string{before["lb-solo"]}) {
		t.Errorf("lb-solo/kubernetes: If-Match %q, want [%s]", got, before["lb-solo"])
	}
	if gets, puts := f.counts(); gets != 3 || puts != 8 {
		t.Errorf("gets=%d puts=%d, want 3 (the pools of lb-b) and 8", gets, puts)
	}
}

func TestManagerConflicts(t *testing.T) {
	tests := []struct {
		name     string
		failures int // consecutive 412s on lb-a/kubernetes
		status   int
		code     string
		wantErr  bool
		wantPuts int
	}{
		{"412 retried with a fresh GET", 1, http.StatusPreconditionFailed, "PreconditionFailed", false, 2},
		{"409 retried", 1, http.StatusConflict, "AnotherOperationInProgress", false, 2},
		{"two 412s retried", 2, http.StatusPreconditionFailed, "PreconditionFailed", false, 3},
		{"three 412s fail the pool", 3, http.StatusPreconditionFailed, "PreconditionFailed", true, 3},
		{"429 is not retried here", 1, http.StatusTooManyRequests, "TooManyRequests", true, 1},
		{"500 is not retried here", 1, http.StatusInternalServerError, "InternalServerError", true, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeARM(t)
			clusterLayout(f)
			left := tc.failures
			f.putErr = func(lb, pool string) error {
				if lb == "lb-a" && pool == "kubernetes" && left > 0 {
					left--
					return respErr(tc.status, tc.code)
				}
				return nil
			}
			m := newTestManager(t, f)
			res := m.ApplyNodes(context.Background(), []Target{
				{Node: "n1", UID: "u1", IPs: n1IPs, State: down},
			})
			if (res[0].Err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", res[0].Err, tc.wantErr)
			}
			if tc.wantErr && !errContains(res[0].Err, "lb-a/kubernetes") {
				t.Errorf("error %q does not name the pool", res[0].Err)
			}
			if n := f.putsOf("lb-a", "kubernetes"); n != tc.wantPuts {
				t.Errorf("PUTs on lb-a/kubernetes = %d, want %d", n, tc.wantPuts)
			}
			if im := f.ifMatch("lb-a/kubernetes"); len(im) >= 2 && im[len(im)-1] == "" {
				t.Errorf("the retry after a conflict has no If-Match (%q)", im)
			}
			// The other pools are written regardless.
			if got := f.state("lb-a", "kubernetes-IPv6", "fd00::1"); got != down {
				t.Errorf("lb-a/kubernetes-IPv6 = %q, want Down", got)
			}
			if got := f.state("lb-b", "kubernetes", "10.0.0.1"); got != down {
				t.Errorf("lb-b/kubernetes = %q, want Down", got)
			}
			wantFail := 0.0
			if tc.wantErr {
				wantFail = 1
				// A failed node is not remembered: the retry verifies.
				if r := m.ApplyNodes(context.Background(), []Target{{Node: "n1", UID: "u1", IPs: n1IPs, State: down}}); r[0].Skipped || r[0].Err != nil {
					t.Errorf("retry after failure: %+v", r[0])
				}
			}
			if _, fails := opMetric(t, m.source); fails != wantFail {
				t.Errorf("failure metric %v, want %v", fails, wantFail)
			}
		})
	}
}

func TestManagerErrorsGoToTheNodesOfThePool(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	// Only n1 is in lb-b/default-web; make that pool fail.
	f.putErr = func(lb, pool string) error {
		if pool == "default-web" {
			return respErr(http.StatusBadRequest, "InvalidResourceReference")
		}
		return nil
	}
	m := newTestManager(t, f)
	res := m.ApplyNodes(context.Background(), []Target{
		{Node: "n1", UID: "u1", IPs: n1IPs, State: down},
		{Node: "n2", UID: "u2", IPs: n2IPs, State: down},
	})
	if !errContains(res[0].Err, "lb-b/default-web", "InvalidResourceReference") {
		t.Errorf("n1 err = %v, want the default-web failure", res[0].Err)
	}
	if res[1].Err != nil {
		t.Errorf("n2 err = %v, want nil (not in the failed pool)", res[1].Err)
	}

	// A pool that cannot be read concerns every node of the batch.
	f2 := newFakeARM(t)
	clusterLayout(f2)
	f2.getErr = func(lb, pool string) error {
		if lb == "lb-b" && pool == "kubernetes" {
			return respErr(http.StatusForbidden, "AuthorizationFailed")
		}
		return nil
	}
	m2 := newTestManager(t, f2)
	res = m2.ApplyNodes(context.Background(), []Target{
		{Node: "n1", UID: "u1", IPs: n1IPs, State: down},
		{Node: "n3", UID: "u3", IPs: []string{"10.0.0.3"}, State: down},
	})
	for i, r := range res {
		if !errContains(r.Err, "lb-b/kubernetes", "AuthorizationFailed") {
			t.Errorf("target %d err = %v, want the unreadable pool", i, r.Err)
		}
	}
}

func TestManagerGonePoolsAreNotErrors(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	f.getErr = func(lb, pool string) error {
		if lb == "lb-a-internal" {
			return respErr(http.StatusNotFound, "ResourceNotFound")
		}
		return nil
	}
	f.putErr = func(lb, pool string) error {
		if lb == "lb-b" && pool == "kubernetes-IPv6" {
			return respErr(http.StatusNotFound, "NotFound")
		}
		return nil
	}
	m := newTestManager(t, f)
	if r := m.ApplyNodes(context.Background(), []Target{{Node: "n1", UID: "u1", IPs: n1IPs, State: down}}); r[0].Err != nil {
		t.Fatalf("err = %v, want nil for pools deleted underneath", r[0].Err)
	}
}

func TestManagerResolveError(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	f.resolveErr = errors.New("get load balancer rg/lb-a: boom")
	m := newTestManager(t, f)
	res := m.ApplyNodes(context.Background(), []Target{{Node: "n1", UID: "u1", IPs: n1IPs, State: down}})
	if !errContains(res[0].Err, "resolve backend pools", "boom") {
		t.Fatalf("err = %v", res[0].Err)
	}
	if g, p := f.counts(); g+p != 0 {
		t.Errorf("pool calls after a resolution failure: %d", g+p)
	}
	f.mu.Lock()
	f.resolveErr = nil
	f.mu.Unlock()
	if _, fails := opMetric(t, m.source); fails != 1 {
		t.Errorf("failure metric = %v, want 1", fails)
	}
	f.mu.Lock()
	f.resolveErr = errors.New("boom")
	f.mu.Unlock()
	if err := m.Apply(context.Background(), map[string]State{"10.0.0.1": down}); !errContains(err, "boom") {
		t.Errorf("Apply err = %v", err)
	}
}

func TestManagerRejectsBadTargets(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	m := newTestManager(t, f)
	res := m.ApplyNodes(context.Background(), []Target{
		{Node: "bad", UID: "ub", IPs: []string{"10.0.0.3"}, State: "Drain"},
		{Node: "n1", UID: "u1", IPs: []string{"10.0.0.1"}, State: down},
		{Node: "dup", UID: "ud", IPs: []string{"10.0.0.1"}, State: none},
		{Node: "n2", UID: "u2", IPs: n2IPs, State: down},
	})
	if !errContains(res[0].Err, "node bad", `"Drain"`) {
		t.Errorf("bad state err = %v", res[0].Err)
	}
	if !errContains(res[1].Err, "10.0.0.1", "n1", "dup") || !errContains(res[2].Err, "10.0.0.1", "n1", "dup") {
		t.Errorf("conflicting claims: %v / %v", res[1].Err, res[2].Err)
	}
	if res[3].Err != nil {
		t.Errorf("n2: %v", res[3].Err)
	}
	if got := f.state("lb-a", "kubernetes", "10.0.0.1"); got != none {
		t.Errorf("contested address written: %q", got)
	}
	if got := f.state("lb-a", "kubernetes", "10.0.0.2"); got != down {
		t.Errorf("n2 = %q, want Down", got)
	}
	if err := m.Apply(context.Background(), map[string]State{"10.0.0.1": "Drain"}); !errContains(err, "10.0.0.1", "Drain") {
		t.Errorf("Apply bad state err = %v", err)
	}
}

func TestManagerApplyByAddress(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	m := newTestManager(t, f)
	ctx := context.Background()
	if err := m.Apply(ctx, map[string]State{"10.0.0.2": down, "FD00::0002": down}); err != nil {
		t.Fatal(err)
	}
	for _, p := range allPools() {
		ip := "10.0.0.2"
		if p.Pool == "kubernetes-IPv6" {
			ip = "fd00::2"
		}
		if got := f.state(p.LoadBalancer, p.Pool, ip); got != down {
			t.Errorf("%s = %q", p, got)
		}
	}
	// Apply has no memory: a repeat GETs again (and writes nothing).
	gets, puts := f.counts()
	if err := m.Apply(ctx, map[string]State{"10.0.0.2": down}); err != nil {
		t.Fatal(err)
	}
	if g, p := f.counts(); g == gets || p != puts {
		t.Errorf("repeat Apply: gets %d->%d puts %d->%d", gets, g, puts, p)
	}
	if err := m.Apply(ctx, nil); err != nil {
		t.Errorf("empty Apply: %v", err)
	}
	f.putErr = func(lb, pool string) error { return respErr(http.StatusBadRequest, "Nope") }
	err := m.Apply(ctx, map[string]State{"10.0.0.3": down})
	for _, p := range []string{"lb-a/kubernetes", "lb-b/kubernetes", "lb-a-internal/kubernetes"} {
		if !errContains(err, p) {
			t.Errorf("Apply error %v does not name %s", err, p)
		}
	}
}

func TestNewManagerValidation(t *testing.T) {
	f := newFakeARM(t)
	if _, err := NewManager(nil, ManagerOptions{}); err == nil {
		t.Error("nil store accepted")
	}
	m, err := NewManager(f.store, ManagerOptions{})
	if err != nil || m.source == "" || m.clock == nil {
		t.Errorf("defaults: %v %+v", err, m)
	}
}

func TestManagerNodeWithoutAddresses(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	m := newTestManager(t, f)
	r := m.ApplyNodes(context.Background(), []Target{{Node: "bare", UID: types.UID("ub"), State: down}})
	if r[0].Err != nil || len(r[0].Pools) != 0 {
		t.Fatalf("%+v", r[0])
	}
	if n := len(f.Calls()); n != 0 {
		t.Errorf("%d ARM calls for a node without addresses", n)
	}
}

// Many nodes in one apply still cost one PUT per pool (written from the
// cached load balancer: no GET).
func TestManagerLargeBatch(t *testing.T) {
	f := newFakeARM(t)
	var v4 []addr
	var targets []Target
	for i := range 300 {
		ip := fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)
		v4 = append(v4, addr{fmt.Sprintf("n%d", i), ip, ""})
		targets = append(targets, Target{Node: fmt.Sprintf("n%d", i), UID: types.UID(fmt.Sprint(i)), IPs: []string{ip}, State: down})
	}
	f.addPool("lb", "kubernetes", v4...)
	m := newTestManager(t, f)
	for i, r := range m.ApplyNodes(context.Background(), targets) {
		if r.Err != nil || r.Changed != 1 {
			t.Fatalf("target %d: %+v", i, r)
		}
	}
	if g, p := f.counts(); g != 0 || p != 1 {
		t.Errorf("gets %d puts %d, want 0 and 1", g, p)
	}
}

// A node the pool-entry policy puts in pools but that the cache places in
// none (a pool written outside azlb, or a read the cache has not seen) is
// looked up again in Azure: the Manager never reports "Down on 0 pools"
// for a node that is in fact in rotation.
func TestManagerLooksAgainInAzureForAPooledNodeFoundNowhere(t *testing.T) {
	f := newFakeARM(t)
	f.addPool("lb-a", "kubernetes", addr{"n2", "10.0.0.2", ""})
	m := newTestManager(t, f)
	ctx := context.Background()
	// Warm the cache: n1 is in no pool yet.
	if refs, err := f.store.PoolsWith(ctx, []string{"10.0.0.1"}, lbstore.Cached); err != nil || len(refs) != 0 {
		t.Fatalf("PoolsWith = %v, %v", refs, err)
	}
	// n1 joins the pool behind the cache's back.
	f.addPool("lb-a", "kubernetes", addr{"n1", "10.0.0.1", ""}, addr{"n2", "10.0.0.2", ""})

	res := m.ApplyNodes(ctx, []Target{{Node: "n1", UID: "u1", IPs: []string{"10.0.0.1"}, State: down, Pooled: true}})
	if res[0].Err != nil || len(res[0].Pools) != 1 || res[0].Changed != 1 {
		t.Fatalf("result %+v, want Down on lb-a/kubernetes", res[0])
	}
	if got := f.state("lb-a", "kubernetes", "10.0.0.1"); got != down {
		t.Errorf("n1 = %q, want Down", got)
	}

	// A node the policy keeps out of pools (Pooled false) found nowhere is
	// done without looking again; a pooled one found nowhere even in Azure
	// is done after one look.
	f.ResetCalls()
	res = m.ApplyNodes(ctx, []Target{{Node: "cp", UID: "ucp", IPs: []string{"10.0.0.9"}, State: down}})
	if res[0].Err != nil || len(res[0].Pools) != 0 || len(f.Calls()) != 0 {
		t.Errorf("unpooled node: %+v, calls %v", res[0], f.Calls())
	}
	res = m.ApplyNodes(ctx, []Target{{Node: "new", UID: "unew", IPs: []string{"10.0.0.8"}, State: down, Pooled: true}})
	if res[0].Err != nil || len(res[0].Pools) != 0 || f.Count("lb.get", "") == 0 {
		t.Errorf("pooled node in no pool: %+v, calls %v; want success after reading Azure", res[0], f.Calls())
	}
}
