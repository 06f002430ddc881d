package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/nodeagent"
	"github.com/azlb/azlb/internal/privatelink"
	"github.com/azlb/azlb/internal/testutil"
	"github.com/azlb/azlb/internal/verify"
)

// TestControllerAndVerifyAgree is the differential test of issue 37: it
// generates Services from a seed (random combinations of annotations,
// source ranges valid and invalid, service tags, deny-all, no NSG rule,
// protocols, IP families, internal and public, floating IP, shared IPs,
// Private Link Service settings, and settings azlb refuses), lets the
// real controller converge against the emulator, and requires that
//
//   - azlb verify is clean, each Service either served (an ingress IP) or
//     refused (one SKIP line), and one that must be refused (SCTP,
//     contradictory settings, Private Link Service settings that cannot be
//     honoured, an address nobody has) is refused, one that must be served
//     is served (of two Services asking for the same IP and port, either);
//   - the data plane admits exactly the sources each served Service's spec
//     allows (docs/security-groups.md, Who may connect), on IPv4, from the
//     Internet, from sources inside and outside its ranges, from a service
//     tag's prefix and, for internal Services, from the virtual network;
//   - a second controller start writes nothing.
//
// make test runs seed 37 with 200 Services; AZLB_DIFF_SEED and
// AZLB_DIFF_SERVICES change them (make fuzz runs more seeds, longer).
// A disagreement found is fixed in whichever side is wrong, and its seed
// kept in diffSeeds.
func TestControllerAndVerifyAgree(t *testing.T) {
	seeds := diffSeeds
	if v, err := strconv.ParseUint(os.Getenv("AZLB_DIFF_SEED"), 10, 64); err == nil {
		seeds = []uint64{v}
	}
	n := 200
	if v, err := strconv.Atoi(os.Getenv("AZLB_DIFF_SERVICES")); err == nil && v > 0 {
		n = v
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) { differentialSeed(t, seed, n) })
	}
}

// diffSeeds are the seeds make test runs: 37, and every seed that found a
// disagreement.
var diffSeeds = []uint64{37}

// diffWorld is what the generator knows of the cluster: the address plan
// of the sources it tests from.
type diffWorld struct {
	rnd          *rand.Rand
	ns           string
	nodeNet      netip.Prefix
	clientNet    netip.Prefix
	ranges       []netip.Prefix // valid ranges Services are given (inside clientNet)
	tagNet       netip.Prefix   // AzureFrontDoor.Backend, as the emulator knows it
	sources      []netip.Addr   // the IPv4 sources the data plane is tried from (not in the virtual network)
	vnetSource   netip.Addr     // a source in the virtual network (not a node)
	sharedPrefix string
	// denied are the (IPv4) addresses a deny-all covers: those of the
	// served Services that call for one. A deny-all holds addresses, not
	// ports: it covers the other Services sharing the address too
	// (docs/security-groups.md, Shared IPs).
	denied map[netip.Addr]bool
}

// diffService is one generated Service and what its spec allows, written
// from docs/security-groups.md and docs/load-balancers.md by the test.
type diffService struct {
	svc *v1.Service
	// mustRefuse: a setting azlb always refuses (why); mayRefuse: it may
	// lose a shared IP's port to another Service.
	mustRefuse string
	mayRefuse  bool
	internal   bool
	floating   bool
	// The access intent.
	disabled  bool
	invalid   bool // an invalid or blank range, tag or setting: fails closed
	restrict  bool // some range, tag or invalid value given
	denyAll   bool // the deny-all annotation with sources to keep
	allowed   []netip.Prefix
	tagSource bool // AzureFrontDoor.Backend listed
}

func differentialSeed(t *testing.T, seed uint64, n int) {
	ctx := context.Background()
	// Room for every Service's address: a /24 holds 240 Services' public
	// IPs, or internal addresses and NAT IPs; more get wider ranges.
	bits := 24
	for size := 200; size < n && bits > 16; size *= 2 {
		bits--
	}
	public := loopbackNet(t, bits)
	nodeNet := loopbackNet(t, bits, public)
	clientNet := loopbackNet(t, 24, public, nodeNet)
	w := &diffWorld{rnd: rand.New(rand.NewPCG(seed, 0xd1ff)), nodeNet: nodeNet, clientNet: clientNet,
		sharedPrefix: fmt.Sprintf("diff-%d-", seed)}
	sub := func(off, bits int) netip.Prefix { return netip.PrefixFrom(testutil.Nth(clientNet, off), bits) }
	w.ranges = []netip.Prefix{sub(0, 26), sub(64, 26), sub(0, 25), sub(128, 27)}
	w.tagNet = sub(224, 27)
	w.sources = []netip.Addr{netip.MustParseAddr("127.0.0.1"), testutil.Nth(clientNet, 5), testutil.Nth(clientNet, 70),
		testutil.Nth(clientNet, 130), testutil.Nth(clientNet, 200), testutil.Nth(clientNet, 230)}
	w.vnetSource = testutil.Nth(nodeNet, 1<<(32-nodeNet.Bits())-2) // the last but one: never a node's or a frontend's

	// Hundreds of Services at once, 40 workers: the test is about access,
	// not Azure's limits, which would hold its writes back for seconds
	// (make fuzz: minutes). Unlimited calls, said so.
	env, err := devenv.Start(ctx, t.TempDir(), emulator.Options{DataPlane: true, PublicIPv4CIDR: public.String(),
		ServiceTags: map[string][]netip.Prefix{"AzureFrontDoor.Backend": {w.tagNet}}, Throttle: emulator.NoThrottle},
		nil, devenv.WithNetwork(devenv.NodeNetwork(nodeNet)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() }) // after the controller stops
	var agents []nodeagent.Node
	var nodeNames []string
	for i := range 3 {
		name, ip := fmt.Sprintf("diff-n%d", i+1), testutil.Nth(nodeNet, i+1)
		createNode(t, name, ip.String(), nil)
		nodeNames = append(nodeNames, name)
		agents = append(agents, nodeagent.Node{Name: name, IPs: []string{ip.String()}})
	}
	runProxies(t, agents)
	cfgPath := writeConfigFor(t, env, nil)
	// More workers than the default 10 (a flag the chart passes through):
	// the Services are created at once.
	workers := "--concurrent-service-syncs=40"
	ctrl := startController(t, "a", cfgPath, false, workers)
	w.ns = createNamespace(t)

	// Generate and create the Services (with a ready endpoint on every
	// node), all at once.
	var all []*diffService
	for i := range n {
		all = append(all, w.service(i))
	}
	for _, d := range all {
		created, err := suite.cs.CoreV1().Services(w.ns).Create(ctx, d.svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s: %v", d.svc.Name, err)
		}
		d.svc = created
		if _, err := suite.cs.DiscoveryV1().EndpointSlices(w.ns).Create(ctx, endpointSlice(w.ns, d.svc.Name, nodeNames...), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Whatever happens, none is left behind (its finalizer dropped should
	// no controller run any more): one would join the next test's load
	// balancer.
	t.Cleanup(func() {
		if remaining := w.deleteAll(t, all, 30*time.Second); remaining > 0 {
			for _, d := range all {
				if s, err := suite.cs.CoreV1().Services(w.ns).Get(context.Background(), d.svc.Name, metav1.GetOptions{}); err == nil && len(s.Finalizers) > 0 {
					s.Finalizers = nil
					_, _ = suite.cs.CoreV1().Services(w.ns).Update(context.Background(), s, metav1.UpdateOptions{})
				}
			}
		}
	})

	// Converged: verify clean, and every Service either served or refused.
	cfg, err := config.LoadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	clients := armClients(t, env)
	start := time.Now()
	var rep *verify.Report
	var pending []string
	converged := func(ctx context.Context) bool {
		r, err := verify.Run(ctx, cfg, clients, suite.cs)
		if err != nil {
			return false // reads during the convergence: try again
		}
		rep, pending = r, nil
		skipped := skippedServices(r)
		for _, d := range all {
			cur, err := suite.cs.CoreV1().Services(w.ns).Get(ctx, d.svc.Name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			if len(cur.Status.LoadBalancer.Ingress) == 0 && skipped[d.svc.Name] == "" {
				pending = append(pending, d.svc.Name)
			}
			d.svc = cur
		}
		return r.Clean() && len(pending) == 0
	}
	for deadline := time.Now().Add(4 * time.Minute); !converged(ctx); {
		if time.Now().After(deadline) {
			var b strings.Builder
			if rep != nil {
				_ = rep.Write(&b)
			}
			t.Fatalf("not converged in 4 minutes: Services neither served nor refused: %v; the last report:\n%s", pending, b.String())
		}
		time.Sleep(2 * time.Second) // polling the controller's convergence
	}
	t.Logf("seed %d: %d Services converged in %v", seed, n, time.Since(start).Round(time.Second))

	// Served or refused as the documentation says.
	skipped := skippedServices(rep)
	served, refused := 0, 0
	for _, d := range all {
		has := len(d.svc.Status.LoadBalancer.Ingress) > 0
		switch {
		case has && skipped[d.svc.Name] != "":
			t.Errorf("%s has ingress %v, yet verify skips it: %s", d.svc.Name, d.svc.Status.LoadBalancer.Ingress, skipped[d.svc.Name])
		case has && d.mustRefuse != "":
			t.Errorf("%s is served (%v), but azlb must refuse it: %s", d.svc.Name, d.svc.Status.LoadBalancer.Ingress, d.mustRefuse)
		case !has && d.mustRefuse == "" && !d.mayRefuse:
			t.Errorf("%s is refused (%s), but nothing in its spec calls for that: %s", d.svc.Name, skipped[d.svc.Name], describe(d.svc))
		case has:
			served++
		default:
			refused++
		}
	}
	t.Logf("seed %d: %d served, %d refused", seed, served, refused)

	// The data plane admits exactly what each served Service's spec
	// allows, on its TCP ports.
	probed := time.Now()
	w.checkDataPlane(t, all)
	t.Logf("data plane checked in %v", time.Since(probed).Round(time.Second))

	// A second start writes nothing.
	ctrl.stop()
	env.Emulator().ResetRequests()
	restarted := time.Now()
	startController(t, "b", cfgPath, false, workers)
	// Synced again: every served Service ensured, every refused one
	// failed, since the restart (the service controller records each
	// event once that sync's writes are done).
	eventually(t, 3*time.Minute, "the restarted controller synced every Service", func(ctx context.Context) (bool, error) {
		evs, err := suite.cs.CoreV1().Events(w.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		synced := map[string]bool{}
		for _, e := range evs.Items {
			if (e.Reason == "EnsuredLoadBalancer" || e.Reason == "SyncLoadBalancerFailed") && !e.LastTimestamp.Time.Before(restarted.Truncate(time.Second)) {
				synced[e.InvolvedObject.Name] = true
			}
		}
		for _, d := range all {
			if !synced[d.svc.Name] {
				return false, nil
			}
		}
		return true, nil
	})
	var writes []string
	for _, r := range env.Emulator().Requests() {
		if r.Kind == "arm" && r.Method != http.MethodGet && r.Method != http.MethodHead {
			writes = append(writes, r.Method+" "+r.Path)
		}
	}
	if len(writes) > 0 {
		t.Errorf("a second start wrote %d times: %v", len(writes), writes[:min(len(writes), 10)])
	}
	t.Logf("second start quiet after %v", time.Since(restarted).Round(time.Second))
	if r, err := verify.Run(ctx, cfg, clients, suite.cs); err != nil || !r.Clean() {
		t.Errorf("not clean after the second start: %v %v", err, r)
	}

	// Every Service, served or refused, is deleted, and nothing of them
	// is left.
	deleted := time.Now()
	if remaining := w.deleteAll(t, all, 3*time.Minute); remaining > 0 {
		t.Fatalf("%d Services not deleted within 3 minutes", remaining)
	}
	t.Logf("every Service deleted in %v", time.Since(deleted).Round(time.Second))
	if r, err := verify.Run(ctx, cfg, clients, suite.cs); err != nil || !r.Clean() {
		var b strings.Builder
		if r != nil {
			_ = r.Write(&b)
		}
		t.Errorf("not clean once every Service was deleted: %v\n%s", err, b.String())
	}
}

// deleteAll deletes the Services and waits at most timeout for them to be
// gone; it returns how many are left.
func (w *diffWorld) deleteAll(t *testing.T, all []*diffService, timeout time.Duration) int {
	t.Helper()
	ctx := context.Background()
	for _, d := range all {
		deleteService(t, w.ns, d.svc.Name)
	}
	left := len(all)
	for deadline := time.Now().Add(timeout); left > 0 && time.Now().Before(deadline); time.Sleep(time.Second) { // polling the deletions
		l, err := suite.cs.CoreV1().Services(w.ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			left = len(l.Items)
		}
	}
	return left
}

// loopbackNet is a random loopback IPv4 range of the given length that
// overlaps none of avoid.
func loopbackNet(t *testing.T, bits int, avoid ...netip.Prefix) netip.Prefix {
	t.Helper()
	for {
		p, err := testutil.LoopbackNet(t).Addr().Prefix(bits)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(avoid, p.Overlaps) {
			return p
		}
	}
}

// skippedServices maps the names of the Services verify skipped to why.
func skippedServices(r *verify.Report) map[string]string {
	out := map[string]string{}
	for _, f := range r.Skipped {
		if rest, ok := strings.CutPrefix(f.Object, "service "); ok {
			_, name, _ := strings.Cut(rest, "/")
			out[name] = f.Message
		}
	}
	return out
}

func describe(svc *v1.Service) string {
	return fmt.Sprintf("annotations %v, ranges %v, ports %v", svc.Annotations, svc.Spec.LoadBalancerSourceRanges, svc.Spec.Ports)
}

func (w *diffWorld) pct(p int) bool { return w.rnd.IntN(100) < p }

// service generates the i-th Service.
func (w *diffWorld) service(i int) *diffService {
	name := fmt.Sprintf("d%03d", i)
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name, Annotations: map[string]string{}},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name}}}
	d := &diffService{svc: svc, floating: true}
	a := svc.Annotations
	d.internal = w.pct(30)
	if d.internal {
		a[annotations.KeyInternal] = "true"
	}
	// Ports: one or two TCP ports, sometimes UDP, rarely SCTP.
	tcpPorts := []int32{80, 443, 8080, 9000}
	for _, j := range w.rnd.Perm(len(tcpPorts))[:1+w.rnd.IntN(2)] {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: fmt.Sprintf("t%d", tcpPorts[j]), Port: tcpPorts[j], Protocol: v1.ProtocolTCP,
			TargetPort: intstr.FromInt32(tcpPorts[j])})
	}
	if w.pct(15) {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: "u53", Port: 53, Protocol: v1.ProtocolUDP, TargetPort: intstr.FromInt32(53)})
	}
	if w.pct(3) {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: "s9", Port: 9, Protocol: v1.ProtocolSCTP, TargetPort: intstr.FromInt32(9)})
		d.mustRefuse = "an SCTP port"
	}
	if w.pct(20) {
		svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	}
	if d.internal && w.pct(20) {
		svc.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicyRequireDualStack)
		svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	}
	w.access(d)
	if w.pct(10) && !d.denyAll && !d.invalid {
		a[annotations.KeyDisableFloatingIP] = "true"
		d.floating = false
	}
	w.addresses(d)
	w.privateLink(d)
	// Extra destinations of the security rules (azure-additional-public-ips):
	// documentation addresses of both families, sometimes an invalid entry.
	if w.pct(6) {
		extra := []string{"203.0.113.7", "198.51.100.9, 2001:db8::7", "203.0.113.7,,203.0.113.8"}[w.rnd.IntN(3)]
		if w.pct(30) {
			extra += ",203.0.113.0/24"
			d.mustRefuse = cmpOr(d.mustRefuse, "an additional public IP that is a range")
		}
		a[annotations.KeyAdditionalPublicIPs] = extra
	}
	return d
}

// access draws the Service's access settings.
func (w *diffWorld) access(d *diffService) {
	a, svc := d.svc.Annotations, d.svc
	pick := func() []netip.Prefix {
		var out []netip.Prefix
		for _, j := range w.rnd.Perm(len(w.ranges))[:1+w.rnd.IntN(2)] {
			out = append(out, w.ranges[j])
		}
		return out
	}
	strs := func(ps []netip.Prefix) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.String())
		}
		return out
	}
	switch r := w.rnd.IntN(100); {
	case r < 35: // nothing
	case r < 55: // spec ranges
		d.allowed = pick()
		svc.Spec.LoadBalancerSourceRanges = strs(d.allowed)
		d.restrict = true
	case r < 65: // annotation ranges, sometimes with an invalid entry
		d.allowed = pick()
		vals := strs(d.allowed)
		if w.pct(40) {
			vals = append(vals, []string{"10.0.0.1/24", "not-a-range", "::ffff:127.0.0.0/104", ""}[w.rnd.IntN(4)])
			d.invalid = true
		}
		a[annotations.KeyAllowedIPRanges] = strings.Join(vals, ",")
		d.restrict = true
	case r < 68: // set but blank
		a[annotations.KeyAllowedIPRanges] = ""
		d.invalid, d.restrict = true, true
	case r < 71: // only IPv6 ranges for an IPv4 Service: closed on IPv4
		svc.Spec.LoadBalancerSourceRanges = []string{"2001:db8::/32"}
		d.restrict = true
	case r < 79: // service tags (one the emulator knows, one it does not)
		tags := []string{"AzureFrontDoor.Backend", "Storage", "AzureFrontDoor.Backend,Storage"}[w.rnd.IntN(3)]
		a[annotations.KeyAllowedServiceTags] = tags
		d.tagSource = strings.Contains(tags, "AzureFrontDoor.Backend")
		d.restrict = true
	case r < 85: // deny-all with ranges
		d.allowed = pick()
		svc.Spec.LoadBalancerSourceRanges = strs(d.allowed)
		a[annotations.KeyDenyAllExceptRanges] = "true"
		d.restrict, d.denyAll = true, true
	case r < 89: // no NSG rule
		a[annotations.KeyDisableNSGRule] = "true"
		d.disabled = true
	case r < 93: // an invalid tag
		a[annotations.KeyAllowedServiceTags] = "Azure Front Door"
		d.invalid, d.restrict = true, true
	case r < 96: // contradictory: refused
		svc.Spec.LoadBalancerSourceRanges = strs(pick())
		a[annotations.KeyAllowedIPRanges] = w.ranges[0].String()
		d.mustRefuse = "ranges in the spec and an annotation"
	default: // not a boolean: refused
		a[annotations.KeyDenyAllExceptRanges] = "maybe"
		d.mustRefuse = "a deny-all value that is not a boolean"
	}
}

// addresses draws shared IPs (a public IP by name, an internal address)
// and, rarely, an address nobody has.
func (w *diffWorld) addresses(d *diffService) {
	a := d.svc.Annotations
	switch r := w.rnd.IntN(100); {
	case r < 12 && !d.internal:
		a[annotations.KeyPIPName] = w.sharedPrefix + strconv.Itoa(w.rnd.IntN(6))
		d.mayRefuse = true
	case r < 12 && d.internal && len(d.svc.Spec.IPFamilies) < 2:
		// Addresses at the top of the subnet: dynamic ones come from the
		// bottom.
		a[annotations.KeyIPv4] = testutil.Nth(w.nodeNet, 1<<(32-w.nodeNet.Bits())-10+w.rnd.IntN(4)).String()
		d.mayRefuse = true
	case r < 14 && !d.internal:
		a[annotations.KeyIPv4] = "203.0.113.77"
		d.mustRefuse = cmpOr(d.mustRefuse, "an address no public IP has")
	}
}

// privateLink draws Private Link Service settings: valid ones on internal
// Services, and ones azlb cannot honour.
func (w *diffWorld) privateLink(d *diffService) {
	a := d.svc.Annotations
	switch r := w.rnd.IntN(100); {
	case r < 3:
		a[privatelink.KeyCreate] = "true"
		if !d.internal && d.floating {
			d.mustRefuse = cmpOr(d.mustRefuse, "a Private Link Service on a public Service with floating IP on")
		}
	case !d.internal || r >= 30:
	case r < 18:
		a[privatelink.KeyCreate] = "true"
		if w.pct(50) {
			a[privatelink.KeyVisibility] = "*"
		}
	default:
		a[privatelink.KeyCreate] = "true"
		bad := [][2]string{{privatelink.KeyIPCount, "9"}, {privatelink.KeyIPAddresses, "10.99.0.10"}, {privatelink.KeySubnet, "no-such-subnet"},
			{privatelink.KeyVisibility, "not-a-guid"}, {privatelink.KeyIPAddresses, testutil.Nth(w.nodeNet, 2).Next().Next().String() + " x"}}[w.rnd.IntN(5)]
		a[bad[0]] = bad[1]
		d.mustRefuse = cmpOr(d.mustRefuse, "Private Link Service settings azlb cannot honour ("+bad[0]+")")
	}
	if a[privatelink.KeyCreate] == "true" && !slices.Contains(d.svc.Spec.IPFamilies, v1.IPv4Protocol) && len(d.svc.Spec.IPFamilies) > 0 {
		d.mustRefuse = cmpOr(d.mustRefuse, "a Private Link Service on an IPv6-only Service")
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// admits is what the spec allows from src (docs/security-groups.md, Who
// may connect), for IPv4 traffic to a served Service.
func (w *diffWorld) admits(d *diffService, src netip.Addr) bool {
	vnet := w.nodeNet.Contains(src)
	if d.disabled {
		return d.internal && vnet // azlb writes no rule: Azure's defaults
	}
	if vnet {
		// Internal: the virtual network gets in (AllowVnetInBound) unless a
		// deny-all covers the Service's address (its own, or one of
		// another Service on the same address).
		return d.internal && (!d.floating || !d.denyAll && !d.invalid) && !w.denied[ingress4(d.svc)]
	}
	if !d.restrict && !d.invalid {
		return !d.internal // the Internet rule of a public Service
	}
	if d.tagSource && w.tagNet.Contains(src) {
		return true
	}
	for _, p := range d.allowed {
		if p.Contains(src) {
			return true
		}
	}
	return false
}

// ingress4 is the Service's IPv4 ingress address (invalid: none).
func ingress4(svc *v1.Service) netip.Addr {
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil && a.Is4() {
			return a
		}
	}
	return netip.Addr{}
}

// checkDataPlane tries every served Service's IPv4 frontend, on each TCP
// port, from every source: each answer (a node's name, or a reset) must be
// what admits says. A source that must get in is retried for a while (the
// data plane may still be probing the nodes); one that must not is tried
// once the Service answers someone.
func (w *diffWorld) checkDataPlane(t *testing.T, all []*diffService) {
	t.Helper()
	type probe struct {
		d   *diffService
		src netip.Addr
		to  netip.AddrPort
	}
	w.denied = map[netip.Addr]bool{}
	for _, d := range all {
		if ip := ingress4(d.svc); ip.IsValid() && d.floating && !d.disabled && (d.denyAll || d.invalid) {
			w.denied[ip] = true
		}
	}
	var probes []probe
	for _, d := range all {
		ip := ingress4(d.svc)
		if !ip.IsValid() {
			continue
		}
		srcs := slices.Clone(w.sources)
		if d.internal {
			srcs = append(srcs, w.vnetSource)
		}
		for _, p := range d.svc.Spec.Ports {
			if p.Protocol != v1.ProtocolTCP {
				continue
			}
			for _, src := range srcs {
				probes = append(probes, probe{d: d, src: src, to: netip.AddrPortFrom(ip, uint16(p.Port))})
			}
		}
	}
	var mu sync.Mutex
	var wrong []string
	work := make(chan probe)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for pr := range work {
				want := w.admits(pr.d, pr.src)
				got := false
				for deadline := time.Now().Add(20 * time.Second); ; {
					_, err := testutil.HelloFrom(pr.src, pr.to, 2*time.Second)
					got = err == nil
					if got == want || !want || time.Now().After(deadline) {
						break
					}
					time.Sleep(500 * time.Millisecond) // the data plane probing the nodes: poll
				}
				if got != want {
					mu.Lock()
					wrong = append(wrong, fmt.Sprintf("%s %s from %s: reached=%v, the spec allows %v (%s)", pr.d.svc.Name, pr.to, pr.src, got, want, describe(pr.d.svc)))
					mu.Unlock()
				}
			}
		})
	}
	for _, pr := range probes {
		work <- pr
	}
	close(work)
	wg.Wait()
	slices.Sort(wrong)
	for _, s := range wrong {
		t.Error(s)
	}
	t.Logf("data plane: %d probes, %d wrong", len(probes), len(wrong))
}
