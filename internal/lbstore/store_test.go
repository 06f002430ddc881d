package lbstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"go.uber.org/goleak"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const lbName = "kubernetes"

func newStore(t *testing.T, f *testutil.FakeARM, mutate func(*config.Config)) *lbstore.Store {
	t.Helper()
	return testutil.StartStore(t, lbstore.Options{Config: testutil.FakeConfig(t, mutate), LoadBalancers: f.LoadBalancers(), Pools: f.Pools()})
}

// addFrontend is a mutation adding a frontend (and marking the caller).
func addFrontend(name string) lbstore.Mutation {
	return func(lb *armnetwork.LoadBalancer) (bool, error) {
		for _, fe := range lb.Properties.FrontendIPConfigurations {
			if *fe.Name == name {
				return false, nil
			}
		}
		lb.Properties.FrontendIPConfigurations = append(lb.Properties.FrontendIPConfigurations,
			&armnetwork.FrontendIPConfiguration{Name: to.Ptr(name)})
		return true, nil
	}
}

func frontends(lb *armnetwork.LoadBalancer) []string {
	var out []string
	if lb != nil && lb.Properties != nil {
		for _, fe := range lb.Properties.FrontendIPConfigurations {
			out = append(out, *fe.Name)
		}
	}
	return out
}

// gate blocks calls with the op until released, and says when one waits.
type gate struct {
	op      string
	waiting chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGate(op string) *gate {
	return &gate{op: op, waiting: make(chan struct{}), release: make(chan struct{})}
}

func (g *gate) before(c testutil.Call) {
	if c.Op != g.op {
		return
	}
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.waiting)
		<-g.release
	}
}

// blockFirstWrite starts a change whose load balancer PUT blocks until the
// returned release is called, and returns once it blocks: changes made
// meanwhile queue for the next round. first receives its error.
func blockFirstWrite(t *testing.T, s *lbstore.Store, f *testutil.FakeARM) (release func(), first <-chan error) {
	t.Helper()
	g := newGate("lb.put")
	f.Before = g.before
	errs := make(chan error, 1)
	go func() {
		_, err := s.UpdateLB(context.Background(), "first", lbName, lbstore.UpdateOptions{Create: true}, addFrontend("fe-0"))
		errs <- err
	}()
	<-g.waiting
	return func() { close(g.release) }, errs
}

func TestConcurrentChangesShareOneWrite(t *testing.T) {
	f := testutil.NewFakeARM()
	s := newStore(t, f, nil)
	ctx := context.Background()

	// The first change's write blocks; ten more queue meanwhile and must be
	// written together in the next round: one more PUT, not ten.
	release, first := blockFirstWrite(t, s, f)
	errs := make(chan error, 10)
	for i := 1; i <= 10; i++ {
		go func() {
			_, err := s.UpdateLB(ctx, "later", lbName, lbstore.UpdateOptions{Create: true}, addFrontend(fmt.Sprintf("fe-%d", i)))
			errs <- err
		}()
	}
	testutil.Poll(t, 5*time.Second, "ten changes queued", func() bool { return s.Queued() == 10 })
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := f.Count("lb.put", ""); got != 2 {
		t.Errorf("PUTs = %d, want 2 (the first change, then the ten queued ones together)", got)
	}
	if got := len(frontends(f.LB(lbName))); got != 11 {
		t.Errorf("frontends = %d, want 11", got)
	}
}

func TestMutationErrorStaysWithItsCaller(t *testing.T) {
	f := testutil.NewFakeARM()
	s := newStore(t, f, nil)
	ctx := context.Background()
	boom := errors.New("invalid annotation")
	release, first := blockFirstWrite(t, s, f)
	type res struct {
		lb  *armnetwork.LoadBalancer
		err error
	}
	good, bad := make(chan res, 1), make(chan res, 1)
	go func() {
		lb, err := s.UpdateLB(ctx, "good", lbName, lbstore.UpdateOptions{}, addFrontend("fe-good"))
		good <- res{lb, err}
	}()
	go func() {
		lb, err := s.UpdateLB(ctx, "bad", lbName, lbstore.UpdateOptions{}, func(*armnetwork.LoadBalancer) (bool, error) { return false, boom })
		bad <- res{lb, err}
	}()
	testutil.Poll(t, 5*time.Second, "two changes queued", func() bool { return s.Queued() == 2 })
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if r := <-bad; !errors.Is(r.err, boom) || r.lb != nil {
		t.Errorf("bad change: lb %v, err %v; want only its own error", r.lb, r.err)
	}
	r := <-good
	if r.err != nil || len(frontends(r.lb)) != 2 {
		t.Errorf("good change: frontends %v, err %v; want it written beside fe-0", frontends(r.lb), r.err)
	}
	if got := f.Count("lb.put", ""); got != 2 {
		t.Errorf("PUTs = %d, want 2", got)
	}
}

func TestStoppedStoreWritesNothing(t *testing.T) {
	f := testutil.NewFakeARM()
	g := newGate("lb.put")
	f.Before = g.before
	s, err := lbstore.New(lbstore.Options{Config: testutil.FakeConfig(t, nil), LoadBalancers: f.LoadBalancers(), Pools: f.Pools()})
	if err != nil {
		t.Fatal(err)
	}
	leader, lost := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); s.Run(leader) }()
	ctx := context.Background()

	first := make(chan error, 1)
	go func() {
		_, err := s.UpdateLB(ctx, "first", lbName, lbstore.UpdateOptions{Create: true}, addFrontend("fe-0"))
		first <- err
	}()
	<-g.waiting
	queued := make(chan error, 1)
	go func() {
		_, err := s.UpdateLB(ctx, "queued", lbName, lbstore.UpdateOptions{}, addFrontend("fe-1"))
		queued <- err
	}()
	testutil.Poll(t, 5*time.Second, "a change queued", func() bool { return s.Queued() == 1 })

	lost() // leadership ends while a write is in flight and another waits
	close(g.release)
	<-runDone
	<-first // the write in flight finishes (its result does not matter here)
	if err := <-queued; !errors.Is(err, lbstore.ErrStopped) {
		t.Errorf("queued change: err %v, want ErrStopped", err)
	}
	if _, err := s.UpdateLB(ctx, "late", lbName, lbstore.UpdateOptions{}, addFrontend("fe-2")); !errors.Is(err, lbstore.ErrStopped) {
		t.Errorf("change after stop: err %v, want ErrStopped", err)
	}
	if got := f.Count("lb.put", ""); got != 1 {
		t.Errorf("PUTs = %d, want 1: nothing is written after the store stopped", got)
	}
}

func TestCallerGivingUpDoesNotFailOthers(t *testing.T) {
	f := testutil.NewFakeARM()
	s := newStore(t, f, nil)
	ctx := context.Background()
	release, first := blockFirstWrite(t, s, f)
	quitter, quit := context.WithCancel(ctx)
	gaveUp, stayed := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := s.UpdateLB(quitter, "quitter", lbName, lbstore.UpdateOptions{}, addFrontend("fe-quit"))
		gaveUp <- err
	}()
	go func() {
		_, err := s.UpdateLB(ctx, "stayer", lbName, lbstore.UpdateOptions{}, addFrontend("fe-stay"))
		stayed <- err
	}()
	testutil.Poll(t, 5*time.Second, "two changes queued", func() bool { return s.Queued() == 2 })
	quit()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Errorf("quitter: err %v, want context.Canceled", err)
	}
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-stayed; err != nil {
		t.Errorf("stayer: %v", err)
	}
	got := strings.Join(frontends(f.LB(lbName)), ",")
	if got != "fe-0,fe-stay" {
		t.Errorf("frontends = %s, want fe-0,fe-stay (the withdrawn change is not written)", got)
	}
}

func TestLoadBalancerConflictIsRetriedWithAFreshRead(t *testing.T) {
	f := testutil.NewFakeARM()
	s := newStore(t, f, nil)
	ctx := context.Background()
	if _, err := s.UpdateLB(ctx, "t", lbName, lbstore.UpdateOptions{Create: true}, addFrontend("fe-0")); err != nil {
		t.Fatal(err)
	}
	// Someone else changes the load balancer: the cached etag is stale.
	other := f.LB(lbName)
	other.Properties.FrontendIPConfigurations = append(other.Properties.FrontendIPConfigurations, &armnetwork.FrontendIPConfiguration{Name: to.Ptr("fe-foreign")})
	f.Seed(other)
	f.ResetCalls()

	out, err := s.UpdateLB(ctx, "t", lbName, lbstore.UpdateOptions{}, addFrontend("fe-1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(frontends(out), ","); got != "fe-0,fe-foreign,fe-1" {
		t.Errorf("frontends = %s: the foreign change must survive", got)
	}
	var ops []string
	for _, c := range f.Calls() {
		ops = append(ops, c.Op+"("+c.IfMatch+")")
	}
	if len(ops) != 3 || !strings.HasPrefix(ops[0], "lb.put(W/") || ops[1] != "lb.get()" || !strings.HasPrefix(ops[2], "lb.put(W/") {
		t.Errorf("calls = %v, want PUT with If-Match, 412, GET, PUT with the new If-Match", ops)
	}
}

func TestConflictsGiveUpAfterTheRetries(t *testing.T) {
	f := testutil.NewFakeARM()
	s := newStore(t, f, nil)
	ctx := context.Background()
	if _, err := s.UpdateLB(ctx, "t", lbName, lbstore.UpdateOptions{Create: true}, addFrontend("fe-0")); err != nil {
		t.Fatal(err)
	}
	f.Fail = func(c testutil.Call) error {
		if c.Op == "lb.put" {
			return testutil.RespErr(http.StatusConflict, "AnotherOperationInProgress")
		}
		return nil
	}
	f.ResetCalls()
	_, err := s.UpdateLB(ctx, "t", lbName, lbstore.UpdateOptions{}, addFrontend("fe-1"))
	if azure.Classify(err) != azure.ClassConflict || !strings.Contains(err.Error(), lbName) {
		t.Fatalf("err = %v, want a conflict naming the load balancer", err)
	}
	if got := f.Count("lb.put", ""); got != lbstore.MaxConflictRetries+1 {
		t.Errorf("PUTs = %d, want %d", got, lbstore.MaxConflictRetries+1)
	}
}

func TestLoadBalancerWithoutFrontendsIsDeleted(t *testing.T) {
	f := testutil.NewFakeARM()
	s := newStore(t, f, nil)
	ctx := context.Background()
	if _, err := s.UpdateLB(ctx, "t", lbName, lbstore.UpdateOptions{Create: true}, addFrontend("fe-0")); err != nil {
		t.Fatal(err)
	}
	out, err := s.UpdateLB(ctx, "t", lbName, lbstore.UpdateOptions{}, func(lb *armnetwork.LoadBalancer) (bool, error) {
		lb.Properties.FrontendIPConfigurations = nil
		return true, nil
	})
	if err != nil || out != nil || f.LB(lbName) != nil {
		t.Fatalf("out %v, err %v, left %v: want the load balancer deleted", out, err, f.LB(lbName))
	}
	if got, err := s.Get(ctx, lbName); err != nil || got != nil {
		t.Errorf("Get after delete = %v, %v; want nil from the cache", got, err)
	}
	// A change that may not create it does nothing.
	f.ResetCalls()
	if out, err := s.UpdateLB(ctx, "t", lbName, lbstore.UpdateOptions{}, addFrontend("fe-1")); err != nil || out != nil {
		t.Errorf("out %v, err %v", out, err)
	}
	if n := len(f.Calls()); n != 0 {
		t.Errorf("calls = %v, want none", f.Calls())
	}
}

func TestCreatedLoadBalancerIsTaggedStandard(t *testing.T) {
	f := testutil.NewFakeARM()
	s := newStore(t, f, nil)
	if _, err := s.UpdateLB(context.Background(), "t", lbName, lbstore.UpdateOptions{Create: true}, addFrontend("fe-0")); err != nil {
		t.Fatal(err)
	}
	lb := f.LB(lbName)
	if *lb.SKU.Name != armnetwork.LoadBalancerSKUNameStandard || *lb.Location != "eastus" || *lb.Tags["k8s-azure-cluster-name"] != "kubernetes" {
		t.Errorf("created %+v, want Standard in eastus tagged with the cluster", lb)
	}
}

func TestManagedIncludesLoadBalancersLeftInAzure(t *testing.T) {
	f := testutil.NewFakeARM()
	// "old" was a multiple-SLB configuration that has been removed: it holds
	// the cluster pool. "tagged" carries the cluster tag. "foreign" and a
	// Basic one with the cluster pool are not azlb's.
	f.SeedPool("old", "kubernetes")
	f.SeedPool("old-internal", "kubernetes-IPv6")
	f.Seed(&armnetwork.LoadBalancer{Name: to.Ptr("tagged"), SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Tags: map[string]*string{"k8s-azure-cluster-name": to.Ptr("kubernetes")}})
	f.SeedPool("foreign", "web")
	f.SeedPool("basic", "kubernetes")
	basic := f.LB("basic")
	basic.SKU.Name = to.Ptr(armnetwork.LoadBalancerSKUNameBasic)
	f.Seed(basic)
	f.SeedPool("kubernetes", "kubernetes")

	s := newStore(t, f, nil)
	got, err := s.Managed(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := "kubernetes,kubernetes-internal,old,old-internal,tagged"; strings.Join(got, ",") != want {
		t.Errorf("Managed = %v, want %s", got, want)
	}
	// One listing, which also filled the cache of the configured one.
	f.ResetCalls()
	if lb, err := s.Get(context.Background(), "kubernetes"); err != nil || lb == nil {
		t.Fatalf("Get = %v, %v", lb, err)
	}
	if _, err := s.Managed(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(f.Calls()); n != 0 {
		t.Errorf("calls after the first listing = %v, want none", f.Calls())
	}
	if !s.IsConfigured("KUBERNETES-internal") || s.IsConfigured("old") {
		t.Error("IsConfigured: configured names only, case-insensitively")
	}
}

func TestManagedListingFailureIsRetried(t *testing.T) {
	f := testutil.NewFakeARM()
	calls := atomic.Int32{}
	f.Fail = func(c testutil.Call) error {
		if c.Op == "lb.list" && calls.Add(1) == 1 {
			return testutil.RespErr(http.StatusInternalServerError, "InternalServerError")
		}
		return nil
	}
	s := newStore(t, f, nil)
	if _, err := s.Managed(context.Background()); err == nil || !strings.Contains(err.Error(), "list load balancers in rg") {
		t.Fatalf("err = %v, want the listing error naming the resource group", err)
	}
	if got, err := s.Managed(context.Background()); err != nil || len(got) != 2 {
		t.Fatalf("Managed after a failed listing = %v, %v", got, err)
	}
}

// Delete takes a load balancer away whatever it holds, through the
// writer; one that is gone is not an error, and a mutation queued behind
// it creates a new one.
func TestDeleteTakesTheWholeLoadBalancer(t *testing.T) {
	f := testutil.NewFakeARM()
	s := newStore(t, f, nil)
	ctx := context.Background()
	if _, err := s.UpdateLB(ctx, "t", lbName, lbstore.UpdateOptions{Create: true}, addFrontend("fe-0")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "migration", lbName); err != nil {
		t.Fatal(err)
	}
	if f.LB(lbName) != nil {
		t.Fatal("the load balancer is still there")
	}
	if got, err := s.Get(ctx, lbName); err != nil || got != nil {
		t.Fatalf("Get after Delete = %v, %v; want nil from the cache", got, err)
	}
	f.ResetCalls()
	if err := s.Delete(ctx, "migration", lbName); err != nil {
		t.Fatalf("deleting a load balancer that is gone: %v", err)
	}
	out, err := s.UpdateLB(ctx, "t", lbName, lbstore.UpdateOptions{Create: true}, addFrontend("fe-1"))
	if err != nil || !slices.Equal(frontends(out), []string{"fe-1"}) {
		t.Fatalf("a new load balancer after Delete: %v %v", frontends(out), err)
	}
}

// bigLB is a mutation that gives a load balancer one frontend and a pool of
// members: weight about n.
func bigLB(n int) lbstore.Mutation {
	return func(lb *armnetwork.LoadBalancer) (bool, error) {
		if len(lb.Properties.FrontendIPConfigurations) > 0 {
			return false, nil
		}
		addrs := make([]*armnetwork.LoadBalancerBackendAddress, n)
		for i := range addrs {
			addrs[i] = &armnetwork.LoadBalancerBackendAddress{Name: to.Ptr(fmt.Sprintf("a%d", i)),
				Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: to.Ptr(fmt.Sprintf("10.1.%d.%d", i/250, 4+i%250))}}
		}
		lb.Properties.FrontendIPConfigurations = []*armnetwork.FrontendIPConfiguration{{Name: to.Ptr("fe")}}
		lb.Properties.BackendAddressPools = []*armnetwork.BackendAddressPool{{Name: to.Ptr("kubernetes"),
			Properties: &armnetwork.BackendAddressPoolPropertiesFormat{LoadBalancerBackendAddresses: addrs}}}
		return true, nil
	}
}

// A round writing several large load balancers has at most LBTransferBudget
// of them in flight: here one at a time; small ones go together.
func TestLargeLoadBalancerWritesBounded(t *testing.T) {
	f := testutil.NewFakeARM()
	s := newStore(t, f, nil)
	ctx := context.Background()
	var (
		mu       sync.Mutex
		inFlight int
		maxSeen  int
	)
	entered := make(chan string)
	proceed := make(chan struct{})
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) }) // before the store stops: a failed test blocks no write
	f.Before = func(c testutil.Call) {
		if c.Op != "lb.put" {
			return
		}
		mu.Lock()
		inFlight++
		maxSeen = max(maxSeen, inFlight)
		mu.Unlock()
		select {
		case entered <- c.LB:
			select {
			case <-proceed:
			case <-stop:
			}
		case <-stop:
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
	}
	// The first write holds the round; four large and then three small
	// load balancers queue for the next one.
	first := make(chan error, 1)
	go func() {
		_, err := s.UpdateLB(ctx, "first", lbName, lbstore.UpdateOptions{Create: true}, addFrontend("fe-0"))
		first <- err
	}()
	<-entered
	const large = lbstore.LBTransferBudget * 6 / 10
	errs := make(chan error, 7)
	for i := range 4 {
		go func() {
			_, err := s.UpdateLB(ctx, "big", fmt.Sprintf("big-%d", i), lbstore.UpdateOptions{Create: true}, bigLB(large))
			errs <- err
		}()
	}
	testutil.Poll(t, 5*time.Second, "four changes queued", func() bool { return s.Queued() == 4 })
	proceed <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for k := range 4 {
		name := <-entered
		// The others wait for the budget, not in ARM.
		testutil.Poll(t, 5*time.Second, "the other large writes waiting", func() bool { return s.TransferWaiters() == 3-k })
		mu.Lock()
		if inFlight != 1 {
			t.Errorf("%d large writes in flight while %s is, want 1", inFlight, name)
		}
		mu.Unlock()
		proceed <- struct{}{}
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if maxSeen != 1 {
		t.Errorf("at most %d large writes in flight, want 1", maxSeen)
	}

	// Small ones are written together: each PUT waits in ARM until all
	// three are there.
	mu.Lock()
	maxSeen = 0
	mu.Unlock()
	for i := range 3 {
		go func() {
			_, err := s.UpdateLB(ctx, "small", fmt.Sprintf("small-%d", i), lbstore.UpdateOptions{Create: true}, addFrontend("fe"))
			errs <- err
		}()
	}
	seen := 0
	testutil.Poll(t, 5*time.Second, "three small writes in flight together", func() bool {
		select {
		case <-entered:
			seen++
		default:
		}
		mu.Lock()
		defer mu.Unlock()
		return inFlight == 3 && seen == 3
	})
	close(proceed)
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// A GET of a large load balancer shares the budget with PUTs: it waits
// while a large write is in flight, charged the size it had when last seen.
func TestLargeReadWaitsForLargeWrite(t *testing.T) {
	f := testutil.NewFakeARM()
	s := newStore(t, f, nil)
	ctx := context.Background()
	const large = lbstore.LBTransferBudget * 6 / 10
	for _, n := range []string{"big-0", "big-1"} {
		if _, err := s.UpdateLB(ctx, "big", n, lbstore.UpdateOptions{Create: true}, bigLB(large)); err != nil {
			t.Fatal(err)
		}
	}
	g := newGate("lb.put")
	f.Before = g.before
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(g.release) }) }
	t.Cleanup(release) // before the store stops: a failed test blocks no write
	written := make(chan error, 1)
	go func() {
		_, err := s.UpdateLB(ctx, "big", "big-1", lbstore.UpdateOptions{}, addFrontend("fe-2"))
		written <- err
	}()
	<-g.waiting
	s.Forget("big-0")
	gets := f.Count("lb.get", "")
	read := make(chan error, 1)
	go func() {
		lb, err := s.Get(ctx, "big-0")
		if err == nil && len(frontends(lb)) != 1 {
			err = fmt.Errorf("read frontends %v", frontends(lb))
		}
		read <- err
	}()
	testutil.Poll(t, 5*time.Second, "the read waiting for the budget", func() bool { return s.TransferWaiters() == 1 })
	if got := f.Count("lb.get", ""); got != gets {
		t.Errorf("%d GETs sent while the large write is in flight, want 0", got-gets)
	}
	release()
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
}
