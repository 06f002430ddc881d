package adminstate

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/metrics"
)

const fakeRG = "rg"

// fakeARM is an in-memory Backend: load balancers whose pools share the
// load balancer's etag (as in ARM), with call counting and fault hooks.
type fakeARM struct {
	t    testing.TB
	lock *fakeLocker

	mu          sync.Mutex
	lbs         map[string]*fakeLB
	etagSeq     int
	gets, puts  int
	putsByPool  map[string]int
	resolves    int
	invalidated []string
	resolveErr  error
	// getErr / putErr, when set, may fail a call (nil: let it through).
	getErr func(lb, pool string) error
	putErr func(lb, pool string) error
	// onPut, when set, runs at the start of every PUT, outside mu.
	onPut func(lb, pool string)
	// ifMatch records, per "lb/pool", the If-Match of each PUT ("" none).
	ifMatch map[string][]string
	// unlocked counts ARM calls made without the lock held.
	unlocked int
}

type fakeLB struct {
	etag  string
	pools map[string]*armnetwork.BackendAddressPool
}

func newFakeARM(t testing.TB) *fakeARM {
	return &fakeARM{t: t, lock: &fakeLocker{}, lbs: map[string]*fakeLB{}, putsByPool: map[string]int{},
		ifMatch: map[string][]string{}}
}

type addr struct {
	name, ip string
	state    State // "" = unset
}

func (f *fakeARM) nextEtag() string {
	f.etagSeq++
	return fmt.Sprintf(`W/"%d"`, f.etagSeq)
}

// addPool creates (or replaces) a pool with the addresses.
func (f *fakeARM) addPool(lb, pool string, addrs ...addr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.lbs[lb]
	if !ok {
		l = &fakeLB{pools: map[string]*armnetwork.BackendAddressPool{}}
		f.lbs[lb] = l
	}
	p := &armnetwork.BackendAddressPool{Name: to.Ptr(pool), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{}}
	for _, a := range addrs {
		e := &armnetwork.LoadBalancerBackendAddress{Name: to.Ptr(a.name),
			Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: to.Ptr(a.ip)}}
		if a.state != "" {
			e.Properties.AdminState = to.Ptr(a.state)
		}
		p.Properties.LoadBalancerBackendAddresses = append(p.Properties.LoadBalancerBackendAddresses, e)
	}
	l.pools[pool] = p
	l.etag = f.nextEtag()
}

// state returns the admin state of the entry with ip in lb/pool ("" when
// absent; None when unset).
func (f *fakeARM) state(lb, pool, ip string) State {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.lbs[lb]
	if l == nil || l.pools[pool] == nil {
		return ""
	}
	for _, a := range l.pools[pool].Properties.LoadBalancerBackendAddresses {
		if backendpool.CanonicalIP(*a.Properties.IPAddress) == backendpool.CanonicalIP(ip) {
			return backendpool.AdminStateOf(a)
		}
	}
	return ""
}

func (f *fakeARM) counts() (gets, puts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets, f.puts
}

func (f *fakeARM) putsOf(lb, pool string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.putsByPool[lb+"/"+pool]
}

func (f *fakeARM) PoolsWithAddresses(_ context.Context, ips []string) ([]PoolRef, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resolves++
	if f.resolveErr != nil {
		return nil, f.resolveErr
	}
	want := map[string]bool{}
	for _, ip := range ips {
		want[backendpool.CanonicalIP(ip)] = true
	}
	var out []PoolRef
	for lbName, l := range f.lbs {
		for name, p := range l.pools {
			for _, a := range p.Properties.LoadBalancerBackendAddresses {
				if want[backendpool.CanonicalIP(*a.Properties.IPAddress)] {
					out = append(out, PoolRef{LoadBalancer: lbName, Pool: name})
					break
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

func (f *fakeARM) InvalidateCache(lb string) {
	f.mu.Lock()
	f.invalidated = append(f.invalidated, lb)
	f.mu.Unlock()
}

func (f *fakeARM) ResourceGroup() string                 { return fakeRG }
func (f *fakeARM) BackendPools() azure.BackendPoolClient { return (*fakePools)(f) }

func respErr(status int, code string) error {
	return fmt.Errorf("azure backendPool: %w", &azcore.ResponseError{StatusCode: status, ErrorCode: code})
}

func clonePool(p *armnetwork.BackendAddressPool) *armnetwork.BackendAddressPool {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err)
	}
	var out armnetwork.BackendAddressPool
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return &out
}

type fakePools fakeARM

var _ azure.BackendPoolClient = (*fakePools)(nil)

func (p *fakePools) f() *fakeARM { return (*fakeARM)(p) }

func (p *fakePools) Get(_ context.Context, rg, lb, pool string) (*armnetwork.BackendAddressPool, error) {
	f := p.f()
	held := f.lock.isHeld()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	if !held {
		f.unlocked++
	}
	if rg != fakeRG {
		return nil, respErr(http.StatusNotFound, "ResourceGroupNotFound")
	}
	if f.getErr != nil {
		if err := f.getErr(lb, pool); err != nil {
			return nil, err
		}
	}
	l := f.lbs[lb]
	if l == nil || l.pools[pool] == nil {
		return nil, respErr(http.StatusNotFound, "NotFound")
	}
	out := clonePool(l.pools[pool])
	out.Etag = to.Ptr(l.etag)
	return out, nil
}

func (p *fakePools) List(context.Context, string, string) ([]*armnetwork.BackendAddressPool, error) {
	return nil, fmt.Errorf("fake: List not used")
}

func (p *fakePools) CreateOrUpdate(_ context.Context, rg, lb, pool string, body armnetwork.BackendAddressPool, etag string) (*armnetwork.BackendAddressPool, error) {
	f := p.f()
	held := f.lock.isHeld()
	if f.onPut != nil {
		f.onPut(lb, pool)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.puts++
	f.putsByPool[lb+"/"+pool]++
	f.ifMatch[lb+"/"+pool] = append(f.ifMatch[lb+"/"+pool], etag)
	if !held {
		f.unlocked++
	}
	if f.putErr != nil {
		if err := f.putErr(lb, pool); err != nil {
			return nil, err
		}
	}
	l := f.lbs[lb]
	if rg != fakeRG || l == nil {
		return nil, respErr(http.StatusNotFound, "ResourceNotFound")
	}
	if etag != "" && etag != l.etag {
		return nil, respErr(http.StatusPreconditionFailed, "PreconditionFailed")
	}
	stored := clonePool(&body)
	stored.Etag = nil
	l.pools[pool] = stored
	l.etag = f.nextEtag()
	out := clonePool(stored)
	out.Etag = to.Ptr(l.etag)
	return out, nil
}

func (p *fakePools) Delete(context.Context, string, string, string) error {
	return fmt.Errorf("fake: Delete not used")
}

// fakeLocker is a mutex that records callers and whether it is held.
type fakeLocker struct {
	mu      sync.Mutex
	stateMu sync.Mutex
	held    bool
	callers []string
}

func (l *fakeLocker) Lock(caller string) {
	l.mu.Lock()
	l.stateMu.Lock()
	l.held = true
	l.callers = append(l.callers, caller)
	l.stateMu.Unlock()
}

func (l *fakeLocker) Unlock() {
	l.stateMu.Lock()
	l.held = false
	l.stateMu.Unlock()
	l.mu.Unlock()
}

func (l *fakeLocker) isHeld() bool {
	l.stateMu.Lock()
	defer l.stateMu.Unlock()
	return l.held
}

func (l *fakeLocker) lockCount() int {
	l.stateMu.Lock()
	defer l.stateMu.Unlock()
	return len(l.callers)
}

var sourceSeq atomic.Int64

// uniqueSource is a metrics source label no other test (or repeat) uses.
func uniqueSource(t testing.TB) string {
	return fmt.Sprintf("%s#%d", t.Name(), sourceSeq.Add(1))
}

func newTestManager(t testing.TB, f *fakeARM) *Manager {
	t.Helper()
	m, err := NewManager(f, f.lock, ManagerOptions{SubscriptionID: "sub", Source: uniqueSource(t)})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// node builds a node with InternalIPs and taints.
func node(name string, uid types.UID, ips []string, taints ...v1.Taint) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid}, Spec: v1.NodeSpec{Taints: taints}}
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
	}
	return n
}

var (
	taintOOS      = v1.Taint{Key: TaintOutOfService, Value: "nodeshutdown", Effect: v1.TaintEffectNoExecute}
	taintShutdown = v1.Taint{Key: TaintShutdown, Effect: v1.TaintEffectNoSchedule}
	taintSpot     = v1.Taint{Key: TaintDraining, Value: TaintDrainingSpotEviction, Effect: v1.TaintEffectNoSchedule}
	taintOther    = v1.Taint{Key: TaintDraining, Value: "maintenance", Effect: v1.TaintEffectNoSchedule}
	taintCordon   = v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}
)

// poll waits until cond holds, failing the test after timeout.
func poll(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 2*time.Millisecond, timeout, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// opMetric returns the sample count of the admin-state operation duration
// histogram and the failure counter for a metrics source.
func opMetric(t testing.TB, source string) (observed uint64, failures float64) {
	t.Helper()
	metrics.Register()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if label(m, metrics.LabelSource) != source || label(m, "request") != MetricPrefix+"_"+MetricRequestUpdate {
				continue
			}
			switch mf.GetName() {
			case "cloudprovider_azure_op_duration_seconds":
				observed += m.GetHistogram().GetSampleCount()
			case "cloudprovider_azure_op_failure_count":
				failures += m.GetCounter().GetValue()
			}
		}
	}
	return observed, failures
}

// lockWaits returns the sample count of the lock-wait histogram for caller.
func lockWaits(t testing.TB, caller string) uint64 {
	t.Helper()
	metrics.Register()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() != "cloudprovider_azure_lock_wait_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label(m, "caller") == caller {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

func label(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

func errContains(err error, parts ...string) bool {
	if err == nil {
		return false
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			return false
		}
	}
	return true
}
