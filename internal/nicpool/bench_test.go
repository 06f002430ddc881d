package nicpool_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/nicpool"
)

// BenchmarkScaleSetJoin: 100 new VMs of one scale set join a NIC-based
// pool, against the emulator with L = 25 ms per ARM call: one model PUT,
// then the VM PUTs in rounds of the batch size (putVMSSVMBatchSize for a
// scale set tagged aks-managed-coordination; 1 otherwise). Reported: model
// PUTs, VM PUTs and rounds (a round is a group of VM PUTs sent together,
// the next one sent once they were accepted), and the wall time.
//
//	go test -run '^$' -bench BenchmarkScaleSetJoin -benchtime 3x ./internal/nicpool/
func BenchmarkScaleSetJoin(b *testing.B) {
	for _, batch := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("vms=100/batch=%d", batch), func(b *testing.B) { benchJoin(b, 100, batch) })
	}
}

func benchJoin(b *testing.B, vms, batch int) {
	const latency = 25 * time.Millisecond
	var models, puts, rounds int
	var wall time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := newEnv(b, batch)
		ctx := context.Background()
		tags := map[string]string{}
		if batch > 1 {
			tags[nicpool.CoordinationTag] = ""
		}
		created, err := e.cmp.CreateScaleSet(ctx, "pool1", vms, devenv.ScaleSetOptions{Tags: tags})
		if err != nil {
			b.Fatal(err)
		}
		nodes := make([]*v1.Node, 0, vms)
		for _, vm := range created {
			nodes = append(nodes, nodeOf(vm))
		}
		e.dev.Emulator().SetLatency(latency)
		e.dev.Emulator().ResetRequests()
		b.StartTimer()
		start := time.Now()
		res, err := e.w.EnsureMembers(ctx, nicpool.Pool{ID: e.pool, Family: v1.IPv4Protocol}, nodes)
		wall += time.Since(start)
		b.StopTimer()
		if err != nil || len(res.Members) != vms {
			b.Fatalf("%d members: %v", len(res.Members), err)
		}
		m, p, r := countRounds(e.dev.Emulator().Requests())
		models, puts, rounds = models+m, puts+p, rounds+r
	}
	n := float64(b.N)
	b.ReportMetric(float64(models)/n, "model-puts")
	b.ReportMetric(float64(puts)/n, "vm-puts")
	b.ReportMetric(float64(rounds)/n, "rounds")
	b.ReportMetric(float64(wall.Milliseconds())/n, "wall-ms")
	b.Logf("%d VMs, batch %d: %.0f model PUT, %.0f VM PUTs in %.0f rounds (bound: 1 and ceil(%d/%d) = %d), %v per join",
		vms, batch, float64(models)/n, float64(puts)/n, float64(rounds)/n, vms, batch, (vms+batch-1)/batch, wall/time.Duration(b.N))
}

// countRounds counts the scale set model PUTs and the scale set VM PUTs of
// a request log, and the rounds the VM PUTs were sent in: a PUT that starts
// after every PUT of the current round was answered starts a new round.
func countRounds(reqs []emulator.RequestRecord) (models, puts, rounds int) {
	type span struct{ start, end time.Time }
	var vmPuts []span
	for _, r := range reqs {
		if r.Method != http.MethodPut || !strings.Contains(r.Path, "/virtualMachineScaleSets/") {
			continue
		}
		if strings.Contains(r.Path, "/virtualMachines/") {
			vmPuts = append(vmPuts, span{r.Time, r.Time.Add(r.Duration)})
		} else {
			models++
		}
	}
	sort.Slice(vmPuts, func(i, j int) bool { return vmPuts[i].start.Before(vmPuts[j].start) })
	var roundEnd time.Time
	for i, s := range vmPuts {
		if i == 0 || !s.start.Before(roundEnd) {
			rounds++
			roundEnd = s.end
		} else if s.end.After(roundEnd) {
			roundEnd = s.end
		}
	}
	return models, len(vmPuts), rounds
}
