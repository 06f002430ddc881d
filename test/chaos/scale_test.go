package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// The scale of docs/reliability.md.
const (
	scaleNodes            = 5000
	scaleServices         = 1000
	scaleEndpointsPerSvc  = 10 // 10,000 endpoints
	scaleLocalServicesPct = 30
	scaleAgentPools       = 4 // one Standard load balancer each
	scaleRSSTargetMiB     = 300
)

// scaleConfig: four Standard load balancers, each the primary of one agent
// pool of 1,250 nodes; Services spread over them (250 rules each, under a
// NIC's 300).
func scaleConfig() map[string]any {
	var cfgs []map[string]any
	for i := 1; i <= scaleAgentPools; i++ {
		name := fmt.Sprintf("lb-%d", i)
		if i == 1 {
			name = "kubernetes"
		}
		cfgs = append(cfgs, map[string]any{"name": name, "primaryVMSet": fmt.Sprintf("pool%d", i)})
	}
	return map[string]any{"multipleStandardLoadBalancerConfigurations": cfgs, "maximumLoadBalancerRuleCount": 300}
}

// BenchmarkScale_5000Nodes1000Services10000Endpoints: the real controller
// (no race detector) starts on a cluster of 5,000 nodes, 1,000 LoadBalancer
// Services (30% externalTrafficPolicy Local) and 10,000 ready endpoints on
// four load balancers. Reported: the time until azlb verify is clean, the
// ARM calls until then, the controller's peak RSS (target <= 300 MiB) and
// CPU seconds, and the ARM calls of the steady state over
// AZLB_SCALE_IDLE (default 2m, longer than the service controller's 100 s
// node sync), which must be 0.
//
//	go test -run '^$' -bench Scale -benchtime 1x ./test/chaos/
func BenchmarkScale_5000Nodes1000Services10000Endpoints(b *testing.B) {
	for range b.N {
		scaleRun(b)
	}
}

func scaleRun(b *testing.B) {
	ctx := context.Background()
	resetCluster(b)
	rnd := rand.New(rand.NewPCG(5000, 1000))
	const ns = "scale"
	newNamespace(b, ns, nil)
	nodes := make([]string, scaleNodes)
	setupStart := time.Now()
	parallel(b, scaleNodes, func(i int) error {
		name := fmt.Sprintf("sc-n%04d", i)
		nodes[i] = name
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, "kubernetes.azure.com/agentpool": fmt.Sprintf("pool%d", 1+i%scaleAgentPools)}}}
		n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: fmt.Sprintf("10.%d.%d.%d", 240+i/62500, i/250%250, 4+i%250)}}
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		_, err := suite.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		return err
	})
	local := make([]bool, scaleServices)
	epNodes := make([][]string, scaleServices)
	for i := range scaleServices {
		local[i] = rnd.IntN(100) < scaleLocalServicesPct
		for range scaleEndpointsPerSvc {
			epNodes[i] = append(epNodes[i], nodes[rnd.IntN(scaleNodes)])
		}
	}
	parallel(b, scaleServices, func(i int) error {
		name := fmt.Sprintf("s%04d", i)
		svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
				Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}}}
		if local[i] {
			svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		}
		if _, err := suite.cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return err
		}
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-scale", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Port: ptr.To[int32](8080)}},
		}
		for j, node := range epNodes[i] {
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", 100+i/250, i%250, 10+j)},
				NodeName: ptr.To(node), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
		}
		_, err := suite.cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{})
		return err
	})
	b.Logf("cluster of %d nodes, %d Services, %d endpoints created in %v", scaleNodes, scaleServices, scaleServices*scaleEndpointsPerSvc, time.Since(setupStart))

	c := newCheckerWith(b, scaleConfig())
	suite.env.Emulator().ResetRequests()
	start := time.Now()
	r := startReplicaWith(b, "scale", false, scaleConfig())
	var last error
	err := wait.PollUntilContextTimeout(ctx, 5*time.Second, 30*time.Minute, false, func(ctx context.Context) (bool, error) {
		rep, err := c.check(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		last = fmt.Errorf("%d differences", len(rep.Findings))
		return rep.Clean(), nil
	})
	if err != nil {
		b.Fatalf("not converged after 30 minutes: %v", last)
	}
	converged := time.Since(start)
	reads, writes := armCalls(r.userAgent, start)
	convergeCPU := procCPU(b, r.Cmd.Process.Pid)

	// Steady state: once the controller has been quiet for 10 s, count its
	// ARM calls over the idle window (the drift pass's reads only).
	idle := 2 * time.Minute
	if d, err := time.ParseDuration(os.Getenv("AZLB_SCALE_IDLE")); err == nil && d > 0 {
		idle = d
	}
	waitQuiet(b, r, 10*time.Second, 5*time.Minute)
	idleStart, idleCPU := time.Now(), procCPU(b, r.Cmd.Process.Pid)
	<-time.After(idle) // the span over which idling is measured, not synchronisation
	idleReads, idleWrites := armCalls(r.userAgent, idleStart)
	rss := procRSSPeakMiB(b, r.Cmd.Process.Pid)
	totalCPU := procCPU(b, r.Cmd.Process.Pid)

	b.ReportMetric(converged.Seconds(), "s-to-verify-clean")
	b.ReportMetric(float64(reads), "arm-reads")
	b.ReportMetric(float64(writes), "arm-writes")
	b.ReportMetric(rss, "peak-rss-MiB")
	b.ReportMetric(convergeCPU, "cpu-s-to-converge")
	b.ReportMetric((totalCPU-idleCPU)/time.Since(idleStart).Seconds()*100, "idle-cpu-%")
	b.ReportMetric(float64(idleReads+idleWrites), "idle-arm-calls")
	b.Logf("FIGURE scale: converged in %v, %d ARM reads, %d writes, peak RSS %.0f MiB, CPU %.1f s to converge, idle %v: %d ARM calls",
		converged, reads, writes, rss, convergeCPU, idle, idleReads+idleWrites)
	// Idle, only the drift pass reads (3 reads per pass: load balancers,
	// public IPs, the NSG), and nothing is written.
	if maxReads := 3 * (int(idle/driftPeriod) + 1); idleWrites != 0 || idleReads > maxReads {
		b.Errorf("the steady state made %d ARM reads and %d writes in %v, want at most %d reads (the drift pass's) and 0 writes",
			idleReads, idleWrites, idle, maxReads)
	}
	if rss > scaleRSSTargetMiB {
		b.Errorf("peak RSS %.0f MiB, target <= %d MiB", rss, scaleRSSTargetMiB)
	}
	r.Stop(20 * time.Second)
}

// parallel runs f for 0..n-1 on 16 workers; the first error fails b.
func parallel(b *testing.B, n int, f func(i int) error) {
	b.Helper()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	work := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := f(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
}

// waitQuiet waits until the replica has made no ARM call for quiet.
func waitQuiet(tb testing.TB, r *replica, quiet, timeout time.Duration) {
	tb.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true, func(context.Context) (bool, error) {
		lastCall := r.started
		for _, rec := range suite.env.Emulator().Requests() {
			if rec.Kind == "arm" && strings.HasPrefix(rec.UserAgent, r.userAgent+" ") && rec.Time.After(lastCall) {
				lastCall = rec.Time
			}
		}
		return time.Since(lastCall) > quiet, nil
	})
	if err != nil {
		tb.Fatalf("replica %s never went quiet for %v", r.name, quiet)
	}
}

// procRSSPeakMiB is the process's peak resident set (VmHWM).
func procRSSPeakMiB(tb testing.TB, pid int) float64 {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb / 1024
		}
	}
	tb.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// procCPU is the process's user + system CPU seconds (clock ticks of
// 1/100 s, Linux's USER_HZ).
func procCPU(tb testing.TB, pid int) float64 {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	s := string(b)
	// Fields after the command name in parentheses: state is field 3,
	// utime 14 and stime 15.
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		tb.Fatalf("short /proc/%d/stat", pid)
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		tb.Fatalf("/proc/%d/stat: %v %v", pid, err1, err2)
	}
	return (u + st) / 100
}
