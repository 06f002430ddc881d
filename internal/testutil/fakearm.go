package testutil

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
)

// FakeRG is the only resource group FakeARM knows.
const FakeRG = "rg"

// FakeARM is an in-memory ARM for load balancers and their backend pools:
// pools share their load balancer's etag, which every write changes; writes
// honour If-Match (412 PreconditionFailed); unknown objects are 404 with
// ARM's codes. Hooks fail or observe calls; every call is counted. Its
// LoadBalancers and Pools methods are the azure clients to hand to a store.
type FakeARM struct {
	mu      sync.Mutex
	lbs     map[string]*fakeLB // lower-cased name
	etagSeq int
	calls   []Call
	pips    map[string]*armnetwork.PublicIPAddress // lower-cased name
	ipSeq   int
	sgw     *fakeGateway

	// Fail, when set, is asked before every call; a non-nil error fails it
	// (before any effect). Set it before use or under Lock.
	Fail func(c Call) error
	// Before, when set, runs at the start of every call, outside the lock.
	Before func(c Call)
	// Answer, when set, runs after a read has taken its answer from the
	// stored state and before it returns it, outside the lock: blocking
	// there makes a read that answers an older state than the current one.
	Answer func(c Call)
}

// Call describes one ARM call of a FakeARM.
type Call struct {
	// Op is "lb.get", "lb.list", "lb.put", "lb.delete", "pool.get",
	// "pool.put", "pool.delete", "pool.list", "pip.get", "pip.list",
	// "pip.put", "pip.delete", "sgw.services", "sgw.locations",
	// "sgw.update_services" or "sgw.update_locations".
	Op      string
	LB      string
	Pool    string
	IfMatch string
	// Name is the public IP of pip.* calls.
	Name string
	// Body is a copy of a write's request: the load balancer, public IP,
	// or service gateway request.
	Body any
}

type fakeLB struct {
	lb   *armnetwork.LoadBalancer // pools included; Etag set
	etag string
}

// NewFakeARM returns an empty FakeARM.
func NewFakeARM() *FakeARM {
	return &FakeARM{lbs: map[string]*fakeLB{}, pips: map[string]*armnetwork.PublicIPAddress{}, sgw: newFakeGateway()}
}

// LoadBalancers is the load balancer client.
func (f *FakeARM) LoadBalancers() azure.LoadBalancerClient { return (*fakeLBClient)(f) }

// Pools is the backend pool client.
func (f *FakeARM) Pools() azure.BackendPoolClient { return (*fakePoolClient)(f) }

// RespErr is an ARM error as the azure clients return it.
func RespErr(status int, code string) error {
	return fmt.Errorf("azure fake: %w", &azcore.ResponseError{StatusCode: status, ErrorCode: code})
}

// Calls returns every call so far.
func (f *FakeARM) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

// Count counts calls with the op (and, when not "", the pool).
func (f *FakeARM) Count(op, pool string) int {
	n := 0
	for _, c := range f.Calls() {
		if c.Op == op && (pool == "" || strings.EqualFold(c.Pool, pool)) {
			n++
		}
	}
	return n
}

// ResetCalls forgets the calls so far.
func (f *FakeARM) ResetCalls() {
	f.mu.Lock()
	f.calls = nil
	f.mu.Unlock()
}

// Seed creates or replaces a load balancer (its pools included) without
// counting a call.
func (f *FakeARM) Seed(lb *armnetwork.LoadBalancer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.store(ptr.Deref(lb.Name, ""), clone(lb))
}

// Entry is one IP-based backend address of SeedPool.
type Entry struct {
	Name, IP string
	State    armnetwork.LoadBalancerBackendAddressAdminState // "" unset
}

// SeedPool adds or replaces a pool of a load balancer (created empty when
// missing) without counting a call.
func (f *FakeARM) SeedPool(lbName, pool string, entries ...Entry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var lb *armnetwork.LoadBalancer
	if cur, ok := f.lbs[strings.ToLower(lbName)]; ok {
		lb = clone(cur.lb)
	} else {
		lb = &armnetwork.LoadBalancer{Name: to.Ptr(lbName), Location: to.Ptr("eastus"),
			SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)}}
	}
	if lb.Properties == nil {
		lb.Properties = &armnetwork.LoadBalancerPropertiesFormat{}
	}
	p := &armnetwork.BackendAddressPool{Name: to.Ptr(pool), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{}}
	for _, e := range entries {
		a := &armnetwork.LoadBalancerBackendAddress{Name: to.Ptr(e.Name),
			Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: to.Ptr(e.IP)}}
		if e.State != "" {
			a.Properties.AdminState = to.Ptr(e.State)
		}
		p.Properties.LoadBalancerBackendAddresses = append(p.Properties.LoadBalancerBackendAddresses, a)
	}
	replaced := false
	for i, x := range lb.Properties.BackendAddressPools {
		if strings.EqualFold(ptr.Deref(x.Name, ""), pool) {
			lb.Properties.BackendAddressPools[i], replaced = p, true
		}
	}
	if !replaced {
		lb.Properties.BackendAddressPools = append(lb.Properties.BackendAddressPools, p)
	}
	f.store(lbName, lb)
}

// LB returns a copy of a load balancer as stored, or nil.
func (f *FakeARM) LB(name string) *armnetwork.LoadBalancer {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l, ok := f.lbs[strings.ToLower(name)]; ok {
		return clone(l.lb)
	}
	return nil
}

// Pool returns a copy of a pool as stored, or nil.
func (f *FakeARM) Pool(lbName, pool string) *armnetwork.BackendAddressPool {
	lb := f.LB(lbName)
	if lb == nil || lb.Properties == nil {
		return nil
	}
	for _, p := range lb.Properties.BackendAddressPools {
		if strings.EqualFold(ptr.Deref(p.Name, ""), pool) {
			return p
		}
	}
	return nil
}

// AdminState is the admin state of the entry with the IP in lb/pool: ""
// when there is no such entry, None when it is unset.
func (f *FakeARM) AdminState(lbName, pool, ip string) armnetwork.LoadBalancerBackendAddressAdminState {
	p := f.Pool(lbName, pool)
	if p == nil || p.Properties == nil {
		return ""
	}
	for _, a := range p.Properties.LoadBalancerBackendAddresses {
		if a.Properties != nil && ptr.Deref(a.Properties.IPAddress, "") == ip {
			if s := ptr.Deref(a.Properties.AdminState, ""); s != "" {
				return s
			}
			return armnetwork.LoadBalancerBackendAddressAdminStateNone
		}
	}
	return ""
}

// store saves lb under a new etag. Caller holds mu.
func (f *FakeARM) store(name string, lb *armnetwork.LoadBalancer) {
	f.etagSeq++
	etag := fmt.Sprintf(`W/"%d"`, f.etagSeq)
	lb.Etag = to.Ptr(etag)
	if lb.Properties != nil {
		for _, p := range lb.Properties.BackendAddressPools {
			p.Etag = to.Ptr(etag)
		}
	}
	f.lbs[strings.ToLower(name)] = &fakeLB{lb: lb, etag: etag}
}

// begin counts a call and asks the hooks.
func (f *FakeARM) begin(c Call) error {
	if f.Before != nil {
		f.Before(c)
	}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	fail := f.Fail
	f.mu.Unlock()
	if fail != nil {
		return fail(c)
	}
	return nil
}

type fakeLBClient FakeARM

func (c *fakeLBClient) f() *FakeARM { return (*FakeARM)(c) }

func (c *fakeLBClient) Get(_ context.Context, rg, name string) (*armnetwork.LoadBalancer, error) {
	f := c.f()
	if err := f.begin(Call{Op: "lb.get", LB: name}); err != nil {
		return nil, err
	}
	f.mu.Lock()
	l, ok := f.lbs[strings.ToLower(name)]
	var out *armnetwork.LoadBalancer
	if ok {
		out = clone(l.lb)
	}
	answer := f.Answer
	f.mu.Unlock()
	if answer != nil {
		answer(Call{Op: "lb.get", LB: name})
	}
	if rg != FakeRG || !ok {
		return nil, RespErr(http.StatusNotFound, "ResourceNotFound")
	}
	return out, nil
}

func (c *fakeLBClient) List(_ context.Context, rg string) ([]*armnetwork.LoadBalancer, error) {
	f := c.f()
	if err := f.begin(Call{Op: "lb.list"}); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if rg != FakeRG {
		return nil, RespErr(http.StatusNotFound, "ResourceGroupNotFound")
	}
	var out []*armnetwork.LoadBalancer
	for _, l := range f.lbs {
		out = append(out, clone(l.lb))
	}
	sort.Slice(out, func(i, j int) bool { return ptr.Deref(out[i].Name, "") < ptr.Deref(out[j].Name, "") })
	return out, nil
}

func (c *fakeLBClient) CreateOrUpdate(_ context.Context, rg, name string, lb armnetwork.LoadBalancer, etag string) (*armnetwork.LoadBalancer, error) {
	f := c.f()
	if err := f.begin(Call{Op: "lb.put", LB: name, IfMatch: etag, Body: clone(&lb)}); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if rg != FakeRG {
		return nil, RespErr(http.StatusNotFound, "ResourceGroupNotFound")
	}
	cur, ok := f.lbs[strings.ToLower(name)]
	if etag != "" && (!ok || cur.etag != etag) {
		return nil, RespErr(http.StatusPreconditionFailed, "PreconditionFailed")
	}
	stored := clone(&lb)
	stored.Name = to.Ptr(name)
	f.store(name, stored)
	return clone(stored), nil
}

func (c *fakeLBClient) Delete(_ context.Context, rg, name string) error {
	f := c.f()
	if err := f.begin(Call{Op: "lb.delete", LB: name}); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.lbs[strings.ToLower(name)]; rg != FakeRG || !ok {
		return RespErr(http.StatusNotFound, "ResourceNotFound")
	}
	if svc, used := f.sgw.poolUser(name); used {
		_ = svc
		return RespErr(http.StatusBadRequest, "LoadBalancerInUseByServiceGateway")
	}
	delete(f.lbs, strings.ToLower(name))
	return nil
}

type fakePoolClient FakeARM

func (c *fakePoolClient) f() *FakeARM { return (*FakeARM)(c) }

// find returns the stored pool (caller holds mu).
func (f *FakeARM) find(rg, lbName, pool string) (*fakeLB, int, error) {
	l, ok := f.lbs[strings.ToLower(lbName)]
	if rg != FakeRG || !ok {
		return nil, -1, RespErr(http.StatusNotFound, "ResourceNotFound")
	}
	if l.lb.Properties != nil {
		for i, p := range l.lb.Properties.BackendAddressPools {
			if strings.EqualFold(ptr.Deref(p.Name, ""), pool) {
				return l, i, nil
			}
		}
	}
	return l, -1, nil
}

func (c *fakePoolClient) Get(_ context.Context, rg, lbName, pool string) (*armnetwork.BackendAddressPool, error) {
	f := c.f()
	if err := f.begin(Call{Op: "pool.get", LB: lbName, Pool: pool}); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l, i, err := f.find(rg, lbName, pool)
	if err != nil {
		return nil, err
	}
	if i < 0 {
		return nil, RespErr(http.StatusNotFound, "NotFound")
	}
	return clone(l.lb.Properties.BackendAddressPools[i]), nil
}

func (c *fakePoolClient) List(_ context.Context, rg, lbName string) ([]*armnetwork.BackendAddressPool, error) {
	f := c.f()
	if err := f.begin(Call{Op: "pool.list", LB: lbName}); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l, _, err := f.find(rg, lbName, "")
	if err != nil {
		return nil, err
	}
	var out []*armnetwork.BackendAddressPool
	if l.lb.Properties != nil {
		for _, p := range l.lb.Properties.BackendAddressPools {
			out = append(out, clone(p))
		}
	}
	return out, nil
}

func (c *fakePoolClient) CreateOrUpdate(_ context.Context, rg, lbName, pool string, body armnetwork.BackendAddressPool, etag string) (*armnetwork.BackendAddressPool, error) {
	f := c.f()
	if err := f.begin(Call{Op: "pool.put", LB: lbName, Pool: pool, IfMatch: etag}); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l, i, err := f.find(rg, lbName, pool)
	if err != nil {
		return nil, err
	}
	if etag != "" && etag != l.etag {
		return nil, RespErr(http.StatusPreconditionFailed, "PreconditionFailed")
	}
	lb := clone(l.lb)
	if lb.Properties == nil {
		lb.Properties = &armnetwork.LoadBalancerPropertiesFormat{}
	}
	p := clone(&body)
	p.Name = to.Ptr(pool)
	if i >= 0 {
		lb.Properties.BackendAddressPools[i] = p
	} else {
		lb.Properties.BackendAddressPools = append(lb.Properties.BackendAddressPools, p)
	}
	f.store(lbName, lb)
	return clone(p), nil
}

func (c *fakePoolClient) Delete(_ context.Context, rg, lbName, pool string) error {
	f := c.f()
	if err := f.begin(Call{Op: "pool.delete", LB: lbName, Pool: pool}); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l, i, err := f.find(rg, lbName, pool)
	if err != nil {
		return err
	}
	if i < 0 {
		return RespErr(http.StatusNotFound, "NotFound")
	}
	lb := clone(l.lb)
	lb.Properties.BackendAddressPools = append(lb.Properties.BackendAddressPools[:i:i], lb.Properties.BackendAddressPools[i+1:]...)
	f.store(lbName, lb)
	return nil
}

// clone deep-copies an ARM model through its JSON form.
func clone[T any](v *T) *T {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("testutil: marshal %T: %v", v, err))
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		panic(fmt.Sprintf("testutil: unmarshal %T: %v", v, err))
	}
	return out
}
