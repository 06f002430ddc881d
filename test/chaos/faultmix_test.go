package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestFaultMix: for each seed, a churn of events while a fifth of the ARM
// calls fail (during the churn and FaultTail after it); when the faults
// stop, verify must come clean within the bound; then changes made in
// Azure out of band must be repaired by the drift pass within its period,
// and a restart without change must make no ARM write.
func TestFaultMix(t *testing.T) {
	var nsg nsgTally
	for seed := 1; seed <= suite.params.Seeds; seed++ {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) { faultMixSeed(t, uint64(seed), &nsg) })
	}
	if nsg.calls == nil {
		return // no seed got to its churn
	}
	nsg.check(t)
	t.Logf("network security group calls under faults: %v GET, %v PUT (faulted: %v, %v); from the churn until clean: %v GET, %v PUT",
		nsg.calls["GET"], nsg.calls["PUT"], nsg.faulted["GET"], nsg.faulted["PUT"], nsg.reached["GET"], nsg.reached["PUT"])
}

func faultMixSeed(t *testing.T, seed uint64, nsg *nsgTally) {
	p := suite.params
	ctx := context.Background()
	resetCluster(t)
	c := newChecker(t)
	w := newWorld(t, seed, fmt.Sprintf("fm%d", seed))
	r := startReplica(t, "a", false)
	if err := w.populate(ctx, 6, 8); err != nil {
		t.Fatal(err)
	}
	initial := c.waitClean(t, 2*time.Minute)

	mix := installFaults(t, p.FaultRate)
	churnStart := time.Now()
	if err := w.run(ctx, p.Events, nil); err != nil {
		mix.stop()
		t.Fatal(err)
	}
	churn := time.Since(churnStart)
	// The faults stay for FaultTail after the last event, so that the
	// controller's work on the churn's last events is faulted too.
	time.Sleep(p.FaultTail) // a fixed span of faults, not synchronisation
	fired := mix.stop()
	stopped := time.Now()
	reads, writes := armCalls(r.userAgent, churnStart)
	faulted := 0
	for _, rec := range suite.env.Emulator().Requests() {
		if rec.Faulted && !rec.Time.Before(churnStart) && rec.Time.Before(stopped) {
			faulted++
		}
	}
	targets := armTargets(churnStart, stopped)
	converged := c.waitClean(t, p.Bound)
	nsg.add(targets, armTargets(churnStart, time.Now()), w)
	verifyCLI(t)
	after, afterWrites := armCalls(r.userAgent, stopped)
	figure(t, "fault-mix", map[string]any{
		"seed": seed, "events": p.Events, "faultTailSeconds": p.FaultTail.Seconds(), "eventKinds": w.counts, "accessChanges": w.accessCounts, "churnSeconds": churn.Seconds(),
		"services": len(w.services), "nodes": len(w.nodes),
		"armCallsDuringChurn": reads + writes, "writesDuringChurn": writes, "faultedCalls": faulted,
		"faultShare": float64(faulted) / float64(max(reads+writes, 1)), "faultsByKind": fired, "armCallsByTarget": targets,
		"cleanSecondsAfterFaultsStopped": converged.Seconds(), "armCallsAfterFaultsStopped": after + afterWrites,
		"writesAfterFaultsStopped": afterWrites, "initialConvergeSeconds": initial.Seconds(),
	})
	driftRepaired(t, c, seed)
	restartWithoutChange(t, c, r, w)
}

// restartWithoutChange restarts the replica on a converged cluster and
// requires that it writes nothing: it waits until the restarted service
// controller has synced every Service again (EnsuredLoadBalancer; for a
// Service azlb refuses, which never gets that, SyncLoadBalancerFailed) and
// the replica's ARM calls have been quiet for 3 s.
func restartWithoutChange(t *testing.T, c *checker, r *replica, w *world) {
	t.Helper()
	ctx := context.Background()
	rep, err := c.check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	refused := map[svcRef]bool{}
	for _, f := range rep.Skipped {
		if key, ok := strings.CutPrefix(f.Object, "service "); ok && strings.HasPrefix(f.Message, "refused (") {
			ns, name, _ := strings.Cut(key, "/")
			refused[svcRef{ns, name}] = true
		}
	}
	before, beforeFailed := ensured(t, w, "EnsuredLoadBalancer"), ensured(t, w, "SyncLoadBalancerFailed")
	r.Stop(20 * time.Second)
	since := time.Now()
	r.restart(t)
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		now, failed := ensured(t, w, "EnsuredLoadBalancer"), ensured(t, w, "SyncLoadBalancerFailed")
		for _, ref := range w.services {
			if now[ref] <= before[ref] && (!refused[ref] || failed[ref] <= beforeFailed[ref]) {
				return false, nil
			}
		}
		last := since
		for _, rec := range suite.env.Emulator().Requests() {
			if rec.Kind == "arm" && strings.HasPrefix(rec.UserAgent, r.userAgent+" ") && rec.Time.After(last) {
				last = rec.Time
			}
		}
		return time.Since(last) > 3*time.Second, nil
	})
	if err != nil {
		now, failed := ensured(t, w, "EnsuredLoadBalancer"), ensured(t, w, "SyncLoadBalancerFailed")
		for _, ref := range w.services {
			if now[ref] <= before[ref] && (!refused[ref] || failed[ref] <= beforeFailed[ref]) {
				t.Logf("not synced since the restart: %s/%s (refused: %v)", ref.ns, ref.name, refused[ref])
			}
		}
		t.Fatalf("the restarted replica did not re-ensure every Service and go quiet: %v", err)
	}
	reads, writes := armCalls(r.userAgent, since)
	figure(t, "restart-without-change", map[string]any{"services": len(w.services), "nodes": len(w.nodes), "armReads": reads, "armWrites": writes,
		"secondsToQuiet": time.Since(since).Seconds() - 3})
	if writes != 0 {
		t.Errorf("a restart without change made %d ARM writes, want 0", writes)
	}
	if rep, err := c.check(ctx); err != nil || !rep.Clean() {
		t.Errorf("not clean after the restart: %v %v", err, rep)
	}
}

// ensured counts the events of a reason (EnsuredLoadBalancer,
// SyncLoadBalancerFailed) per Service.
func ensured(t *testing.T, w *world, reason string) map[svcRef]int32 {
	t.Helper()
	out := map[svcRef]int32{}
	for _, ns := range w.ns {
		evs, err := suite.cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reason})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			out[svcRef{ns, e.InvolvedObject.Name}] += max(e.Count, 1)
		}
	}
	return out
}
