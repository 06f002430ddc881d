package leaderfence

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func lease(holder string, renew time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "azlb-controller-manager"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(holder),
			RenewTime:      ptr.To(metav1.NewMicroTime(renew)),
		},
	}
}

// until polls cond (with a deadline) until it holds.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func TestFenceFollowsTheLease(t *testing.T) {
	cs := fake.NewClientset(lease("replica-a_1", t0))
	clk := clocktesting.NewFakePassiveClock(t0.Add(time.Second))
	f, err := New(Options{Client: cs, Namespace: "kube-system", Name: "azlb-controller-manager", RenewDeadline: 10 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Allow(); !errors.Is(err, ErrNotLeader) || !strings.Contains(err.Error(), "not read yet") {
		t.Fatalf("before Start: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	until(t, "the fence to open", func() bool { return f.Allow() == nil })

	// Frozen (or partitioned) past the renew deadline: refused at once,
	// before anything else happens.
	clk.SetTime(t0.Add(10 * time.Second))
	if err := f.Allow(); !errors.Is(err, ErrNotLeader) || !strings.Contains(err.Error(), "last renewed 10s ago, renew deadline 10s") {
		t.Fatalf("stale lease: %v", err)
	}

	// The elector renews: open again.
	leases := cs.CoordinationV1().Leases("kube-system")
	if _, err := leases.Update(ctx, lease("replica-a_1", t0.Add(9*time.Second)), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "the renew to be seen", func() bool { return f.Allow() == nil })

	// Another replica took over: refused whatever the renew time says.
	if _, err := leases.Update(ctx, lease("replica-b_2", t0.Add(10*time.Second)), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "the takeover to be seen", func() bool {
		err := f.Allow()
		return err != nil && strings.Contains(err.Error(), `held by "replica-b_2", this replica is "replica-a_1"`)
	})

	// Deleted: refused.
	if _, err := leases.Update(ctx, lease("replica-a_1", t0.Add(10*time.Second)), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "the lease back", func() bool { return f.Allow() == nil })
	if err := leases.Delete(ctx, "azlb-controller-manager", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "the deletion to be seen", func() bool { return f.Allow() != nil })
}

// A lease that cannot be read keeps the fence closed; it opens once the
// read succeeds.
func TestFenceWaitsForTheLease(t *testing.T) {
	cs := fake.NewClientset()
	clk := clocktesting.NewFakePassiveClock(t0)
	f, err := New(Options{Client: cs, Namespace: "kube-system", Name: "azlb-controller-manager", RenewDeadline: 10 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	if err := f.Allow(); err == nil {
		t.Fatal("open without a lease")
	}
	if _, err := cs.CoordinationV1().Leases("kube-system").Create(ctx, lease("replica-a_1", t0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, "the fence to open", func() bool { return f.Allow() == nil })
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{
		{},
		{Client: fake.NewClientset(), Namespace: "kube-system", Name: "x"},
		{Client: fake.NewClientset(), Name: "x", RenewDeadline: time.Second},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}
