package adminstate

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/metrics"
	"github.com/azlb/azlb/internal/testutil"
)

// fakeARM is the in-memory ARM of the manager and controller tests
// (testutil.FakeARM: pools share their load balancer's etag, as in ARM) and
// a running store over it, managing the load balancers lb-a and lb-b (each
// with an internal twin) plus lb and lb-solo.
type fakeARM struct {
	*testutil.FakeARM
	store *lbstore.Store

	mu sync.Mutex
	// getErr / putErr, when set, may fail a pool GET or PUT (nil: let it
	// through); resolveErr fails reading load balancers (resolution).
	getErr, putErr func(lb, pool string) error
	resolveErr     error
	// onPut, when set, runs at the start of every pool PUT.
	onPut func(lb, pool string)
}

func newFakeARM(t testing.TB) *fakeARM {
	t.Helper()
	f := &fakeARM{FakeARM: testutil.NewFakeARM()}
	f.Fail = f.fail
	f.Before = func(c testutil.Call) {
		f.mu.Lock()
		hook := f.onPut
		f.mu.Unlock()
		if c.Op == "pool.put" && hook != nil {
			hook(c.LB, c.Pool)
		}
	}
	cfg := testutil.FakeConfig(t, func(c *config.Config) {
		c.LoadBalancerCacheTTLInSeconds = 3600
		for _, n := range []string{"lb-a", "lb-b", "lb", "lb-solo"} {
			c.MultipleStandardLoadBalancerConfigurations = append(c.MultipleStandardLoadBalancerConfigurations,
				config.MultipleStandardLoadBalancerConfiguration{Name: n})
		}
		c.MultipleStandardLoadBalancerConfigurations = append(c.MultipleStandardLoadBalancerConfigurations,
			config.MultipleStandardLoadBalancerConfiguration{Name: "kubernetes"})
	})
	f.store = testutil.StartStore(t, lbstore.Options{Config: cfg, LoadBalancers: f.LoadBalancers(), Pools: f.Pools()})
	return f
}

func (f *fakeARM) fail(c testutil.Call) error {
	f.mu.Lock()
	getErr, putErr, resolveErr := f.getErr, f.putErr, f.resolveErr
	f.mu.Unlock()
	switch {
	case (c.Op == "lb.get" || c.Op == "lb.list") && resolveErr != nil:
		return resolveErr
	case c.Op == "pool.get" && getErr != nil:
		return getErr(c.LB, c.Pool)
	case c.Op == "pool.put" && putErr != nil:
		return putErr(c.LB, c.Pool)
	}
	return nil
}

type addr struct {
	name, ip string
	state    State // "" = unset
}

// addPool creates (or replaces) a pool with the addresses.
func (f *fakeARM) addPool(lb, pool string, addrs ...addr) {
	var entries []testutil.Entry
	for _, a := range addrs {
		entries = append(entries, testutil.Entry{Name: a.name, IP: a.ip, State: a.state})
	}
	f.SeedPool(lb, pool, entries...)
}

// state returns the admin state of the entry with ip in lb/pool ("" when
// absent; None when unset).
func (f *fakeARM) state(lb, pool, ip string) State { return f.AdminState(lb, pool, ip) }

// counts returns the pool GETs and PUTs so far.
func (f *fakeARM) counts() (gets, puts int) { return f.Count("pool.get", ""), f.Count("pool.put", "") }

func (f *fakeARM) putsOf(lb, pool string) int {
	n := 0
	for _, c := range f.Calls() {
		if c.Op == "pool.put" && c.LB == lb && c.Pool == pool {
			n++
		}
	}
	return n
}

// ifMatch returns the If-Match of each PUT of lb/pool ("" none).
func (f *fakeARM) ifMatch(ref string) []string {
	var out []string
	for _, c := range f.Calls() {
		if c.Op == "pool.put" && c.LB+"/"+c.Pool == ref {
			out = append(out, c.IfMatch)
		}
	}
	return out
}

// etag is the current etag of a load balancer.
func (f *fakeARM) etag(lb string) string { return *f.LB(lb).Etag }

func respErr(status int, code string) error { return testutil.RespErr(status, code) }

var sourceSeq atomic.Int64

// uniqueSource is a metrics source label no other test (or repeat) uses.
func uniqueSource(t testing.TB) string {
	return fmt.Sprintf("%s#%d", t.Name(), sourceSeq.Add(1))
}

func newTestManager(t testing.TB, f *fakeARM) *Manager {
	t.Helper()
	return newPolicyManager(t, f, testPolicy)
}

// testPolicy is the tests' pool-entry policy: the default admin-state
// taints.
var testPolicy = backendpool.Policy{VNetID: "vnet", ExcludeControlPlane: true, AdminState: true}

func newPolicyManager(t testing.TB, f *fakeARM, policy backendpool.Policy) *Manager {
	t.Helper()
	m, err := NewManager(f.store, ManagerOptions{SubscriptionID: "sub", Source: uniqueSource(t), Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// node builds a node with InternalIPs and taints.
func node(name string, uid types.UID, ips []string, taints ...v1.Taint) *v1.Node {
	return testutil.Node(name, testutil.UID(uid), testutil.InternalIPs(ips...), testutil.Taints(taints...))
}

var (
	taintOOS      = v1.Taint{Key: backendpool.TaintOutOfService, Value: "nodeshutdown", Effect: v1.TaintEffectNoExecute}
	taintShutdown = v1.Taint{Key: backendpool.TaintShutdown, Effect: v1.TaintEffectNoSchedule}
	taintSpot     = v1.Taint{Key: backendpool.TaintDraining, Value: backendpool.TaintDrainingSpotEviction, Effect: v1.TaintEffectNoSchedule}
	taintOther    = v1.Taint{Key: backendpool.TaintDraining, Value: "maintenance", Effect: v1.TaintEffectNoSchedule}
	taintCordon   = v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}
	// The default loadBalancerAdminStateTaints: the cluster autoscaler's
	// (its value is a Unix time) and Karpenter's.
	taintAutoscaler = v1.Taint{Key: backendpool.TaintToBeDeletedByClusterAutoscaler, Value: "1767225600", Effect: v1.TaintEffectNoSchedule}
	taintKarpenter  = v1.Taint{Key: backendpool.TaintKarpenterDisrupted, Effect: v1.TaintEffectNoSchedule}
)

// poll waits until cond holds, failing the test after timeout.
var poll = testutil.Poll

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
