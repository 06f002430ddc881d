package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/testutil"
)

var (
	nodeManagerOnce   sync.Once
	nodeManagerBinary string
	nodeManagerErr    error
)

// buildNodeManager builds azlb-node-manager once per suite.
func buildNodeManager(t *testing.T) string {
	t.Helper()
	nodeManagerOnce.Do(func() {
		nodeManagerBinary = filepath.Join(suite.work, "azlb-node-manager")
		nodeManagerErr = testutil.GoBuild(nodeManagerBinary, "./cmd/azlb-node-manager")
	})
	if nodeManagerErr != nil {
		t.Fatal(nodeManagerErr)
	}
	return nodeManagerBinary
}

// applyNodeManagerChart applies what the chart renders for the node
// manager with nodeManager.enabled: its ServiceAccount, ClusterRole and
// binding, and the ValidatingAdmissionPolicy that limits its writes to its
// own node. They are removed when the test ends.
func applyNodeManagerChart(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	manifest, err := devenv.RenderChart(ctx, filepath.Join(suite.root, "bin"), filepath.Join(suite.root, "deploy", "helm", "azlb"),
		"--set", "image.registry=e2e.invalid", "--set", "nodeManager.enabled=true", "--set", "controllers={service-lb-controller}",
		"--show-only", "templates/nodemanager.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := devenv.DecodeManifest("nodemanager.yaml", manifest)
	if err != nil {
		t.Fatal(err)
	}
	var identities []runtime.Object
	adm := suite.cs.AdmissionregistrationV1()
	for _, o := range objs {
		switch o := o.(type) {
		case *admissionv1.ValidatingAdmissionPolicy:
			if _, err := adm.ValidatingAdmissionPolicies().Create(ctx, o, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = adm.ValidatingAdmissionPolicies().Delete(context.Background(), o.Name, metav1.DeleteOptions{})
			})
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			if _, err := adm.ValidatingAdmissionPolicyBindings().Create(ctx, o, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = adm.ValidatingAdmissionPolicyBindings().Delete(context.Background(), o.Name, metav1.DeleteOptions{})
			})
		case *v1.ServiceAccount, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
			identities = append(identities, o)
		}
	}
	if len(identities) != 3 {
		t.Fatalf("the chart's node manager identities: %d objects", len(identities))
	}
	if err := devenv.Apply(ctx, suite.cs, "nodemanager.yaml", identities); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = suite.cs.RbacV1().ClusterRoleBindings().Delete(ctx, nodeManagerSA, metav1.DeleteOptions{})
		_ = suite.cs.RbacV1().ClusterRoles().Delete(ctx, nodeManagerSA, metav1.DeleteOptions{})
		_ = suite.cs.CoreV1().ServiceAccounts(metav1.NamespaceSystem).Delete(ctx, nodeManagerSA, metav1.DeleteOptions{})
	})
}

const nodeManagerSA = "azlb-node-manager"

// nodeManagerKubeconfig writes a kubeconfig for the node manager of node:
// a token of its ServiceAccount bound to a pod on that node, as the
// DaemonSet's pod there mounts (the pod object only: no kubelet runs it).
func nodeManagerKubeconfig(t *testing.T, node string) string {
	t.Helper()
	ctx := context.Background()
	pods := suite.cs.CoreV1().Pods(metav1.NamespaceSystem)
	pod, err := pods.Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: nodeManagerSA + "-" + node},
		Spec: v1.PodSpec{NodeName: node, ServiceAccountName: nodeManagerSA,
			Containers: []v1.Container{{Name: "azlb-node-manager", Image: "e2e.invalid/azlb-node-manager"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = pods.Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: to.Ptr[int64](0)})
	})
	tok, err := suite.cs.CoreV1().ServiceAccounts(metav1.NamespaceSystem).CreateToken(ctx, nodeManagerSA,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: to.Ptr[int64](3600),
			BoundObjectRef: &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(suite.kube.AdminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, ai := range cfg.AuthInfos {
		ai.Token, ai.TokenFile = tok.Status.Token, ""
	}
	path := filepath.Join(t.TempDir(), node+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// imdsVMName is the VM name a node's providerID stands for, as the
// emulator's IMDS path takes it.
func imdsVMName(t *testing.T, providerID string) string {
	t.Helper()
	ref, err := names.ParseProviderID(providerID)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Kind == names.ScaleSetVM {
		return ref.ScaleSet + "_" + ref.Instance
	}
	return ref.Name
}

// armCallsSince lists the ARM requests the emulator served since start.
func armCallsSince(start time.Time) []string {
	var out []string
	for _, r := range suite.env.Server.Emulator().Requests() {
		if r.Kind == "arm" && !r.Time.Before(start) {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	return out
}

// Nodes join as kubelets started with --cloud-provider=external register
// them (the uninitialized taint, no providerID, no InternalIP); one
// azlb-node-manager per node, as the node's least-privilege
// ServiceAccount, initializes it from the emulator's instance metadata
// with no ARM call; a VM's address change reaches its node, again without
// ARM calls.
func TestNodeManagerInitializesNodesWithoutARM(t *testing.T) {
	ctx := context.Background()
	bin := buildNodeManager(t)
	cmp, err := suite.env.Compute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cmp.Close()
	vms, err := cmp.CreateScaleSet(ctx, "e2e-nodemanager", 2, devenv.ScaleSetOptions{Prefix: "e2e-nm-"})
	if err != nil {
		t.Fatal(err)
	}
	vm, err := cmp.CreateVM(ctx, "e2e-nm-vm", "")
	if err != nil {
		t.Fatal(err)
	}
	vms = append(vms, vm)
	applyNodeManagerChart(t)

	kubeconfigs := map[string]string{}
	for _, vm := range vms {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: vm.Name}, Spec: v1.NodeSpec{Taints: []v1.Taint{
			{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule}}}}
		n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeHostName, Address: vm.Name}}
		if _, err := suite.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = suite.cs.CoreV1().Nodes().Delete(context.Background(), vm.Name, metav1.DeleteOptions{}) })
		kubeconfigs[vm.Name] = nodeManagerKubeconfig(t, vm.Name)
	}
	// The node managers start once the chart's admission policy is in
	// force: a node manager may write no other node than its own.
	own := nodeClient(t, kubeconfigs[vms[0].Name])
	waitRefused(t, own, vms[1].Name)

	start := time.Now()
	for _, vm := range vms {
		logPath := filepath.Join(suite.work, t.Name()+"-"+vm.Name+".log")
		p, err := devenv.StartProcess(bin, []string{
			"--node-name", vm.Name, "--kubeconfig", kubeconfigs[vm.Name],
			"--imds-endpoint", suite.env.URL + emulator.IMDSPath(devenv.SubscriptionID, devenv.ResourceGroup, imdsVMName(t, vm.ProviderID)),
			"--imds-ca-file", suite.env.CAFile, "--node-status-update-frequency=1s", "--v=2",
		}, logPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			p.Stop(10 * time.Second)
			if t.Failed() {
				if s, err := p.Log(); err == nil {
					t.Logf("node manager %s log (last 4 KiB):\n%s", vm.Name, tail([]byte(s), 4096))
				}
			}
		})
	}

	initialized := func(n *v1.Node, vm devenv.NodeVM) error {
		if hasTaint(n, cloudproviderapi.TaintExternalCloudProvider) {
			return fmt.Errorf("still tainted")
		}
		if n.Spec.ProviderID != vm.ProviderID {
			return fmt.Errorf("providerID %q, want %q", n.Spec.ProviderID, vm.ProviderID)
		}
		if n.Labels[v1.LabelInstanceTypeStable] != "Standard_D2s_v3" || n.Labels[v1.LabelTopologyRegion] != devenv.Location || n.Labels[v1.LabelTopologyZone] == "" {
			return fmt.Errorf("labels %v", n.Labels)
		}
		for _, ip := range vm.IPs {
			if !slices.Contains(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip}) {
				return fmt.Errorf("addresses %v, want %v", n.Status.Addresses, vm.IPs)
			}
		}
		return nil
	}
	var last error
	eventually(t, 60*time.Second, "every node initialized by its node manager", func(ctx context.Context) (bool, error) {
		for _, vm := range vms {
			n, err := suite.cs.CoreV1().Nodes().Get(ctx, vm.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if last = initialized(n, vm); last != nil {
				last = fmt.Errorf("node %s: %w", vm.Name, last)
				return false, nil
			}
		}
		return true, nil
	})
	t.Logf("%d nodes initialized in %v", len(vms), time.Since(start).Round(time.Millisecond))
	if calls := armCallsSince(start); len(calls) != 0 {
		t.Fatalf("the node managers made %d ARM calls: %v", len(calls), calls)
	}

	// The standalone VM's NIC gets another address (an ARM write by the
	// test); the node follows from instance metadata alone.
	nic, err := arm(t).Interface.Get(ctx, devenv.ResourceGroup, vm.Name+"-nic")
	if err != nil {
		t.Fatal(err)
	}
	newIP := nextAddress(t, vm.IPs[0])
	cfg := nic.Properties.IPConfigurations[0].Properties
	cfg.PrivateIPAllocationMethod = to.Ptr(armnetwork.IPAllocationMethodStatic)
	cfg.PrivateIPAddress = to.Ptr(newIP)
	if _, err := arm(t).Interface.CreateOrUpdate(ctx, devenv.ResourceGroup, vm.Name+"-nic", *nic, ""); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	eventually(t, 30*time.Second, "the new address on node "+vm.Name, func(ctx context.Context) (bool, error) {
		n, err := suite.cs.CoreV1().Nodes().Get(ctx, vm.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return slices.Contains(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: newIP}) &&
			!slices.Contains(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: vm.IPs[0]}), nil
	})
	t.Logf("address change reached the node in %v", time.Since(changed).Round(time.Millisecond))
	if calls := armCallsSince(changed); len(calls) != 0 {
		t.Fatalf("the node managers made %d ARM calls: %v", len(calls), calls)
	}

	// With the policy in force, its own node is still its to write (the
	// node managers' own updates and patches were too).
	if _, err := own.CoreV1().Nodes().Patch(ctx, vms[0].Name, types.StrategicMergePatchType, touch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("the node manager of %s may not patch its own node: %v", vms[0].Name, err)
	}
}

// touch is a harmless node patch.
var touch = []byte(`{"metadata":{"labels":{"e2e.azlb.io/touched":"true"}}}`)

func nodeClient(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(rc)
}

// waitRefused waits until cs may not patch node (the API server applies a
// new admission policy within a second or so).
func waitRefused(t *testing.T, cs kubernetes.Interface, node string) {
	t.Helper()
	eventually(t, 10*time.Second, "a node manager refused another node, "+node, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, touch, metav1.PatchOptions{})
		if err != nil && !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			return false, err
		}
		if err != nil {
			t.Logf("another node's patch: %v", err)
		}
		return err != nil, nil
	})
}

// nextAddress is ip moved to 10.240.250.0/24 (free in the node subnet
// 10.240.0.0/16, which allocates from its start).
func nextAddress(t *testing.T, ip string) string {
	t.Helper()
	parts := strings.Split(ip, ".")
	if len(parts) != 4 {
		t.Fatalf("not an IPv4 address: %s", ip)
	}
	return parts[0] + "." + parts[1] + ".250." + parts[3]
}
