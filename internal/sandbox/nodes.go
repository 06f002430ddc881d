package sandbox

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/localcluster"
)

// VariantNodes is a real cluster (internal/localcluster: three nodes with
// containerd, kubelet and kube-proxy, each in a network namespace; the
// control plane with kube-controller-manager, kube-scheduler and CoreDNS),
// azlb as its cloud controller manager, and the emulator's data plane
// carrying Services' traffic to the nodes as Azure does. Needs root.
const VariantNodes = "nodes"

// ClusterDir is where the nodes variant keeps its cluster under the
// sandbox's directory.
const ClusterDir = "cluster"

// upNodes is Up for VariantNodes.
func upNodes(ctx context.Context, o Options, logs string, step func(format string, args ...any)) error {
	c, err := localcluster.Up(ctx, localcluster.Options{Dir: filepath.Join(o.Dir, ClusterDir), BinDir: o.BinDir, Detached: true,
		Progress: stepWriter(step)})
	if err != nil {
		return err
	}
	step("3 nodes Ready (slot %d: nodes on %s, Service IPs from %s, reached from %s)", c.Plan.Slot, c.Plan.NodeNet, c.Plan.Public, c.Plan.ClientIP)
	if err := copyFile(c.Kube.AdminKubeconfig, filepath.Join(o.Dir, KubeconfigFile)); err != nil {
		return err
	}
	caFile := filepath.Join(o.Dir, EmulatorCAFile)
	_ = os.Remove(caFile)
	emuLog := filepath.Join(logs, "emulator.log")
	if err := startDetached(o.Dir, "azlb-emulator", emuLog, filepath.Join(o.BinDir, "azlb-emulator"),
		append(c.EmulatorArgs(), "--listen", "127.0.0.1:0", "--ca-file", caFile)...); err != nil {
		return err
	}
	url, err := waitForLine(ctx, emuLog, "https://127.0.0.1:")
	if err != nil {
		return fmt.Errorf("emulator did not start (see %s): %w", emuLog, err)
	}
	step("ARM emulator serving on %s, its data plane in the cluster's load balancer namespace", url)
	env, err := devenv.Connect(ctx, url, caFile, nil, devenv.WithNetwork(c.Network()))
	if err != nil {
		return err
	}
	if err := c.CreateVMs(ctx, env); err != nil {
		return err
	}
	azureJSON := filepath.Join(o.Dir, AzureJSONFile)
	if err := os.WriteFile(azureJSON, devenv.ConfigJSON(url, caFile), 0o600); err != nil {
		return err
	}
	step("seeded the virtual network (subnet %s) and a VM per node; wrote %s", c.Plan.NodeNet, azureJSON)
	if err := devenv.ApplyFile(ctx, c.Client, o.RBACFile); err != nil {
		return err
	}
	kc := c.Kube.ControllerKubeconfig
	ctl := controllerCommand{Bin: filepath.Join(o.BinDir, "azlb-controller-manager"), Args: []string{
		"--cloud-config", azureJSON, "--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--leader-elect=false", "--use-service-account-credentials", "--secure-port", strconv.Itoa(cmpOr(o.SecurePort, 10258)), "--v=2"}}
	if err := ctl.start(o.Dir, filepath.Join(logs, "controller.log")); err != nil {
		return err
	}
	if err := c.WaitInitialized(ctx, 2*time.Minute); err != nil {
		return fmt.Errorf("%w (see %s)", err, filepath.Join(logs, "controller.log"))
	}
	step("azlb-controller-manager initialized the nodes from their VMs")
	if err := createNodesDemo(ctx, c.Client); err != nil {
		return err
	}
	ip, err := waitIngress(ctx, c.Client, DemoNamespace, "web")
	if err != nil {
		return fmt.Errorf("service %s/web got no ingress IP (see %s): %w", DemoNamespace, filepath.Join(logs, "controller.log"), err)
	}
	step("service %s/web has ingress IP %s", DemoNamespace, ip)
	from, err := waitClientIP(ctx, net.JoinHostPort(ip, "80"), 3*time.Minute)
	if err != nil {
		return fmt.Errorf("service %s/web does not answer (see %s): %w", DemoNamespace, emuLog, err)
	}
	step("service %s/web answers on %s:80; the pod saw the client as %s", DemoNamespace, ip, from)
	return nil
}

// cmpOr is cmp.Or for an int (the default secure port).
func cmpOr(v, def int) int {
	if v != 0 {
		return v
	}
	return def
}

// stepWriter turns the cluster's progress lines into sandbox steps.
type stepWriter func(format string, args ...any)

func (w stepWriter) Write(b []byte) (int, error) {
	w("%s", strings.TrimSpace(string(b)))
	return len(b), nil
}

// createNodesDemo runs agnhost netexec on every node (a Deployment of 3
// spread by anti-affinity) behind the Service "web" (port 80,
// externalTrafficPolicy Local: the pod sees the client's address).
func createNodesDemo(ctx context.Context, cs kubernetes.Interface) error {
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: DemoNamespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: DemoNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					Affinity: &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{{
						Weight: 100, PodAffinityTerm: v1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: "kubernetes.io/hostname"},
					}}}},
					Containers: []v1.Container{{Name: "agnhost", Image: "registry.k8s.io/e2e-test-images/agnhost:2.66.1",
						ImagePullPolicy: v1.PullNever, Args: []string{"netexec", "--http-port=8080"},
						ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 2}}},
				},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(DemoNamespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		return err
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: DemoNamespace},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: labels,
			ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal,
			Ports:                 []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}}},
	}
	_, err := cs.CoreV1().Services(DemoNamespace).Create(ctx, svc, metav1.CreateOptions{})
	return err
}

// waitClientIP polls GET /clientip on addr (agnhost netexec answers with
// the address it saw the request come from).
func waitClientIP(ctx context.Context, addr string, timeout time.Duration) (string, error) {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	defer hc.CloseIdleConnections()
	var got string
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/clientip", nil)
		if err != nil {
			return false, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		got = strings.TrimSpace(string(b))
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil && last != nil {
		return "", fmt.Errorf("%w (last: %w)", err, last)
	}
	return got, err
}

// downNodes tears down the nodes variant's cluster, if there is one.
func downNodes(dir string) error {
	return localcluster.Down(context.Background(), filepath.Join(dir, ClusterDir))
}
