package lbstore_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/testutil"
)

var down = armnetwork.LoadBalancerBackendAddressAdminStateDown

// setState is an edit setting the admin state of the entry with the IP.
func setState(ip string, st armnetwork.LoadBalancerBackendAddressAdminState) func(*armnetwork.BackendAddressPool) (bool, error) {
	return func(p *armnetwork.BackendAddressPool) (bool, error) {
		for _, a := range p.Properties.LoadBalancerBackendAddresses {
			if *a.Properties.IPAddress == ip {
				if a.Properties.AdminState != nil && *a.Properties.AdminState == st {
					return false, nil
				}
				a.Properties.AdminState = to.Ptr(st)
				return true, nil
			}
		}
		return false, nil
	}
}

func edit(lb, pool string, fn func(*armnetwork.BackendAddressPool) (bool, error)) lbstore.PoolEdit {
	return lbstore.PoolEdit{Ref: lbstore.PoolRef{LoadBalancer: lb, Pool: pool}, Edit: fn}
}

func seedTwoPools(f *testutil.FakeARM) {
	f.SeedPool(lbName, "kubernetes", testutil.Entry{Name: "n1", IP: "10.0.0.1"}, testutil.Entry{Name: "n2", IP: "10.0.0.2"})
	f.SeedPool(lbName, "kubernetes-IPv6", testutil.Entry{Name: "n1", IP: "fd00::1"})
}

func TestOnePoolIsWrittenWithIfMatch(t *testing.T) {
	f := testutil.NewFakeARM()
	seedTwoPools(f)
	s := newStore(t, f, nil)
	res := s.UpdatePools(context.Background(), "t", []lbstore.PoolEdit{edit(lbName, "kubernetes", setState("10.0.0.1", down))}, lbstore.PoolOptions{})
	if r := res[0]; r.Err != nil || !r.Written || r.Pool == nil {
		t.Fatalf("result %+v", r)
	}
	if f.AdminState(lbName, "kubernetes", "10.0.0.1") != down || f.AdminState(lbName, "kubernetes", "10.0.0.2") != "None" {
		t.Error("only the entry edited changes")
	}
	puts := callsOf(f, "pool.put")
	if len(puts) != 1 || puts[0].IfMatch == "" || f.Count("pool.get", "") != 1 {
		t.Errorf("calls %v: want one fresh GET and one PUT with If-Match", f.Calls())
	}
}

func callsOf(f *testutil.FakeARM, op string) []testutil.Call {
	var out []testutil.Call
	for _, c := range f.Calls() {
		if c.Op == op {
			out = append(out, c)
		}
	}
	return out
}

func TestPoolsOfOneLoadBalancerAreWrittenTogether(t *testing.T) {
	f := testutil.NewFakeARM()
	seedTwoPools(f)
	// Both PUTs must be in flight at once.
	var mu sync.Mutex
	inFlight, both := 0, make(chan struct{})
	f.Before = func(c testutil.Call) {
		if c.Op != "pool.put" {
			return
		}
		mu.Lock()
		inFlight++
		if inFlight == 2 {
			close(both)
		}
		mu.Unlock()
		select {
		case <-both:
		case <-time.After(5 * time.Second):
		}
	}
	s := newStore(t, f, nil)
	res := s.UpdatePools(context.Background(), "t", []lbstore.PoolEdit{
		edit(lbName, "kubernetes", setState("10.0.0.1", down)),
		edit(lbName, "kubernetes-IPv6", setState("fd00::1", down)),
	}, lbstore.PoolOptions{})
	for _, r := range res {
		if r.Err != nil || !r.Written {
			t.Fatalf("result %+v", r)
		}
	}
	select {
	case <-both:
	default:
		t.Fatal("the two PUTs did not overlap")
	}
	for _, c := range callsOf(f, "pool.put") {
		if c.IfMatch != "" {
			t.Errorf("PUT %s with If-Match %q: pools of one load balancer written together go without it", c.Pool, c.IfMatch)
		}
	}
}

func TestEditsOfOnePoolShareOneWrite(t *testing.T) {
	f := testutil.NewFakeARM()
	seedTwoPools(f)
	s := newStore(t, f, nil)
	boom := errors.New("bad edit")
	res := s.UpdatePools(context.Background(), "t", []lbstore.PoolEdit{
		edit(lbName, "kubernetes", setState("10.0.0.1", down)),
		edit(lbName, "KUBERNETES", func(*armnetwork.BackendAddressPool) (bool, error) { return false, boom }),
		edit(lbName, "kubernetes", setState("10.0.0.2", down)),
	}, lbstore.PoolOptions{})
	if res[0].Err != nil || !res[0].Written || res[2].Err != nil || !res[2].Written {
		t.Errorf("good edits: %+v, %+v", res[0], res[2])
	}
	if !errors.Is(res[1].Err, boom) || res[1].Written {
		t.Errorf("bad edit: %+v, want only its own error", res[1])
	}
	if f.Count("pool.get", "") != 1 || f.Count("pool.put", "") != 1 {
		t.Errorf("calls %v, want one GET and one PUT", f.Calls())
	}
	if f.AdminState(lbName, "kubernetes", "10.0.0.1") != down || f.AdminState(lbName, "kubernetes", "10.0.0.2") != down {
		t.Error("both good edits applied")
	}
}

func TestPoolConflictIsRetriedWithAFreshRead(t *testing.T) {
	f := testutil.NewFakeARM()
	seedTwoPools(f)
	s := newStore(t, f, nil)
	// Between our GET and PUT, someone else adds an entry.
	once := sync.Once{}
	f.Before = func(c testutil.Call) {
		if c.Op == "pool.put" {
			once.Do(func() {
				f.SeedPool(lbName, "kubernetes", testutil.Entry{Name: "n1", IP: "10.0.0.1"}, testutil.Entry{Name: "n2", IP: "10.0.0.2"},
					testutil.Entry{Name: "n3", IP: "10.0.0.3"})
			})
		}
	}
	res := s.UpdatePools(context.Background(), "t", []lbstore.PoolEdit{edit(lbName, "kubernetes", setState("10.0.0.1", down))}, lbstore.PoolOptions{})
	if res[0].Err != nil || !res[0].Written {
		t.Fatalf("result %+v", res[0])
	}
	if f.AdminState(lbName, "kubernetes", "10.0.0.3") != "None" || f.AdminState(lbName, "kubernetes", "10.0.0.1") != down {
		t.Error("the retry must keep the foreign entry and apply ours")
	}
	puts := callsOf(f, "pool.put")
	if len(puts) != 2 || puts[0].IfMatch == "" || puts[1].IfMatch == "" || puts[0].IfMatch == puts[1].IfMatch {
		t.Errorf("PUTs %v: want a 412, then a PUT with the fresh etag", puts)
	}
}

func TestMissingPoolIsNotAnError(t *testing.T) {
	f := testutil.NewFakeARM()
	seedTwoPools(f)
	s := newStore(t, f, nil)
	res := s.UpdatePools(context.Background(), "t", []lbstore.PoolEdit{
		edit(lbName, "gone", setState("10.0.0.1", down)),
		edit("no-such-lb", "kubernetes", setState("10.0.0.1", down)),
	}, lbstore.PoolOptions{})
	for _, r := range res {
		if !r.Missing || r.Err != nil || r.Written {
			t.Errorf("result %+v, want Missing", r)
		}
	}
}

func TestTrustCacheSkipsUnchangedPools(t *testing.T) {
	f := testutil.NewFakeARM()
	seedTwoPools(f)
	s := newStore(t, f, nil)
	ctx := context.Background()
	if _, err := s.Get(ctx, lbName); err != nil {
		t.Fatal(err)
	}
	f.ResetCalls()
	noop := func(*armnetwork.BackendAddressPool) (bool, error) { return false, nil }
	res := s.UpdatePools(ctx, "t", []lbstore.PoolEdit{edit(lbName, "kubernetes", noop)}, lbstore.PoolOptions{TrustCache: true})
	if res[0].Err != nil || res[0].Written || res[0].Pool == nil || len(f.Calls()) != 0 {
		t.Errorf("result %+v, calls %v: want the cached pool and no call", res[0], f.Calls())
	}
	// Without TrustCache the pool is verified.
	s.UpdatePools(ctx, "t", []lbstore.PoolEdit{edit(lbName, "kubernetes", noop)}, lbstore.PoolOptions{})
	if f.Count("pool.get", "") != 1 {
		t.Errorf("calls %v, want one GET", f.Calls())
	}
}

func TestPoolWriteKeepsTheCacheCoherent(t *testing.T) {
	f := testutil.NewFakeARM()
	seedTwoPools(f)
	s := newStore(t, f, nil)
	ctx := context.Background()
	if _, err := s.Managed(ctx); err != nil { // lists, and so caches, the load balancers
		t.Fatal(err)
	}
	s.UpdatePools(ctx, "t", []lbstore.PoolEdit{edit(lbName, "kubernetes", func(p *armnetwork.BackendAddressPool) (bool, error) {
		p.Properties.LoadBalancerBackendAddresses = p.Properties.LoadBalancerBackendAddresses[:1] // drop n2
		return true, nil
	})}, lbstore.PoolOptions{})
	f.ResetCalls()
	// The cached load balancer has the new pool and etag: no read, and a
	// load balancer write right after carries the current etag (no 412).
	refs, err := s.PoolsWith(ctx, []string{"10.0.0.2"}, lbstore.Cached)
	if err != nil || len(refs) != 0 {
		t.Errorf("PoolsWith(n2) = %v, %v; want none after n2 was removed", refs, err)
	}
	if _, err := s.UpdateLB(ctx, "t", lbName, lbstore.UpdateOptions{}, addFrontend("fe-0")); err != nil {
		t.Fatal(err)
	}
	if got := f.Calls(); len(got) != 1 || got[0].Op != "lb.put" {
		t.Errorf("calls %v, want a single load balancer PUT", got)
	}
	if p := f.Pool(lbName, "kubernetes"); len(p.Properties.LoadBalancerBackendAddresses) != 1 {
		t.Error("the load balancer write must not put n2 back")
	}
}

// TestStaleReadCannotOverwriteAWrite is the race behind a node that stayed
// in rotation: a load balancer GET that started before a pool write and
// finished after it must not replace the cache, or the membership index
// loses the node and the admin state finds no pool for it.
func TestStaleReadCannotOverwriteAWrite(t *testing.T) {
	f := testutil.NewFakeARM()
	f.SeedPool(lbName, "kubernetes", testutil.Entry{Name: "n1", IP: "10.0.0.1"})
	g := newGate("lb.get")
	f.Answer = g.before // the first GET answers the state before the write, late
	s := newStore(t, f, func(c *config.Config) { c.LoadBalancerCacheTTLInSeconds = 3600 })
	ctx := context.Background()
	if _, err := s.Managed(ctx); err != nil {
		t.Fatal(err)
	}
	s.Forget(lbName) // so that the next Get reads from ARM

	read := make(chan error, 1)
	go func() { _, err := s.Get(ctx, lbName); read <- err }()
	<-g.waiting
	// While the GET is in flight, node n2 joins the pool.
	res := s.UpdatePools(ctx, "t", []lbstore.PoolEdit{edit(lbName, "kubernetes", func(p *armnetwork.BackendAddressPool) (bool, error) {
		p.Properties.LoadBalancerBackendAddresses = append(p.Properties.LoadBalancerBackendAddresses,
			&armnetwork.LoadBalancerBackendAddress{Name: to.Ptr("n2"), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: to.Ptr("10.0.0.2")}})
		return true, nil
	})}, lbstore.PoolOptions{})
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	// The old GET answers now, without n2.
	close(g.release)
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	refs, err := s.PoolsWith(ctx, []string{"10.0.0.2"}, lbstore.Cached)
	if err != nil || len(refs) != 1 || refs[0].Pool != "kubernetes" {
		t.Errorf("PoolsWith(n2) = %v, %v; want kubernetes: the stale read must not have replaced the cache", refs, err)
	}
}

func TestPoolsWithFromAzureSeesWhatTheCacheMissed(t *testing.T) {
	f := testutil.NewFakeARM()
	f.SeedPool(lbName, "kubernetes")
	s := newStore(t, f, func(c *config.Config) { c.LoadBalancerCacheTTLInSeconds = 3600 })
	ctx := context.Background()
	if refs, err := s.PoolsWith(ctx, []string{"10.0.0.1"}, lbstore.Cached); err != nil || len(refs) != 0 {
		t.Fatalf("PoolsWith = %v, %v", refs, err)
	}
	// Changed outside azlb: the cache cannot know.
	f.SeedPool(lbName, "kubernetes", testutil.Entry{Name: "n1", IP: "10.0.0.1"})
	if refs, _ := s.PoolsWith(ctx, []string{"10.0.0.1"}, lbstore.Cached); len(refs) != 0 {
		t.Fatalf("cached answer = %v (the test relies on the cache)", refs)
	}
	refs, err := s.PoolsWith(ctx, []string{"10.0.0.1"}, lbstore.FromAzure)
	if err != nil || len(refs) != 1 {
		t.Errorf("FromAzure = %v, %v; want the pool", refs, err)
	}
	if lb, ok, err := s.FindPool(ctx, "KUBERNETES"); err != nil || !ok || lb != lbName {
		t.Errorf("FindPool = %q, %v, %v", lb, ok, err)
	}
}

// TestConcurrentReadsAndWritesStayCoherent runs readers and writers
// together (run it with -race): after the writes settle, the cache agrees
// with ARM about every pool's membership.
func TestConcurrentReadsAndWritesStayCoherent(t *testing.T) {
	f := testutil.NewFakeARM()
	for _, lb := range []string{"a", "b"} {
		f.SeedPool(lb, "kubernetes")
		f.SeedPool(lb, "kubernetes-IPv6")
	}
	s := newStore(t, f, func(c *config.Config) {
		c.LoadBalancerCacheTTLInSeconds = 3600
		c.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{{Name: "kubernetes"}, {Name: "a"}, {Name: "b"}}
	})
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.PoolsWith(ctx, []string{"10.0.0.1"}, lbstore.FromAzure); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for i := range 40 {
		lb := []string{"a", "b"}[i%2]
		pool := []string{"kubernetes", "kubernetes-IPv6"}[i/2%2]
		ip := "10.0.0." + string(rune('1'+i%5))
		add := i%3 != 0
		res := s.UpdatePools(ctx, "t", []lbstore.PoolEdit{edit(lb, pool, func(p *armnetwork.BackendAddressPool) (bool, error) {
			var keep []*armnetwork.LoadBalancerBackendAddress
			has := false
			for _, a := range p.Properties.LoadBalancerBackendAddresses {
				if *a.Properties.IPAddress == ip {
					has = true
					if !add {
						continue
					}
				}
				keep = append(keep, a)
			}
			if add && !has {
				keep = append(keep, &armnetwork.LoadBalancerBackendAddress{Name: to.Ptr(ip), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: to.Ptr(ip)}})
			}
			changed := len(keep) != len(p.Properties.LoadBalancerBackendAddresses)
			p.Properties.LoadBalancerBackendAddresses = keep
			return changed, nil
		})}, lbstore.PoolOptions{})
		if res[0].Err != nil {
			t.Fatal(res[0].Err)
		}
	}
	close(stop)
	wg.Wait()
	for i := 1; i <= 5; i++ {
		ip := "10.0.0." + string(rune('0'+i))
		cached, err := s.PoolsWith(ctx, []string{ip}, lbstore.Cached)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, lb := range []string{"a", "b"} {
			for _, pool := range []string{"kubernetes", "kubernetes-IPv6"} {
				for _, a := range f.Pool(lb, pool).Properties.LoadBalancerBackendAddresses {
					if *a.Properties.IPAddress == ip {
						want = append(want, lb+"/"+pool)
					}
				}
			}
		}
		var got []string
		for _, r := range cached {
			got = append(got, r.String())
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: cache says %v, ARM holds %v", ip, got, want)
		}
	}
}

func TestPoolWriteErrorNamesThePool(t *testing.T) {
	f := testutil.NewFakeARM()
	seedTwoPools(f)
	f.Fail = func(c testutil.Call) error {
		if c.Op == "pool.put" {
			return testutil.RespErr(http.StatusBadRequest, "InvalidResourceReference")
		}
		return nil
	}
	s := newStore(t, f, nil)
	res := s.UpdatePools(context.Background(), "t", []lbstore.PoolEdit{edit(lbName, "kubernetes", setState("10.0.0.1", down))}, lbstore.PoolOptions{})
	if err := res[0].Err; err == nil || !strings.Contains(err.Error(), "backend pool kubernetes of load balancer rg/kubernetes") || res[0].Written {
		t.Errorf("result %+v, want an error naming the pool", res[0])
	}
}

// TestPoolWriteOmitsReadOnlyIPConfigurations: a NIC-based pool's
// backendIPConfigurations (read-only, one per member) are not sent; the
// pool the store holds keeps them.
func TestPoolWriteOmitsReadOnlyIPConfigurations(t *testing.T) {
	cfgs := []*armnetwork.InterfaceIPConfiguration{{ID: to.Ptr("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/n/ipConfigurations/c")}}
	p := &armnetwork.BackendAddressPool{Name: to.Ptr("kubernetes"), Etag: to.Ptr(`W/"1"`), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
		BackendIPConfigurations: cfgs, DrainPeriodInSeconds: to.Ptr[int32](5),
		LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{{Name: to.Ptr("a")}}}}
	body := lbstore.WriteBody(p)
	if body.Properties.BackendIPConfigurations != nil {
		t.Error("backendIPConfigurations are sent")
	}
	if *body.Name != "kubernetes" || *body.Etag != `W/"1"` || *body.Properties.DrainPeriodInSeconds != 5 || len(body.Properties.LoadBalancerBackendAddresses) != 1 {
		t.Errorf("body %+v lost other fields", body.Properties)
	}
	if len(p.Properties.BackendIPConfigurations) != 1 {
		t.Error("the pool itself lost its backendIPConfigurations")
	}
	if b := lbstore.WriteBody(&armnetwork.BackendAddressPool{Name: to.Ptr("x")}); b.Properties != nil || *b.Name != "x" {
		t.Errorf("a pool without properties: %+v", b)
	}
}
