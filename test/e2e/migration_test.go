package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/sandbox"
)

// migratedState checks the end of a migration in the ARM state of clients:
// the load balancers lb and lb-internal are Standard, hold the Services'
// frontends (want: frontend name -> address; internal ones Static) and
// have every node (nodes of them) in their NIC-based pool lb; the
// Services' public IPs (pips: name -> address) are Standard with the same
// address. It returns "" or what is still missing.
func migratedState(ctx context.Context, c *azure.Clients, rg, lb string, want, pips map[string]string, nodes int) string {
	for _, name := range []string{lb, names.InternalLB(lb)} {
		got, err := c.LoadBalancer.Get(ctx, rg, name)
		if err != nil {
			return fmt.Sprintf("load balancer %s: %v", name, err)
		}
		if ptr.Deref(got.SKU.Name, "") != armnetwork.LoadBalancerSKUNameStandard {
			return fmt.Sprintf("load balancer %s is %s", name, ptr.Deref(got.SKU.Name, ""))
		}
		for _, p := range got.Properties.BackendAddressPools {
			if ptr.Deref(p.Name, "") == lb && (p.Properties == nil || len(p.Properties.BackendIPConfigurations) != nodes) {
				return fmt.Sprintf("pool %s/%s does not hold the %d nodes", name, lb, nodes)
			}
		}
		for _, fe := range got.Properties.FrontendIPConfigurations {
			addr, ok := want[ptr.Deref(fe.Name, "")]
			if !ok || fe.Properties.PublicIPAddress != nil {
				continue
			}
			if ptr.Deref(fe.Properties.PrivateIPAddress, "") != addr || ptr.Deref(fe.Properties.PrivateIPAllocationMethod, "") != armnetwork.IPAllocationMethodStatic {
				return fmt.Sprintf("internal frontend %s: %s %s, want Static %s", ptr.Deref(fe.Name, ""),
					ptr.Deref(fe.Properties.PrivateIPAllocationMethod, ""), ptr.Deref(fe.Properties.PrivateIPAddress, ""), addr)
			}
		}
	}
	for name, addr := range pips {
		pip, err := c.PublicIP.Get(ctx, rg, name)
		if err != nil {
			return fmt.Sprintf("public IP %s: %v", name, err)
		}
		if ptr.Deref(pip.SKU.Name, "") != armnetwork.PublicIPAddressSKUNameStandard || ptr.Deref(pip.Properties.IPAddress, "") != addr || pip.Properties.IPConfiguration == nil {
			return fmt.Sprintf("public IP %s: %s, address %s, in use %v; want Standard with %s", name, ptr.Deref(pip.SKU.Name, ""),
				ptr.Deref(pip.Properties.IPAddress, ""), pip.Properties.IPConfiguration != nil, addr)
		}
	}
	return ""
}

// frontendsOf maps the Services' frontend names to their seeded addresses.
func frontendsOf(t *testing.T, cs kubernetes.Interface, ns string, ips map[string]string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, ip := range ips {
		svc, err := cs.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out[names.Frontend(svc, v1.IPv4Protocol)] = ip
	}
	return out
}

// checkIngress fails unless every Service's ingress IP is its seeded one.
func checkIngress(t *testing.T, cs kubernetes.Interface, ns string, ips map[string]string) {
	t.Helper()
	for name, ip := range ips {
		svc, err := cs.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if in := svc.Status.LoadBalancer.Ingress; len(in) != 1 || in[0].IP != ip {
			t.Errorf("service %s: ingress %+v, had %s", name, in, ip)
		}
	}
}

// The README's migration flow: the Basic sandbox's controller refuses
// loadBalancerSku basic; set to standard and restarted, it migrates: every
// Service keeps its IP, no Basic load balancer is left, every node is in
// the Standard pools; a further restart writes nothing.
func TestSandboxBasicMigration(t *testing.T) {
	ctx := context.Background()
	sb, out := upSandbox(t, sandbox.VariantBasic)
	if !strings.Contains(out, "refused to start, as it must with loadBalancerSku basic: loadBalancerSku: Basic Load Balancer was retired by Azure on 2025-09-30") {
		t.Fatalf("no refusal in the output:\n%s", out)
	}
	dir := sb.Dir
	clients, cs, render := sandboxClients(t, sb)
	if s := render(); strings.Count(s, "SKU Basic") != 2 {
		t.Fatalf("azlb status before the migration:\n%s", s)
	}
	ips := map[string]string{}
	pips := map[string]string{}
	svcs, err := cs.CoreV1().Services(sandbox.DemoNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs.Items {
		ips[s.Name] = s.Status.LoadBalancer.Ingress[0].IP
	}
	all, err := clients.PublicIP.List(ctx, devenv.ResourceGroup)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all {
		pips[*p.Name] = ptr.Deref(p.Properties.IPAddress, "")
	}
	if len(ips) != 4 || len(pips) != 3 {
		t.Fatalf("seeded services %v, public IPs %v", ips, pips)
	}

	path := filepath.Join(dir, sandbox.AzureJSONFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), `"loadBalancerSku": "basic"`, `"loadBalancerSku": "standard"`, 1)
	if edited == string(b) {
		t.Fatalf("azure.json has no basic SKU:\n%s", b)
	}
	if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	migrationStart := time.Now().UTC()
	if out, err := sb.restart(t); err != nil {
		t.Fatalf("azlb sandbox restart: %v\n%s", err, out)
	}
	want := frontendsOf(t, cs, sandbox.DemoNamespace, ips)
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("missing: %s", last)
		}
	}()
	eventually(t, 90*time.Second, "the migration", func(ctx context.Context) (bool, error) {
		last = migratedState(ctx, clients, devenv.ResourceGroup, "kubernetes", want, pips, 3)
		return last == "", nil
	})
	checkIngress(t, cs, sandbox.DemoNamespace, ips)
	if s := render(); strings.Contains(s, "SKU Basic") || strings.Count(s, "SKU Standard") != 2 {
		t.Errorf("azlb status after the migration:\n%s", s)
	}
	before := map[string]int32{}
	for name := range ips {
		eventually(t, 60*time.Second, "the reconcile of "+name, func(context.Context) (bool, error) {
			before[name] = ensuredCountIn(t, cs, sandbox.DemoNamespace, name)
			return before[name] > 0, nil
		})
	}
	evs, err := cs.CoreV1().Events(sandbox.DemoNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]bool{}
	for _, e := range evs.Items {
		reasons[e.InvolvedObject.Name+"/"+e.Reason] = true
	}
	for _, want := range []string{"web/BasicLoadBalancerMigration", "ilb/BasicLoadBalancerMigration", "web/PublicIPMadeStatic", "web/PublicIPUpgraded", "byo/PublicIPUpgraded"} {
		if !reasons[want] {
			t.Errorf("no event %s: %v", want, reasons)
		}
	}

	if w := sandboxWrites(t, dir, migrationStart); !slices.ContainsFunc(w, func(s string) bool {
		return strings.HasPrefix(s, "DELETE ") && strings.HasSuffix(s, "/loadBalancers/kubernetes")
	}) {
		t.Errorf("the emulator's request log shows no delete of the Basic load balancer: %v", w)
	}

	// A further restart: every Service is ensured again, nothing written.
	since := time.Now().UTC()
	if out, err := sb.restart(t); err != nil {
		t.Fatalf("azlb sandbox restart: %v\n%s", err, out)
	}
	for name := range ips {
		eventually(t, 60*time.Second, "the reconcile of "+name+" after the restart", func(context.Context) (bool, error) {
			return ensuredCountIn(t, cs, sandbox.DemoNamespace, name) > before[name], nil
		})
	}
	if w := sandboxWrites(t, dir, since); len(w) != 0 {
		t.Errorf("the restarted controller wrote %v", w)
	}
	checkIngress(t, cs, sandbox.DemoNamespace, ips)
	checkSandboxRaces(t, dir)
}

// sandboxWrites lists the ARM writes the sandbox's emulator served since
// a time (its control API's request log).
func sandboxWrites(t *testing.T, dir string, since time.Time) []string {
	t.Helper()
	cfg, err := config.LoadFile(filepath.Join(dir, sandbox.AzureJSONFile))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, sandbox.EmulatorCAFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(cfg.ResourceManagerEndpoint + "/_emulator/requests?since=" + url.QueryEscape(since.Format(time.RFC3339Nano)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var recs []emulator.RequestRecord
	if err := json.NewDecoder(resp.Body).Decode(&recs); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		if r.Kind == "arm" && r.Method != http.MethodGet && r.Method != http.MethodHead {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	return out
}

// The controller is killed (SIGKILL) at each step of the migration, held
// there by a failing ARM call: before the public IPs are made Static, in
// the middle of taking the scale set VMs out of the Basic pools, before
// the Basic delete, before the public IP upgrades, before the Standard
// load balancer is created, before the nodes join. Restarted each time, it
// ends where an uninterrupted migration does, and no address is ever lost.
func TestBasicMigrationSurvivesKills(t *testing.T) {
	ctx := context.Background()
	const cluster = "e2e-basic"
	ns := createNamespace(t)
	seeded, err := suite.env.SeedBasicCluster(ctx, suite.cs, devenv.BasicOptions{Cluster: cluster, ScaleSet: cluster, Prefix: cluster + "-", Nodes: 2,
		Namespace: ns, Services: []devenv.BasicService{{Name: "web", Port: 80, Dynamic: true}, {Name: "api", Port: 8080}, {Name: "ilb", Port: 443, Internal: true}}})
	if err != nil {
		t.Fatal(err)
	}
	pips := map[string]string{}
	for svc, name := range seeded.PublicIPs {
		pips[name] = seeded.IPs[svc]
	}
	stopAgents := runNodeAgents(t, seeded.Nodes)
	defer stopAgents()
	cfg := writeConfig(t, map[string]any{"clusterName": cluster, "loadBalancerBackendPoolConfigurationType": "nodeIPConfiguration"})
	emu := suite.env.Emulator()
	lbPath := "/loadBalancers/" + cluster + "$"
	steps := []struct{ name, method, path string }{
		{"keep the addresses", http.MethodPut, "/publicIPAddresses/"},
		{"take the scale set VMs out of the Basic pools", http.MethodPut, "/virtualMachineScaleSets/" + cluster + "/virtualMachines/1$"},
		{"delete the Basic load balancer", http.MethodDelete, lbPath},
		{"upgrade the public IPs", http.MethodPut, "/publicIPAddresses/"},
		{"create the Standard load balancer", http.MethodPut, lbPath},
		{"the nodes join", http.MethodPut, "/virtualMachineScaleSets/" + cluster + "$"},
	}
	for i, st := range steps {
		id, err := emu.AddFault(emulator.Fault{Method: st.method, PathRegex: st.path, Status: http.StatusBadRequest, Code: "InjectedCrashPoint"})
		if err != nil {
			t.Fatal(err)
		}
		c := startController(t, fmt.Sprintf("kill-%d", i), cfg, false)
		eventually(t, 60*time.Second, "the controller reaching step "+st.name, func(context.Context) (bool, error) {
			for _, f := range emu.Faults() {
				if f.ID == id {
					return f.Fired > 0, nil
				}
			}
			return false, nil
		})
		c.kill()
		emu.RemoveFault(id)
		// Nothing is lost: every public IP still holds its address, and
		// the Services keep their status.
		for name, addr := range pips {
			pip, err := arm(t).PublicIP.Get(ctx, devenv.ResourceGroup, name)
			if err != nil || ptr.Deref(pip.Properties.IPAddress, "") != addr {
				t.Fatalf("after a kill at %q: public IP %s: %v %v, want address %s", st.name, name, err, pip, addr)
			}
		}
		checkIngress(t, suite.cs, ns, seeded.IPs)
	}
	startController(t, "final", cfg, false)
	want := frontendsOf(t, suite.cs, ns, seeded.IPs)
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("missing at the end: %s", last)
		}
	}()
	eventually(t, 90*time.Second, "the migration", func(ctx context.Context) (bool, error) {
		last = migratedState(ctx, arm(t), devenv.ResourceGroup, cluster, want, pips, len(seeded.Nodes))
		return last == "", nil
	})
	checkIngress(t, suite.cs, ns, seeded.IPs)

	for name := range seeded.IPs {
		deleteService(t, ns, name)
	}
	eventually(t, 60*time.Second, "the load balancers deleted", func(context.Context) (bool, error) {
		return getLB(t, cluster) == nil && getLB(t, names.InternalLB(cluster)) == nil, nil
	})
}
