package e2e

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator/dataplane"
	"github.com/azlb/azlb/internal/nodeagent"
	"github.com/azlb/azlb/internal/sandbox"
	"github.com/azlb/azlb/internal/testutil"
)

// sandboxBinDir is a bin directory for the sandbox: its own binaries
// (emulator, CLI, which runs the NIC demo's node agent, and the node
// manager, one per NIC demo node) built as make build builds them (with
// the race detector under make test-e2e), the controller under test and
// the Kubernetes binaries linked.
func sandboxBinDir(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"build", "-o", bin + "/"}
	if os.Getenv("AZLB_E2E_RACE") != "" {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "./cmd/azlb-emulator", "./cmd/azlb", "./cmd/azlb-node-manager")...)
	build.Dir = suite.root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build emulator and CLI: %v\n%s", err, out)
	}
	for name, from := range map[string]string{
		"azlb-controller-manager": suite.ccmBinary,
		"kube-apiserver":          filepath.Join(suite.root, "bin", "kube-apiserver"),
		"etcd":                    filepath.Join(suite.root, "bin", "etcd"),
	} {
		if err := os.Symlink(from, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// sandboxRun is a sandbox the test started with bin/azlb sandbox up.
type sandboxRun struct {
	Dir, BinDir string
}

// azlb runs the sandbox's CLI, as a user does, from the repository root,
// and returns its output (stdout and stderr) and its exit error.
func (s sandboxRun) azlb(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(s.BinDir, "azlb"), args...)
	cmd.Dir = suite.root
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// clusterFlags are the flags azlb status and verify read the sandbox with.
func (s sandboxRun) clusterFlags() []string {
	return []string{"--kubeconfig", filepath.Join(s.Dir, sandbox.KubeconfigFile), "--cloud-config", filepath.Join(s.Dir, sandbox.AzureJSONFile)}
}

// up runs bin/azlb sandbox up, as make sandbox does.
func (s sandboxRun) up(t *testing.T, variant string, port int) (string, error) {
	t.Helper()
	return s.azlb(t, "sandbox", "up", "--dir", s.Dir, "--bin", s.BinDir, "--rbac", filepath.Join(suite.root, "deploy", "rbac.yaml"),
		"--secure-port", strconv.Itoa(port), "--variant", cmp.Or(variant, sandbox.VariantMulti))
}

// down runs bin/azlb sandbox down, as make sandbox-down does.
func (s sandboxRun) down(t *testing.T) {
	t.Helper()
	if out, err := s.azlb(t, "sandbox", "down", "--dir", s.Dir); err != nil {
		t.Errorf("azlb sandbox down: %v\n%s", err, out)
	}
}

// restart runs bin/azlb sandbox restart.
func (s sandboxRun) restart(t *testing.T) (string, error) {
	t.Helper()
	return s.azlb(t, "sandbox", "restart", "--dir", s.Dir)
}

// status runs bin/azlb status against the sandbox.
func (s sandboxRun) status(t *testing.T) string {
	t.Helper()
	out, err := s.azlb(t, append([]string{"status"}, s.clusterFlags()...)...)
	if err != nil {
		t.Fatalf("azlb status: %v\n%s", err, out)
	}
	return out
}

// upSandbox starts a sandbox variant (sandbox.Variant*, "" for the
// default) with the built CLI, bin/azlb sandbox up, as make sandbox does;
// it is stopped (bin/azlb sandbox down) when the test ends.
func upSandbox(t *testing.T, variant string) (sandboxRun, string) {
	t.Helper()
	port, err := testutil.FreeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	s := sandboxRun{Dir: filepath.Join(t.TempDir(), ".sandbox"), BinDir: sandboxBinDir(t)}
	t.Cleanup(func() { _, _ = s.azlb(t, "sandbox", "down", "--dir", s.Dir) })
	out, err := s.up(t, variant, port)
	if err != nil {
		t.Fatalf("azlb sandbox up: %v\n%s", err, out)
	}
	return s, out
}

// sandboxClients are ARM and Kubernetes clients for a running sandbox, for
// the test's own checks, and a renderer of its azlb status (the built CLI).
func sandboxClients(t *testing.T, s sandboxRun) (*azure.Clients, kubernetes.Interface, func() string) {
	t.Helper()
	ctx := context.Background()
	cfg, err := config.LoadFile(filepath.Join(s.Dir, sandbox.AzureJSONFile))
	if err != nil {
		t.Fatalf("the sandbox's azure.json: %v", err)
	}
	clients, err := azure.NewClients(ctx, cfg, azure.ClientOptions{Source: "e2e-sandbox"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(clients.Close)
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(s.Dir, sandbox.KubeconfigFile))
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(rc)
	return clients, cs, func() string { return s.status(t) }
}

// The README's first command: everything starts, the demo Services get
// their IPs and answer before Up returns, azlb status shows both load
// balancers and the Local Service's dedicated pool, the Services answer
// through the data plane (each from the nodes of the load balancer it is
// pinned to; the Local one only from nodes with its endpoints; the UDP one
// with a datagram naming a node), an internal Service gets no node's
// address and answers from every node, the Service with
// loadBalancerSourceRanges only to its source and the others only while
// azlb's rules are in the NSG, a taint shows as Down and takes the node out
// of rotation, azlb sandbox restart fails on a bad azure.json and succeeds
// once it is fixed, and Down stops every process.
func TestSandboxUpStatusDown(t *testing.T) {
	ctx := context.Background()
	sb, out := upSandbox(t, "")
	dir := sb.Dir
	t.Logf("sandbox up:\n%s", out)
	if !strings.Contains(out, "sandbox ready") {
		t.Fatalf("no readiness line:\n%s", out)
	}
	for _, svc := range []string{"web", "api", "restricted", "echo", "echo-tcp"} {
		if !strings.Contains(out, "service demo/"+svc+" answers on ") {
			t.Errorf("Up returned without demo/%s answering:\n%s", svc, out)
		}
	}
	clients, cs, render := sandboxClients(t, sb)
	port, err := testutil.FreeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	// A second azlb sandbox up in the same directory fails and leaves the
	// running sandbox alone (it used to stop it on its way out).
	if again, err := sb.up(t, "", port); err == nil || !strings.Contains(again, "already running") {
		t.Fatalf("a second azlb sandbox up in the same directory: %v\n%s", err, again)
	}
	if _, err := testutil.HelloFrom(netip.MustParseAddr("127.0.0.1"), sandboxFrontend(t, cs, "web"), 5*time.Second); err != nil {
		t.Fatalf("the running sandbox stopped serving after a second azlb sandbox up: %v", err)
	}

	first := render()
	for _, want := range []string{"LOAD BALANCER kubernetes", "LOAD BALANCER lb-pool2", "demo/web", "demo/api", "demo/restricted", "demo/echo", "UDP/53->53", "POOL demo.api"} {
		if !strings.Contains(first, want) {
			t.Errorf("status lacks %q:\n%s", want, first)
		}
	}

	// The data plane: curl http://<ingress-ip>:<port>/ shows the node that
	// served it; the Local Service only from nodes with its endpoints. A
	// plain curl comes from 127.0.0.1: the Internet, which azlb's rule for
	// web and api admits (the emulator is closed by default).
	loopback, restrictedSrc := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr(sandbox.RestrictedSource)
	web, api, restricted := sandboxFrontend(t, cs, "web"), sandboxFrontend(t, cs, "api"), sandboxFrontend(t, cs, "restricted")
	servedBy := func(src netip.Addr, fe netip.AddrPort, allowed ...string) map[string]int {
		t.Helper()
		seen := map[string]int{}
		eventually(t, 60*time.Second, "answers from "+fe.String()+" to "+src.String(), func(context.Context) (bool, error) {
			name, err := testutil.HelloFrom(src, fe, 2*time.Second)
			return err == nil && name != "", nil
		})
		for range 30 {
			name, err := testutil.HelloFrom(src, fe, 2*time.Second)
			if err != nil {
				t.Fatalf("GET http://%s/ from %s: %v", fe, src, err)
			}
			if !slices.Contains(allowed, name) {
				t.Fatalf("GET http://%s/ from %s answered by %q, want one of %v", fe, src, name, allowed)
			}
			seen[name]++
		}
		return seen
	}
	servedBy(loopback, web, "aks-pool1-0", "aks-pool1-1", "aks-pool1-2")
	servedBy(loopback, api, "aks-pool1-1", "aks-pool2-0")

	// An internal Service on "kubernetes" (in the audit, the first one's
	// frontend took 127.240.0.4, aks-pool1-0's address, whose simulated
	// kube-proxy then never served it): the emulated subnet holds the
	// nodes' addresses, so its address is no node's, and every node of
	// its load balancer serves it to a client of the virtual network.
	ilb := loadBalancerService(sandbox.DemoNamespace, "internal", 80)
	ilb.Annotations = map[string]string{annotations.KeyInternal: "true", annotations.KeyLoadBalancerConfigurations: "kubernetes"}
	if _, err := cs.CoreV1().Services(sandbox.DemoNamespace).Create(ctx, ilb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.DiscoveryV1().EndpointSlices(sandbox.DemoNamespace).Create(ctx, endpointSlice(sandbox.DemoNamespace, "internal", "aks-pool1-2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	internalIP, err := netip.ParseAddr(sandboxIngress(t, cs, "internal"))
	if err != nil {
		t.Fatal(err)
	}
	allNodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range allNodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Address == internalIP.String() {
				t.Fatalf("the internal Service got %s, the address of node %s", internalIP, n.Name)
			}
		}
	}
	vnetClient := netip.MustParseAddr("127.241.0.10") // in the virtual network (127.240.0.0/12), outside the subnet
	if seen := servedBy(vnetClient, netip.AddrPortFrom(internalIP, 80), "aks-pool1-0", "aks-pool1-1", "aks-pool1-2"); len(seen) != 3 {
		t.Errorf("30 requests to the internal Service at %s answered by %v: want every node of its load balancer", internalIP, seen)
	}

	// restricted (loadBalancerSourceRanges 127.0.0.2/32, on "kubernetes"):
	// curl --interface 127.0.0.2 answers, a plain curl is reset by the
	// subnet's NSG.
	servedBy(restrictedSrc, restricted, "aks-pool1-0", "aks-pool1-1", "aks-pool1-2")
	sandboxDenied(t, dir, loopback, restricted)

	// echo (UDP, Cluster, on lb-pool2): `echo hi | nc -u -w1 $ECHO 53`
	// gets a datagram back from either node of its load balancer, with an
	// endpoint or not: no TCP probe on its node port keeps them out of
	// rotation.
	echo := sandboxFrontend(t, cs, "echo")
	echoNodes := map[string]int{}
	for i := range 30 {
		name, err := nodeagent.HelloUDP(loopback, echo, 2*time.Second)
		if err != nil {
			t.Fatalf("datagram %d to %s: %v", i, echo, err)
		}
		if name != "aks-pool2-0" && name != "aks-pool2-1" {
			t.Fatalf("datagram %d to %s answered by %q, want a node of lb-pool2", i, echo, name)
		}
		echoNodes[name]++
	}
	if len(echoNodes) != 2 {
		t.Errorf("30 UDP flows to %s answered by %v: want both nodes of lb-pool2 (Cluster)", echo, echoNodes)
	}
	// echo-tcp shares echo's public IP (sandbox.SharedIPName): TCP 53 on
	// the same address answers too, and azlb status shows the sharing.
	echoTCP := sandboxFrontend(t, cs, "echo-tcp")
	if echoTCP != echo {
		t.Errorf("echo-tcp is on %s, echo on %s: want one shared IP", echoTCP, echo)
	}
	servedBy(loopback, echoTCP, "aks-pool2-0", "aks-pool2-1")
	if st := render(); !strings.Contains(st, "(shared)") {
		t.Errorf("azlb status does not show the shared frontend:\n%s", st)
	}
	for svc, want := range map[string]string{"web": "Internet", "api": "Internet", "restricted": sandbox.RestrictedSource + "/32", "echo": "Internet", "echo-tcp": "Internet"} {
		if got := sourcesOf(render(), "demo/"+svc); got != want {
			t.Errorf("azlb status: %s's sources %q, want %q", svc, got, want)
		}
	}

	// Without azlb's rules in the NSG, web is closed to the Internet too;
	// with them back it answers again.
	sandboxWithoutRules(t, clients, func() error { return sandboxDeniedErr(t, dir, loopback, web) })
	servedBy(loopback, web, "aks-pool1-0", "aks-pool1-1", "aks-pool1-2")

	setTaintsWith(t, cs, "aks-pool1-1", "node.kubernetes.io/out-of-service")
	eventually(t, 30*time.Second, "aks-pool1-1 Down in azlb status", func(context.Context) (bool, error) {
		for _, line := range strings.Split(render(), "\n") {
			f := strings.Fields(line)
			if len(f) >= 3 && f[0] == "aks-pool1-1" && f[2] != "Down" {
				return false, nil
			}
		}
		return true, nil
	})
	servedBy(loopback, web, "aks-pool1-0", "aks-pool1-2") // no new connection reaches the Down node

	// azlb sandbox restart: a controller that dies at once on a bad
	// azure.json fails it, with the controller's error; azure.json fixed,
	// the restart returns once the controller serves, and it does.
	checkSandboxRaces(t, dir) // the log the restarts rotate away
	azureJSON := filepath.Join(dir, sandbox.AzureJSONFile)
	good, err := os.ReadFile(azureJSON)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(good), `"loadBalancerSku": "standard"`, `"loadBalancerSku": "premium"`, 1)
	if bad == string(good) {
		t.Fatalf("the sandbox's azure.json has no loadBalancerSku standard:\n%s", good)
	}
	if err := os.WriteFile(azureJSON, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	restarted, err := sb.restart(t)
	if err == nil || !strings.Contains(restarted, "Cloud provider could not be initialized") || !strings.Contains(restarted, `"premium"`) {
		t.Fatalf("azlb sandbox restart with loadBalancerSku premium: %v\n%s", err, restarted)
	}
	t.Logf("azlb sandbox restart with loadBalancerSku premium: %v\n%s", err, restarted)
	if err := os.WriteFile(azureJSON, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if restarted, err := sb.restart(t); err != nil || !strings.Contains(restarted, "restarted and serving") {
		t.Fatalf("azlb sandbox restart with the sandbox's azure.json: %v\n%s", err, restarted)
	}
	servedBy(loopback, web, "aks-pool1-0", "aks-pool1-2")

	verifySandbox(t, sb)

	sb.down(t)
	for _, pidFile := range []string{"azlb-emulator.pid", "azlb-controller-manager.pid", "azlb-node-agent.pid", filepath.Join("kube", "kube-apiserver.pid"), filepath.Join("kube", "etcd.pid")} {
		if _, err := os.Stat(filepath.Join(dir, pidFile)); err == nil {
			t.Errorf("%s left behind after Down", pidFile)
		}
	}
	checkSandboxRaces(t, dir)
}

// verifySandbox runs the sandbox's `azlb verify` until it exits 0 (the
// controllers have converged: Azure holds what the documentation says), and
// fails with its report after 30 s.
func verifySandbox(t *testing.T, sb sandboxRun) {
	t.Helper()
	var out []byte
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(sb.BinDir, "azlb"), append([]string{"verify"}, sb.clusterFlags()...)...)
		cmd.Dir = suite.root
		o, err := cmd.CombinedOutput()
		if len(o) > 0 || out == nil {
			out = o // the last run that said something (a run the deadline killed says nothing)
		}
		last = err
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("azlb verify did not come clean in 30s (%v):\n%s", last, out)
	}
	if !strings.Contains(string(out), "clean") {
		t.Fatalf("azlb verify exited 0 without saying clean:\n%s", out)
	}
}

// sandboxIngress waits for a demo Service's ingress address.
func sandboxIngress(t *testing.T, cs kubernetes.Interface, name string) string {
	t.Helper()
	var ip string
	eventually(t, 60*time.Second, "ingress IP of "+sandbox.DemoNamespace+"/"+name, func(ctx context.Context) (bool, error) {
		svc, err := cs.CoreV1().Services(sandbox.DemoNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if len(svc.Status.LoadBalancer.Ingress) > 0 {
			ip = svc.Status.LoadBalancer.Ingress[0].IP
		}
		return ip != "", nil
	})
	return ip
}

// sandboxFrontend is a demo Service's ingress address and port.
func sandboxFrontend(t *testing.T, cs kubernetes.Interface, name string) netip.AddrPort {
	t.Helper()
	svc, err := cs.CoreV1().Services(sandbox.DemoNamespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ip, err := netip.ParseAddr(svc.Status.LoadBalancer.Ingress[0].IP)
	if err != nil {
		t.Fatal(err)
	}
	return netip.AddrPortFrom(ip, uint16(svc.Spec.Ports[0].Port))
}

// checkSandboxRaces fails on data races in azlb code the sandbox's
// controller reported.
func checkSandboxRaces(t *testing.T, dir string) {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(dir, "logs", "controller.log")); err == nil {
		for _, race := range testutil.OurRaces(string(b)) {
			t.Errorf("the sandbox controller hit a data race in azlb code:\n%s", race)
		}
	}
}

// setTaintsWith puts one NoExecute taint on a node of another cluster.
func setTaintsWith(t *testing.T, cs kubernetes.Interface, node, key string) {
	t.Helper()
	ctx := context.Background()
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: key, Effect: v1.TaintEffectNoExecute})
	if _, err := cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// The NIC demo: the emulated VMs are members of the NIC-based pool, azlb
// status shows them by node with their admin state, and an ARM deallocate
// of one shows it Down until it is started again.
func TestSandboxNICDemo(t *testing.T) {
	sb, out := upSandbox(t, sandbox.VariantNIC)
	if !strings.Contains(out, "the 5 VMs are members of the NIC-based pool") {
		t.Fatalf("no membership line:\n%s", out)
	}
	_, _, render := sandboxClients(t, sb)
	first := render()
	for _, want := range []string{"POOL kubernetes", "NIC-based", "aks-nic-000001", "aks-as-0", "nic:aks-as-0-nic/ipconfig1"} {
		if !strings.Contains(first, want) {
			t.Errorf("status lacks %q:\n%s", want, first)
		}
	}
	stateOf := func(node string) string {
		for _, line := range strings.Split(render(), "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == node {
				return f[2]
			}
		}
		return ""
	}
	// bin/azlb vm deallocate|start NODE, as the README shows them.
	vm := func(action string) {
		t.Helper()
		if out, err := sb.azlb(t, append([]string{"vm", action, "aks-nic-000001"}, sb.clusterFlags()...)...); err != nil {
			t.Fatalf("azlb vm %s aks-nic-000001: %v\n%s", action, err, out)
		}
	}
	vm("deallocate")
	eventually(t, 90*time.Second, "aks-nic-000001 Down in azlb status", func(context.Context) (bool, error) {
		return stateOf("aks-nic-000001") == "Down", nil
	})
	vm("start")
	eventually(t, 90*time.Second, "aks-nic-000001 None in azlb status", func(context.Context) (bool, error) {
		return stateOf("aks-nic-000001") == "None", nil
	})
	verifySandbox(t, sb)
	sb.down(t)
	if _, err := os.Stat(filepath.Join(sb.Dir, "azlb-node-agent.pid")); err == nil {
		t.Error("the node agent is left running after azlb sandbox down")
	}
	checkSandboxRaces(t, sb.Dir)
}

// sandboxDenied checks that new connections from src to a frontend fail,
// and that the sandbox's data plane counts them as denied by network
// security (not as a missing or failing backend).
func sandboxDenied(t *testing.T, dir string, src netip.Addr, fe netip.AddrPort) {
	t.Helper()
	if err := sandboxDeniedErr(t, dir, src, fe); err != nil {
		t.Fatal(err)
	}
}

func sandboxDeniedErr(t *testing.T, dir string, src netip.Addr, fe netip.AddrPort) error {
	t.Helper()
	const tries = 5
	before := sandboxDeniedFlows(t, dir, fe)
	for range tries {
		if name, err := testutil.HelloFrom(src, fe, 2*time.Second); err == nil {
			return fmt.Errorf("GET http://%s/ from %s answered by %q: want it denied", fe, src, name)
		}
	}
	var got uint64
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got = sandboxDeniedFlows(t, dir, fe) - before
		return got >= tries, nil
	})
	if err != nil {
		return fmt.Errorf("the data plane counted %d of %d failed connections from %s to %s as denied", got, tries, src, fe)
	}
	return nil
}

// sandboxDeniedFlows sums the denied counters of the sandbox data plane's
// rules on a frontend (GET /_emulator/dataplane).
func sandboxDeniedFlows(t *testing.T, dir string, fe netip.AddrPort) uint64 {
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
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(cfg.ResourceManagerEndpoint + "/_emulator/dataplane")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st dataplane.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("GET /_emulator/dataplane: %s: %v", resp.Status, err)
	}
	var n uint64
	for _, r := range st.Rules {
		if r.Frontend == fe.String() {
			n += r.Counters.Denied
		}
	}
	return n
}

// sourcesOf is the SOURCES column of a Service's frontend in azlb status:
// on the frontend line naming the Service, what follows its rules
// (PROTO/port->port).
func sourcesOf(status, svc string) string {
	for _, line := range strings.Split(status, "\n") {
		f := strings.Fields(line)
		// A shared frontend lists its Services as "a+b (shared)".
		if i := slices.IndexFunc(f, func(w string) bool { return slices.Contains(strings.Split(w, "+"), svc) }); i >= 2 {
			rest := slices.DeleteFunc(f[i+1:], func(w string) bool { return strings.Contains(w, "->") || w == "(shared)" })
			return strings.Join(rest, " ")
		}
	}
	return ""
}

// sandboxWithoutRules takes azlb's rules (k8s-azure-lb*) out of the
// sandbox's NSG until denied (the connection check) passes, and puts them
// back. The controller writes the NSG when it reconciles a Service, so it
// may put its rules back (or conflict with a write here) at any time: each
// attempt takes them out again.
func sandboxWithoutRules(t *testing.T, clients *azure.Clients, denied func() error) {
	t.Helper()
	isAzlbs := func(r *armnetwork.SecurityRule) bool {
		return strings.HasPrefix(strings.ToLower(ptr.Deref(r.Name, "")), "k8s-azure-lb")
	}
	// put replaces azlb's rules in the NSG with rules and returns those it
	// replaced.
	put := func(ctx context.Context, rules []*armnetwork.SecurityRule) ([]*armnetwork.SecurityRule, error) {
		sg, err := clients.SecurityGroup.Get(ctx, devenv.ResourceGroup, devenv.SecurityGroupName)
		if err != nil {
			return nil, err
		}
		var replaced []*armnetwork.SecurityRule
		keep := slices.Clone(rules)
		for _, r := range sg.Properties.SecurityRules {
			if isAzlbs(r) {
				replaced = append(replaced, r)
			} else {
				keep = append(keep, r)
			}
		}
		if len(replaced) == 0 && len(rules) == 0 {
			return nil, nil
		}
		props := *sg.Properties
		props.SecurityRules = keep
		out := *sg
		out.Properties = &props
		_, err = clients.SecurityGroup.CreateOrUpdate(ctx, devenv.ResourceGroup, devenv.SecurityGroupName, out, ptr.Deref(sg.Etag, ""))
		return replaced, err
	}
	var saved []*armnetwork.SecurityRule
	var last error
	attempts := 0
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		attempts++
		removed, err := put(ctx, nil)
		if err != nil {
			last = err
			return false, nil // a conflict with the controller's write: again
		}
		if saved == nil {
			if len(removed) == 0 {
				return false, fmt.Errorf("%s holds no rule of azlb's", devenv.SecurityGroupName)
			}
			saved = removed
		}
		last = denied()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("without azlb's rules in %s: %v (last: %v)", devenv.SecurityGroupName, err, last)
	}
	t.Logf("without azlb's %d rules in %s: denied (attempt %d)", len(saved), devenv.SecurityGroupName, attempts)
	eventually(t, 30*time.Second, "azlb's rules back in the NSG", func(ctx context.Context) (bool, error) {
		_, err := put(ctx, saved)
		return err == nil, nil
	})
}
