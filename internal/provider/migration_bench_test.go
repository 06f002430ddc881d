package provider

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
)

// BenchmarkBasicMigration: a Basic cluster of 100 Services (45 on Dynamic
// Basic public IPs, 45 on Static ones, 10 internal) and a scale set of 10
// VMs in the Basic NIC-based pools, handed to azlb with loadBalancerSku
// standard; the service controller's 10 workers reconcile every Service,
// 25 ms of latency on every ARM call. Reports the time until every Service
// is back with its IP on the Standard load balancers, the migration proper
// (until both Basic load balancers are deleted), the outage window (from
// the first write that takes a node out of a Basic pool, when traffic
// through the Basic load balancers stops, to the end of the last write:
// every Service's frontend on a Standard load balancer and every node in
// its pools; no Service is out longer), and the ARM calls by kind.
//
//	go test -run '^$' -bench BenchmarkBasicMigration -benchtime 1x ./internal/provider/
func BenchmarkBasicMigration(b *testing.B) {
	// The migration logs a line per Service and step: not in the figures.
	klog.SetLogger(logr.Discard())
	defer klog.ClearLogger()
	var services []devenv.BasicService
	for i := range 100 {
		s := devenv.BasicService{Name: fmt.Sprintf("svc-%03d", i), Port: 80, Dynamic: i%2 == 0}
		if i >= 90 {
			s = devenv.BasicService{Name: fmt.Sprintf("ilb-%03d", i), Port: 80, Internal: true}
		}
		services = append(services, s)
	}
	for range b.N {
		b.StopTimer()
		h := newBasicHarnessWith(b, emulator.Options{Throttle: emulator.NoThrottle}, config.BackendPoolNodeIPConfiguration, devenv.BasicOptions{Nodes: 10, Services: services})
		list, err := h.cs.CoreV1().Services("demo").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		svcs := make([]*v1.Service, len(list.Items))
		for i := range list.Items {
			svcs[i] = &list.Items[i]
		}
		emu := h.env.Emulator()
		emu.SetLatency(benchLatency)
		emu.ResetRequests()
		b.StartTimer()
		start := time.Now()
		statuses := ensureAll(b, h.p, svcs, h.nodes)
		elapsed := time.Since(start)
		b.StopTimer()
		for i, st := range statuses {
			if want := h.seeded.IPs[svcs[i].Name]; st == nil || len(st.Ingress) != 1 || st.Ingress[0].IP != want {
				b.Fatalf("service %s: %+v, had %s", svcs[i].Name, st, want)
			}
		}
		h.checkMigrated(b, true)

		var migrated, firstDecouple, lastWrite time.Time
		calls := map[string]int{}
		total, writes := 0, 0
		for _, r := range emu.Requests() {
			if r.Kind != "arm" {
				continue
			}
			total++
			if r.Method != http.MethodGet {
				writes++
			}
			calls[r.Method+" "+callKind(r.Path)]++
			end := r.Time.Add(r.Duration)
			if r.Method == http.MethodGet {
				continue
			}
			if end.After(lastWrite) {
				lastWrite = end
			}
			kind := callKind(r.Path)
			switch {
			case r.Method == http.MethodDelete && kind == "load-balancer" && end.After(migrated):
				migrated = end
			case r.Method == http.MethodPut && (kind == "vmss" || kind == "vmss-vm" || kind == "nic") && (firstDecouple.IsZero() || r.Time.Before(firstDecouple)):
				firstDecouple = r.Time
			}
		}
		var kinds []string
		for k, n := range calls {
			kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
		}
		sort.Strings(kinds)
		b.Logf("ARM calls by kind: %s", strings.Join(kinds, " "))
		b.ReportMetric(elapsed.Seconds(), "s-all-services-back")
		b.ReportMetric(migrated.Sub(start).Seconds(), "s-basic-deleted")
		b.ReportMetric(lastWrite.Sub(firstDecouple).Seconds(), "s-outage-window")
		b.ReportMetric(float64(total), "arm-calls")
		b.ReportMetric(float64(writes), "arm-writes")
	}
}

// callKind names the resource an ARM path addresses.
func callKind(path string) string {
	p := strings.ToLower(path)
	for _, k := range []struct{ part, name string }{
		{"/operations/", "operation"}, {"/virtualmachines/", "vmss-vm"}, {"/virtualmachinescalesets", "vmss"},
		{"/networkinterfaces", "nic"}, {"/publicipaddresses", "public-ip"}, {"/backendaddresspools", "pool"},
		{"/loadbalancers", "load-balancer"}, {"/subnets/", "subnet"},
	} {
		if strings.Contains(p, k.part) {
			return k.name
		}
	}
	return "other"
}
