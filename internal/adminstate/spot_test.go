package adminstate

import (
	"testing"
	"time"

	"github.com/azlb/azlb/internal/backendpool"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// spotBarrier sends a fresh PreemptScheduled for n3 and waits for its taint:
// with one spot worker, every event delivered before it has been handled.
func spotBarrier(t *testing.T, e *ctrlEnv) {
	t.Helper()
	e.createEvent(preemptEvent("barrier", "n3", "", time.Now()))
	poll(t, waitFor, "barrier taint on n3", func() bool { return e.hasSpotTaint("n3") })
}

func TestSpotPreemptScheduledTaintsOnceAndGoesDown(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	e := newCtrlEnv(t, f, nil, clusterNodes()...)
	e.run()
	ev := preemptEvent("n1.preempt", "n1", "u1", time.Now())
	e.createEvent(ev)
	poll(t, waitFor, "spot-eviction taint", func() bool { return e.hasSpotTaint("n1") })
	poll(t, waitFor, "n1 Down", func() bool { return n1Is(f, down) })
	// The event is recorded after the taint is written: wait for it.
	poll(t, waitFor, "the taint event", func() bool { return len(e.events.Find("n1", EventReasonSpotEvictionTainted)) >= 1 })
	if got := e.events.Find("n1", EventReasonSpotEvictionTainted); len(got) != 1 {
		t.Errorf("taint events %v", got)
	}
	taints := e.getNode("n1").Spec.Taints
	if len(taints) != 1 || taints[0].Effect != v1.TaintEffectNoSchedule || taints[0].Value != backendpool.TaintDrainingSpotEviction {
		t.Errorf("taints = %+v", taints)
	}
	updates := e.nodeWrites()

	// Duplicates: another event, and the same event seen again with a new
	// occurrence, while the taint is there.
	e.createEvent(preemptEvent("n1.preempt2", "n1", "u1", time.Now()))
	ev.Count, ev.LastTimestamp = 2, metav1.NewTime(time.Now().Add(time.Second))
	e.updateEvent(ev)
	spotBarrier(t, e)
	if got := e.nodeWrites(); got != updates+1 { // +1: the barrier
		t.Errorf("node updates %d -> %d, want only the barrier's", updates, got)
	}
	if got := e.events.Find("n1", EventReasonSpotEvictionTainted); len(got) != 1 {
		t.Errorf("taint events after duplicates: %d", len(got))
	}
}

func TestSpotIgnoresStaleAndForeignEvents(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	objs := clusterNodes()
	created := time.Now().Add(-time.Minute)
	objs[1].(*v1.Node).CreationTimestamp = metav1.NewTime(created)
	// Listed at start: fresh, but from before this controller ran.
	objs = append(objs, preemptEvent("listed", "n1", "u1", time.Now()))
	e := newCtrlEnv(t, f, nil, objs...)
	e.run()
	for _, ev := range []*v1.Event{
		preemptEvent("old", "n1", "u1", time.Now().Add(-PreemptEventMaxAge-time.Minute)),
		preemptEvent("other-incarnation", "n1", "u0", time.Now()),
		preemptEvent("before-creation", "n2", "", created.Add(-10*time.Second)),
		func() *v1.Event {
			ev := preemptEvent("pod", "n1", "", time.Now())
			ev.InvolvedObject.Kind = "Pod"
			return ev
		}(),
		func() *v1.Event {
			ev := preemptEvent("other-reason", "n1", "", time.Now())
			ev.Reason = "Rebooted"
			return ev
		}(),
		preemptEvent("missing-node", "gone", "", time.Now()),
	} {
		e.createEvent(ev)
	}
	spotBarrier(t, e)
	if e.hasSpotTaint("n1") || e.hasSpotTaint("n2") {
		t.Fatal("a stale, foreign or pre-start event tainted a node")
	}
	if got := e.nodeWrites(); got != 1 {
		t.Errorf("node updates = %d, want 1 (the barrier)", got)
	}
}

func TestSpotRestartDoesNotRetaintClearedNode(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	// Before the restart: the event tainted n1, then an operator cleared it.
	objs := append(clusterNodes(), preemptEvent("n1.preempt", "n1", "u1", time.Now().Add(-5*time.Second)))
	e := newCtrlEnv(t, f, nil, objs...)
	e.run()
	spotBarrier(t, e)
	if e.hasSpotTaint("n1") {
		t.Fatal("restart re-tainted a node from a re-listed event")
	}
}

func TestSpotRetaintsOnlyOnANewOccurrence(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	e := newCtrlEnv(t, f, nil, clusterNodes()...)
	e.run()
	at := time.Now().Add(-10 * time.Second)
	ev := preemptEvent("n1.preempt", "n1", "u1", at)
	e.createEvent(ev)
	poll(t, waitFor, "taint", func() bool { return e.hasSpotTaint("n1") })
	poll(t, waitFor, "n1 Down", func() bool { return n1Is(f, down) })

	// An operator clears the taint: None again, and an update of the event
	// without a new occurrence does not re-taint.
	e.setTaints("n1")
	poll(t, waitFor, "n1 None", func() bool { return n1Is(f, none) })
	ev.Message = "edited"
	e.updateEvent(ev)
	spotBarrier(t, e)
	if e.hasSpotTaint("n1") {
		t.Fatal("re-tainted without a new occurrence")
	}
	// A new occurrence does.
	ev.Count, ev.LastTimestamp = 2, metav1.NewTime(time.Now())
	e.updateEvent(ev)
	poll(t, waitFor, "re-taint on new occurrence", func() bool { return e.hasSpotTaint("n1") })
}

func TestSpotTaintOnReplacementNode(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	e := newCtrlEnv(t, f, nil, clusterNodes()...)
	e.run()
	e.createEvent(preemptEvent("a", "n1", "u1", time.Now()))
	poll(t, waitFor, "taint", func() bool { return e.hasSpotTaint("n1") })
	// Recreated: the old incarnation's events do not apply, a new one does.
	e.deleteNode("n1")
	e.createNode(node("n1", "u1-new", n1IPs))
	e.createEvent(preemptEvent("b", "n1", "u1", time.Now().Add(time.Second)))
	spotBarrier(t, e)
	if e.hasSpotTaint("n1") {
		t.Fatal("replacement tainted by its predecessor's event")
	}
	e.createEvent(preemptEvent("c", "n1", "u1-new", time.Now().Add(2*time.Second)))
	poll(t, waitFor, "replacement tainted by its own event", func() bool { return e.hasSpotTaint("n1") })
}

func TestWithSpotEvictionTaint(t *testing.T) {
	noExec := v1.Taint{Key: backendpool.TaintDraining, Value: "x", Effect: v1.TaintEffectNoExecute}
	tests := []struct {
		name string
		in   []v1.Taint
		want []v1.Taint
	}{
		{"none", nil, []v1.Taint{taintSpot}},
		{"keeps others", []v1.Taint{taintOOS}, []v1.Taint{taintOOS, taintSpot}},
		{"same key and effect gets the value", []v1.Taint{taintOther}, []v1.Taint{taintSpot}},
		{"other effect kept", []v1.Taint{noExec}, []v1.Taint{noExec, taintSpot}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := withSpotEvictionTaint(append([]v1.Taint(nil), tc.in...))
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if !got[i].MatchTaint(&tc.want[i]) || got[i].Value != tc.want[i].Value {
					t.Errorf("taint %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestOccurrence(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }
	tests := []struct {
		name string
		ev   v1.Event
		want time.Time
	}{
		{"last timestamp", v1.Event{FirstTimestamp: at(0), LastTimestamp: at(time.Minute)}, t0.Add(time.Minute)},
		{"event time", v1.Event{EventTime: metav1.NewMicroTime(t0.Add(2 * time.Second))}, t0.Add(2 * time.Second)},
		{"series", v1.Event{EventTime: metav1.NewMicroTime(t0), Series: &v1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(t0.Add(time.Hour))}}, t0.Add(time.Hour)},
		{"creation only", v1.Event{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: at(5 * time.Second)}}, t0.Add(5 * time.Second)},
	}
	for _, tc := range tests {
		if got := occurrence(&tc.ev); !got.Equal(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPreemptEventListOptions(t *testing.T) {
	var o metav1.ListOptions
	PreemptEventListOptions(&o)
	if o.FieldSelector != "involvedObject.kind=Node,reason=PreemptScheduled" && o.FieldSelector != "reason=PreemptScheduled,involvedObject.kind=Node" {
		t.Errorf("field selector %q", o.FieldSelector)
	}
}

func TestNewControllerValidation(t *testing.T) {
	f := newFakeARM(t)
	mgr := newTestManager(t, f)
	if _, err := NewController(nil, mgr, nil, nil); err == nil {
		t.Error("nil nodes accepted")
	}
	if _, err := NewSpotController(nil, nil, nil, nil, nil); err == nil {
		t.Error("nil clients accepted")
	}
}
