package dataplane_test

import (
	"testing"
	"time"

	"github.com/azlb/azlb/internal/emulator/dataplane"
	"github.com/azlb/azlb/internal/testutil"
)

// The pool's drainPeriodInSeconds (docs/data-plane.md, Drain period).

// dialMember opens a keep-alive connection that member name answers.
func (r *rig) dialMember(name string) *testutil.Conn {
	r.t.Helper()
	for range 200 {
		k, got, err := testutil.Dial(r.fe, 2*time.Second)
		if err != nil {
			r.t.Fatal(err)
		}
		if got == name {
			r.t.Cleanup(k.Close)
			return k
		}
		k.Close()
	}
	r.t.Fatalf("no connection reached %s in 200 tries", name)
	return nil
}

// stepPastDrain moves the clock past a 10 s drain period once the sweeper
// waits on it, and waits for m2's next probe (the clock's timers fired).
func (r *rig) stepPastDrain() {
	r.t.Helper()
	testutil.Poll(r.t, wait, "the sweeper's ticker", r.clock.HasWaiters)
	before := r.member("m2").Probes
	r.clock.Step(11 * time.Second)
	r.until("m2", "probed after the step", func(m dataplane.MemberStatus) bool { return m.Probes > before })
}

func TestRemovalWithoutDrainPeriodResetsAtOnce(t *testing.T) {
	r := newRig(t)
	r.backend(1)
	r.backend(2)
	rule := r.rule(r.members("", ""), nil)
	r.apply(rule)
	k := r.dialMember("m1")
	rule.Members = rule.Members[1:]
	r.apply(rule)
	if _, err := k.Get(); err == nil {
		t.Fatal("the flow of a member removed from a pool without drain period survived")
	}
	if n := r.status().Counters.DrainResets; n != 1 {
		t.Fatalf("drainResets %d, want 1", n)
	}
}

// A member that is Down keeps its established flows however long it stays
// Down: the drain period starts only when it leaves the pool, and at its
// end the flows are reset. This is a node scaled down: Down on the taint,
// removed with the node.
func TestDownMemberDrainsOnlyOnceRemoved(t *testing.T) {
	r := newRig(t)
	r.backend(1)
	r.backend(2)
	rule := r.rule(r.members("", ""), r.tcpProbe(1))
	rule.DrainPeriod = 10 * time.Second
	r.apply(rule)
	r.until("m1", "eligible", eligible)
	r.until("m2", "eligible", eligible)
	k := r.dialMember("m1")
	rule.Members[0].AdminState = dataplane.AdminDown
	r.apply(rule)
	r.stepPastDrain()
	if _, err := k.Get(); err != nil {
		t.Fatalf("the flow of a Down member ended: %v", err)
	}
	rule.Members = rule.Members[1:]
	r.apply(rule)
	if _, err := k.Get(); err != nil {
		t.Fatalf("the flow of a removed member ended before its drain period: %v", err)
	}
	r.stepPastDrain()
	testutil.Poll(t, wait, "a drain reset", func() bool { return r.status().Counters.DrainResets == 1 })
	if _, err := k.Get(); err == nil {
		t.Fatal("the flow of a removed member outlived its drain period")
	}
}

// A member that comes back before its drain period ends keeps its flows.
func TestMemberBackWithinTheDrainPeriodKeepsItsFlows(t *testing.T) {
	r := newRig(t)
	r.backend(1)
	r.backend(2)
	rule := r.rule(r.members("", ""), r.tcpProbe(1))
	rule.DrainPeriod = 10 * time.Second
	r.apply(rule)
	r.until("m1", "eligible", eligible)
	k := r.dialMember("m1")
	back := rule.Members
	rule.Members = rule.Members[1:]
	r.apply(rule)
	rule.Members = back
	r.apply(rule)
	r.stepPastDrain()
	if _, err := k.Get(); err != nil {
		t.Fatalf("the flow of a member that came back ended: %v", err)
	}
	if n := r.status().Counters.DrainResets; n != 0 {
		t.Fatalf("drainResets %d, want 0", n)
	}
}
