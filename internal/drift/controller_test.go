package drift

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/provider"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fakeRepairer struct {
	mu       sync.Mutex
	begun    int
	repaired []string
	repairs  map[string][]provider.Repair
	fail     map[string]error
}

func (f *fakeRepairer) BeginRepairPass(ctx context.Context) (context.Context, []provider.Repair, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.begun++
	return ctx, nil, nil
}

func (f *fakeRepairer) RepairService(_ context.Context, svc *v1.Service, _ []*v1.Node) ([]provider.Repair, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.repaired = append(f.repaired, svc.Name)
	return f.repairs[svc.Name], f.fail[svc.Name]
}

func (f *fakeRepairer) passes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.begun
}

func svc(name string, typ v1.ServiceType, class *string) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name)},
		Spec: v1.ServiceSpec{Type: typ, LoadBalancerClass: class}}
}

func listers(t *testing.T, objs ...*v1.Service) (corelisters.ServiceLister, corelisters.NodeLister) {
	t.Helper()
	si := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, o := range objs {
		if err := si.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	ni := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	return corelisters.NewServiceLister(si), corelisters.NewNodeLister(ni)
}

// A pass repairs the LoadBalancer Services azlb serves, and only those;
// each repair is an event naming what was written; a failed Service does
// not stop the others.
func TestPassRepairsServedServicesAndReports(t *testing.T) {
	svcs, nodes := listers(t,
		svc("web", v1.ServiceTypeLoadBalancer, nil),
		svc("api", v1.ServiceTypeLoadBalancer, nil),
		svc("cluster-ip", v1.ServiceTypeClusterIP, nil),
		svc("other-class", v1.ServiceTypeLoadBalancer, ptr.To("example.com/other")),
	)
	f := &fakeRepairer{
		repairs: map[string][]provider.Repair{"web": {{Kind: provider.RepairLoadBalancer, What: "load balancer kubernetes (the Service's frontends, rules or probes)"}}},
		fail:    map[string]error{"api": errors.New("boom")},
	}
	rec := record.NewFakeRecorder(10)
	c, err := New(Options{Interval: time.Minute, Repairer: f, Services: svcs, Nodes: nodes, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Pass(context.Background())
	if err == nil || !strings.Contains(err.Error(), "service default/api: boom") {
		t.Errorf("pass error = %v, want the failed Service named", err)
	}
	if st.Services != 2 || st.Repairs != 1 || st.Failed != 1 {
		t.Errorf("stats = %+v, want 2 Services, 1 repair, 1 failure", st)
	}
	if len(f.repaired) != 2 {
		t.Errorf("repaired %v, want web and api only", f.repaired)
	}
	select {
	case e := <-rec.Events:
		if !strings.HasPrefix(e, "Normal DriftRepaired Azure differed from what the Service calls for; wrote back: load balancer kubernetes") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no DriftRepaired event")
	}
}

// Passes run every interval on the injected clock, not before; an
// interval of 0 runs none.
func TestRunEveryInterval(t *testing.T) {
	svcs, nodes := listers(t)
	f := &fakeRepairer{}
	clk := clocktesting.NewFakeClock(time.Now())
	c, err := New(Options{Interval: time.Minute, Repairer: f, Services: svcs, Nodes: nodes, Recorder: record.NewFakeRecorder(1), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	waitFor(t, "the ticker", func() bool { return clk.HasWaiters() })
	if f.passes() != 0 {
		t.Fatal("a pass ran before the first interval")
	}
	for i := 1; i <= 2; i++ {
		clk.Step(time.Minute)
		waitFor(t, "a pass", func() bool { return f.passes() == i })
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	off, _ := New(Options{Interval: 0, Repairer: f, Services: svcs, Nodes: nodes, Recorder: record.NewFakeRecorder(1), Clock: clk})
	if err := off.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // polling with a deadline
	}
}
