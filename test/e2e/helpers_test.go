package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/testutil"
)

// controller is one running azlb-controller-manager process.
type controller struct {
	*devenv.Process
	name string
	// port serves /healthz and /metrics on 127.0.0.1.
	port int
}

// writeConfig writes an azure.json for the suite's emulator with extra
// fields.
func writeConfig(t *testing.T, extra map[string]any) string {
	t.Helper()
	return writeConfigFor(t, suite.env, extra)
}

// writeConfigFor writes an azure.json for env's emulator with extra fields.
func writeConfigFor(t *testing.T, env *devenv.Env, extra map[string]any) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(devenv.ConfigJSON(env.Server.URL(), env.CAFile), &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "azure.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startController runs the controller with the chart's arguments, as the
// chart's identities: the manager as the azlb-controller-manager
// ServiceAccount, each controller as its own. The test's flags (then extra)
// follow and win (the pod's IP is loopback here). It is stopped (SIGTERM)
// when the test ends, unless the test killed it.
func startController(t *testing.T, name, cloudConfig string, leaderElect bool, extra ...string) *controller {
	t.Helper()
	port, err := testutil.FreeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(suite.work, fmt.Sprintf("%s-%s.log", strings.ReplaceAll(t.Name(), "/", "_"), name))
	kc := suite.kube.ControllerKubeconfig
	args := make([]string, 0, len(suite.chartArgs)+12+len(extra))
	for _, a := range suite.chartArgs {
		args = append(args, strings.ReplaceAll(a, "$(POD_IP)", "127.0.0.1"))
	}
	args = append(args,
		"--cloud-config", cloudConfig,
		"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--leader-elect="+strconv.FormatBool(leaderElect),
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms",
		"--secure-port", strconv.Itoa(port),
		"--v=2",
	)
	args = append(args, extra...)
	p, err := devenv.StartProcess(suite.ccmBinary, args, logPath)
	if err != nil {
		t.Fatal(err)
	}
	c := &controller{Process: p, name: name, port: port}
	t.Cleanup(func() {
		c.stop()
		if b, err := os.ReadFile(logPath); err == nil {
			testutil.CheckControllerLog(t, "controller "+name, string(b))
		}
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("controller %s log (last 4 KiB):\n%s", name, tail(b, 4096))
			}
		}
	})
	return c
}

func (c *controller) stop() { c.Stop(20 * time.Second) }

func (c *controller) kill() { c.Kill() }

func (c *controller) logText(t *testing.T) string {
	t.Helper()
	s, err := c.Log()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// eventually polls cond every 200ms until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, cond)
	if err != nil {
		t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
	}
}

func createNode(t *testing.T, name, ip string, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	// Created with its status in one call, as the kubelet registers a node:
	// the service controller syncs on the add, not on later status updates.
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}, {Type: v1.NodeHostName, Address: name}}
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	created, err := suite.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(created.Status.Addresses) == 0 {
		t.Fatal("the API server dropped the node's status on create")
	}
	t.Cleanup(func() { _ = suite.cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

func createNamespace(t *testing.T) string {
	t.Helper()
	ns, err := suite.cs.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func loadBalancerService(ns, name string, ports ...int32) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name}},
	}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: fmt.Sprintf("p%d", p), Port: p, TargetPort: intstr.FromInt32(p), Protocol: v1.ProtocolTCP})
	}
	return svc
}

// ingressIP waits for the Service's first ingress IP.
func ingressIP(t *testing.T, ns, name string) string {
	t.Helper()
	var ip string
	eventually(t, 60*time.Second, "ingress IP of "+ns+"/"+name, func(ctx context.Context) (bool, error) {
		svc, err := suite.cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
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

var (
	clientsOnce sync.Once
	clients     *azure.Clients
)

// arm is an ARM client set for inspecting the emulator.
func arm(t *testing.T) *azure.Clients {
	t.Helper()
	clientsOnce.Do(func() {
		c, err := suite.env.Clients(context.Background(), azure.ClientOptions{Source: "e2e"})
		if err != nil {
			t.Fatal(err)
		}
		clients = c
	})
	return clients
}

// getLB returns the load balancer, or nil when it does not exist.
func getLB(t *testing.T, name string) *armnetwork.LoadBalancer {
	t.Helper()
	lb, err := arm(t).LoadBalancer.Get(context.Background(), devenv.ResourceGroup, name)
	if azure.Classify(err) == azure.ClassStale {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return lb
}

func poolMembers(lb *armnetwork.LoadBalancer, pool string) []string {
	if lb == nil || lb.Properties == nil {
		return nil
	}
	for _, p := range lb.Properties.BackendAddressPools {
		if p.Name != nil && *p.Name == pool && p.Properties != nil {
			var out []string
			for _, a := range p.Properties.LoadBalancerBackendAddresses {
				if a.Name != nil {
					out = append(out, *a.Name)
				}
			}
			return out
		}
	}
	return nil
}

func ruleCount(lb *armnetwork.LoadBalancer) int {
	if lb == nil || lb.Properties == nil {
		return 0
	}
	return len(lb.Properties.LoadBalancingRules)
}

// armWrites counts writes in the emulator's request log.
func armWrites() int {
	n := 0
	for _, r := range suite.env.Emulator().Requests() {
		if r.Kind == "arm" && r.Method != http.MethodGet && r.Method != http.MethodHead {
			n++
		}
	}
	return n
}

func deleteService(t *testing.T, ns, name string) {
	t.Helper()
	err := suite.cs.CoreV1().Services(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// deleteServiceAndWait deletes the Service and waits until it is gone (its
// finalizer removed by the controller, which must still run).
func deleteServiceAndWait(t *testing.T, ns, name string) {
	deleteService(t, ns, name)
	eventually(t, 60*time.Second, "the Service "+name+" deleted", func(ctx context.Context) (bool, error) {
		_, err := suite.cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// serviceEvent reports whether the Service has an event of reason whose
// message holds text.
func serviceEvent(ns, name, reason, text string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		evs, err := suite.cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason && strings.Contains(e.Message, text) {
				return true, nil
			}
		}
		return false, nil
	}
}

// notThrottled fails t if env's emulator, started with its default limits
// (Azure's), answers a request 429 while t runs (testutil.NotThrottled).
func notThrottled(t *testing.T, env *devenv.Env) {
	t.Helper()
	testutil.NotThrottled(t, env.Emulator(), emulator.Options{})
}
