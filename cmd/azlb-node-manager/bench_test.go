package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/compute"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/imds"
	"github.com/azlb/azlb/internal/provider"
	"github.com/azlb/azlb/internal/testutil"
)

// BenchmarkJoin1000: 1,000 new nodes (the VMs of 5 scale sets of 200, no
// providerID yet) join at once; each needs its instance metadata to be
// initialized. With the node manager every node asks its own VM's IMDS
// (all 1,000 at once: one node manager per node); with the controller
// manager's cloud-node-controller, azlb's ARM-backed InstancesV2 answers
// them from a cold cache with the framework's default single worker
// (--concurrent-node-syncs=1). ARM calls take 25 ms. Reported: the time
// until every node has its metadata and the ARM calls made, per mode. The
// API server writes (one update and one status patch per node, in both
// modes) are not included.
//
//	go test -run '^$' -bench BenchmarkJoin1000 -benchtime 1x ./cmd/azlb-node-manager/
func BenchmarkJoin1000(b *testing.B) {
	const scaleSets, perSet = 5, 200
	ctx := context.Background()
	env := testutil.StartEmulator(b, emulator.Options{}, nil)
	cmp, err := env.Compute(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer cmp.Close()
	var vms []devenv.NodeVM
	for s := range scaleSets {
		set, err := cmp.CreateScaleSet(ctx, fmt.Sprintf("pool%d", s), perSet, devenv.ScaleSetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		vms = append(vms, set...)
	}
	env.Emulator().SetLatency(25 * time.Millisecond)
	hc := env.HTTPClient()
	for i := 0; i < b.N; i++ {
		env.Emulator().ResetRequests()
		start := time.Now()
		joinAll(b, vms, 0, func(vm devenv.NodeVM) cloudprovider.InstancesV2 {
			set, inst, _ := strings.Cut(vm.ProviderID[strings.LastIndex(vm.ProviderID, "virtualMachineScaleSets/")+len("virtualMachineScaleSets/"):], "/virtualMachines/")
			return &imds.Instances{NodeName: vm.Name, Client: &imds.Client{HTTP: hc,
				Endpoint: env.URL + emulator.IMDSPath(devenv.SubscriptionID, devenv.ResourceGroup, set+"_"+inst)}}
		})
		nmTime, nmARM := time.Since(start), armCalls(env)

		env.Emulator().ResetRequests()
		clients := testutil.Clients(b, env, azure.ClientOptions{Source: "bench"})
		shared := provider.NewInstances(testutil.Inventory(b, compute.ClientsOf(clients), nil), 0)
		start = time.Now()
		joinAll(b, vms, 1, func(devenv.NodeVM) cloudprovider.InstancesV2 { return shared })
		ccmTime, ccmARM := time.Since(start), armCalls(env)
		b.Logf("cloud-node-controller's ARM calls: %v", armCallKinds(env))

		b.ReportMetric(nmTime.Seconds(), "node-manager-s")
		b.ReportMetric(float64(nmARM), "node-manager-arm-calls")
		b.ReportMetric(ccmTime.Seconds(), "cloud-node-controller-s")
		b.ReportMetric(float64(ccmARM), "cloud-node-controller-arm-calls")
		b.Logf("%d nodes: node manager %v, %d ARM calls; cloud-node-controller %v, %d ARM calls",
			len(vms), nmTime.Round(time.Millisecond), nmARM, ccmTime.Round(time.Millisecond), ccmARM)
	}
}

// joinAll asks every VM's node's metadata with workers callers (0: one per
// node, all at once).
func joinAll(b *testing.B, vms []devenv.NodeVM, workers int, instances func(devenv.NodeVM) cloudprovider.InstancesV2) {
	if workers == 0 {
		workers = len(vms)
	}
	work := make(chan devenv.NodeVM, len(vms))
	for _, vm := range vms {
		work <- vm
	}
	close(work)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for vm := range work {
				node := &v1.Node{}
				node.Name = vm.Name
				md, err := instances(vm).InstanceMetadata(context.Background(), node)
				if err != nil || md.ProviderID != vm.ProviderID {
					b.Errorf("%s: %+v %v", vm.Name, md, err)
				}
			}
		})
	}
	wg.Wait()
}

func armCalls(env *devenv.Env) int {
	n := 0
	for _, r := range env.Emulator().Requests() {
		if r.Kind == "arm" {
			n++
		}
	}
	return n
}

// armCallKinds counts the ARM calls by method and the path's last
// segment (virtualMachines, networkInterfaces, ...).
func armCallKinds(env *devenv.Env) map[string]int {
	out := map[string]int{}
	for _, r := range env.Emulator().Requests() {
		if r.Kind == "arm" {
			out[r.Method+" "+r.Path[strings.LastIndexByte(r.Path, '/')+1:]]++
		}
	}
	return out
}
