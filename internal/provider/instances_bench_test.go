package provider

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/compute"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/testutil"
)

// BenchmarkInstanceMetadata: the cloud node controller asks InstancesV2 for
// the metadata of every node each --node-status-update-frequency; here
// 5,000 nodes, the VMs of 5 scale sets of 1,000, 64 callers at once, with
// L = 25 ms per ARM call. One iteration is one cache period: every node's
// metadata, then the clock moves past the TTL. Reported: VM listings and
// NIC listings per scale set per period (the bound: one of each), other
// ARM requests, and the time to answer all 5,000.
//
//	go test -run '^$' -bench BenchmarkInstanceMetadata -benchtime 3x ./internal/provider/
func BenchmarkInstanceMetadata(b *testing.B) {
	const (
		scaleSets = 5
		perSet    = 1000
		callers   = 64
	)
	ctx := context.Background()
	env := testutil.StartEmulator(b, emulator.Options{}, nil)
	cmp, err := env.Compute(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer cmp.Close()
	var nodes []*v1.Node
	for s := 0; s < scaleSets; s++ {
		vms, err := cmp.CreateScaleSet(ctx, fmt.Sprintf("pool%d", s), perSet, devenv.ScaleSetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for _, vm := range vms {
			n := testutil.Node(vm.Name)
			n.Spec.ProviderID = vm.ProviderID
			nodes = append(nodes, n)
		}
	}
	clients := testutil.Clients(b, env, azure.ClientOptions{Source: "bench"})
	clk := clocktesting.NewFakeClock(time.Now())
	inv := testutil.Inventory(b, compute.ClientsOf(clients), clk)
	inst := NewInstances(inv, 0)
	env.Emulator().SetLatency(25 * time.Millisecond)
	env.Emulator().ResetRequests()
	var vmLists, nicLists, other int
	var elapsed time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		work := make(chan *v1.Node)
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				for n := range work {
					md, err := inst.InstanceMetadata(ctx, n)
					if err != nil || len(md.NodeAddresses) < 2 {
						b.Errorf("%s: %+v %v", n.Name, md, err)
					}
				}
			})
		}
		for _, n := range nodes {
			work <- n
		}
		close(work)
		wg.Wait()
		elapsed += time.Since(start)
		clk.Step(inv.TTL())
	}
	b.StopTimer()
	for _, r := range env.Emulator().Requests() {
		switch {
		case r.Kind != "arm":
		case r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/virtualMachines"):
			vmLists++
		case r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/networkInterfaces"):
			nicLists++
		default:
			other++
		}
	}
	periods := float64(b.N)
	b.ReportMetric(float64(vmLists)/periods/scaleSets, "vm-lists/vmss/period")
	b.ReportMetric(float64(nicLists)/periods/scaleSets, "nic-lists/vmss/period")
	b.ReportMetric(float64(other)/periods, "other-calls/period")
	b.ReportMetric(float64(elapsed.Milliseconds())/periods, "ms/period")
	b.Logf("%d nodes in %d scale sets, %d periods: %d VM and %d NIC listings, %d other ARM calls; %v per period",
		len(nodes), scaleSets, b.N, vmLists, nicLists, other, elapsed/time.Duration(b.N))
}
