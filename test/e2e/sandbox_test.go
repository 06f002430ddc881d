package e2e

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/sandbox"
	"github.com/azlb/azlb/internal/status"
	"github.com/azlb/azlb/internal/testutil"
)

// sandboxBinDir is a bin directory for the sandbox: its own binaries
// (emulator and CLI, which runs the NIC demo's node agent) built, the
// controller under test and the Kubernetes binaries linked.
func sandboxBinDir(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/azlb-emulator", "./cmd/azlb")
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

// upSandbox starts a sandbox variant (sandbox.Variant*, "" for the
// default); it is stopped when the test ends.
func upSandbox(t *testing.T, variant string) (sandbox.Options, *bytes.Buffer) {
	t.Helper()
	port, err := testutil.FreeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), ".sandbox")
	var out bytes.Buffer
	opts := sandbox.Options{Dir: dir, BinDir: sandboxBinDir(t), RBACFile: filepath.Join(suite.root, "deploy", "rbac.yaml"), SecurePort: port, Variant: variant, Out: &out}
	t.Cleanup(func() { sandbox.Down(dir) })
	if err := sandbox.Up(context.Background(), opts); err != nil {
		t.Fatalf("sandbox up: %v\n%s", err, out.String())
	}
	return opts, &out
}

// sandboxClients are ARM and Kubernetes clients for a running sandbox, and
// a renderer of its azlb status (with the service gateway in pod-based
// mode, as the CLI shows it).
func sandboxClients(t *testing.T, dir string) (*azure.Clients, kubernetes.Interface, func() string) {
	t.Helper()
	ctx := context.Background()
	cfg, err := config.LoadFile(filepath.Join(dir, sandbox.AzureJSONFile))
	if err != nil {
		t.Fatalf("the sandbox's azure.json: %v", err)
	}
	clients, err := azure.NewClients(ctx, cfg, azure.ClientOptions{Source: "e2e-sandbox"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(clients.Close)
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, sandbox.KubeconfigFile))
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(rc)
	render := func() string {
		snap, err := status.Collect(ctx, clients, cfg.ResourceGroup, cfg.ResourceGroup, cs)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.PodIPMode() {
			if err := status.CollectGateway(ctx, clients, cfg.ResourceGroup, snap); err != nil {
				t.Fatal(err)
			}
		}
		var b bytes.Buffer
		if err := status.Render(&b, snap); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	return clients, cs, render
}

// The README's first command: everything starts, the demo Services get
// their IPs, azlb status shows both load balancers and the Local Service's
// dedicated pool, the Services answer through the data plane (the Local one
// only from nodes with its endpoints), a taint shows as Down and takes the
// node out of rotation, and Down stops every process.
func TestSandboxUpStatusDown(t *testing.T) {
	ctx := context.Background()
	opts, out := upSandbox(t, "")
	dir := opts.Dir
	if !strings.Contains(out.String(), "sandbox ready") {
		t.Fatalf("no readiness line:\n%s", out.String())
	}
	if err := sandbox.Up(ctx, opts); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("a second sandbox up in the same directory: %v", err)
	}

	_, cs, render := sandboxClients(t, dir)
	first := render()
	for _, want := range []string{"LOAD BALANCER kubernetes", "LOAD BALANCER lb-pool2", "demo/web", "demo/api", "POOL demo.api"} {
		if !strings.Contains(first, want) {
			t.Errorf("status lacks %q:\n%s", want, first)
		}
	}

	// The data plane: curl http://<ingress-ip>:<port>/ shows the node that
	// served it; the Local Service only from nodes with its endpoints.
	web, api := sandboxFrontend(t, cs, "web"), sandboxFrontend(t, cs, "api")
	servedBy := func(fe netip.AddrPort, allowed ...string) map[string]int {
		t.Helper()
		seen := map[string]int{}
		eventually(t, 60*time.Second, "answers from "+fe.String(), func(context.Context) (bool, error) {
			name, err := testutil.Hello(fe, 2*time.Second)
			return err == nil && name != "", nil
		})
		for range 30 {
			name, err := testutil.Hello(fe, 2*time.Second)
			if err != nil {
				t.Fatalf("GET http://%s/: %v", fe, err)
			}
			if !slices.Contains(allowed, name) {
				t.Fatalf("GET http://%s/ answered by %q, want one of %v", fe, name, allowed)
			}
			seen[name]++
		}
		return seen
	}
	servedBy(web, "aks-pool1-0", "aks-pool1-1", "aks-pool1-2")
	servedBy(api, "aks-pool1-1", "aks-pool2-0")

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
	servedBy(web, "aks-pool1-0", "aks-pool1-2") // no new connection reaches the Down node

	verifySandbox(t, opts)

	sandbox.Down(dir)
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
func verifySandbox(t *testing.T, opts sandbox.Options) {
	t.Helper()
	var out []byte
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(opts.BinDir, "azlb"), "verify",
			"--kubeconfig", filepath.Join(opts.Dir, sandbox.KubeconfigFile), "--cloud-config", filepath.Join(opts.Dir, sandbox.AzureJSONFile))
		var err error
		out, err = cmd.CombinedOutput()
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("azlb verify did not come clean in 30s:\n%s", out)
	}
	if !strings.Contains(string(out), "clean") {
		t.Fatalf("azlb verify exited 0 without saying clean:\n%s", out)
	}
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
	ctx := context.Background()
	opts, out := upSandbox(t, sandbox.VariantNIC)
	if !strings.Contains(out.String(), "the 5 VMs are members of the NIC-based pool") {
		t.Fatalf("no membership line:\n%s", out.String())
	}
	clients, _, render := sandboxClients(t, opts.Dir)
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
	cfg, err := config.LoadFile(filepath.Join(opts.Dir, sandbox.AzureJSONFile))
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := devenv.NewCompute(clients, cfg.SubscriptionID)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := sandbox.ReadNodes(filepath.Join(opts.Dir, sandbox.NodesFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Name != "aks-nic-000001" {
			continue
		}
		if err := cmp.PowerAction(ctx, n.ProviderID, devenv.ActionDeallocate); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, "aks-nic-000001 Down in azlb status", func(context.Context) (bool, error) {
			return stateOf("aks-nic-000001") == "Down", nil
		})
		if err := cmp.PowerAction(ctx, n.ProviderID, devenv.ActionStart); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, "aks-nic-000001 None in azlb status", func(context.Context) (bool, error) {
			return stateOf("aks-nic-000001") == "None", nil
		})
	}
	verifySandbox(t, opts)
	sandbox.Down(opts.Dir)
	if _, err := os.Stat(filepath.Join(opts.Dir, "azlb-node-agent.pid")); err == nil {
		t.Error("the node agent is left running after Down")
	}
	checkSandboxRaces(t, opts.Dir)
}
