package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/nodeagent"
)

// The NIC demo runs one azlb-node-manager per node (when it is built), as
// the chart's DaemonSet does, and the controller without its
// cloud-node-controller: each node is initialized from its VM's instance
// metadata (the emulator's IMDS, docs/emulator.md).

const nodeManagerName = "azlb-node-manager"

// nodeManagerRules are the chart's azlb-node-manager ClusterRole.
var nodeManagerRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
	{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
	{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
}

// nodeManagerBuilt reports whether binDir holds azlb-node-manager.
func nodeManagerBuilt(binDir string) bool {
	_, err := os.Stat(filepath.Join(binDir, nodeManagerName))
	return err == nil
}

// startNodeManagers creates the node managers' ServiceAccount with the
// chart's rules and starts one node manager per node, as that
// ServiceAccount, asking the emulator's IMDS as the node's VM.
func startNodeManagers(ctx context.Context, cs kubernetes.Interface, dir, binDir, logs, url, caFile, adminKubeconfig string, nodes []nodeagent.Node) error {
	kubeconfig, err := nodeManagerKubeconfig(ctx, cs, dir, adminKubeconfig)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		ref, err := names.ParseProviderID(n.ProviderID)
		if err != nil {
			return err
		}
		vm := ref.Name
		if ref.Kind == names.ScaleSetVM {
			vm = ref.ScaleSet + "_" + ref.Instance
		}
		if err := startDetached(dir, nodeManagerName+"-"+n.Name, filepath.Join(logs, nodeManagerName+"-"+n.Name+".log"), filepath.Join(binDir, nodeManagerName),
			"--node-name", n.Name, "--kubeconfig", kubeconfig, "--imds-endpoint", url+emulator.IMDSPath(ref.Subscription, ref.ResourceGroup, vm),
			"--imds-ca-file", caFile, "--node-status-update-frequency=10s", "--v=2"); err != nil {
			return err
		}
	}
	return nil
}

// nodeManagerKubeconfig creates kube-system/azlb-node-manager with the
// chart's rules and writes a kubeconfig with a token for it.
func nodeManagerKubeconfig(ctx context.Context, cs kubernetes.Interface, dir, adminKubeconfig string) (string, error) {
	const ns = "kube-system"
	create := func(err error) error {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	if err := create(ignore(cs.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: nodeManagerName}}, metav1.CreateOptions{}))); err != nil {
		return "", err
	}
	if err := create(ignore(cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: nodeManagerName}, Rules: nodeManagerRules}, metav1.CreateOptions{}))); err != nil {
		return "", err
	}
	if err := create(ignore(cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: nodeManagerName},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: nodeManagerName},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: nodeManagerName, Namespace: ns}}}, metav1.CreateOptions{}))); err != nil {
		return "", err
	}
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, nodeManagerName,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s: %w", nodeManagerName, err)
	}
	cfg, err := clientcmd.LoadFromFile(adminKubeconfig)
	if err != nil {
		return "", err
	}
	for _, ai := range cfg.AuthInfos {
		ai.Token, ai.TokenFile, ai.ClientCertificateData, ai.ClientKeyData = tok.Status.Token, "", nil, nil
	}
	path := filepath.Join(dir, "node-manager.kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

func ignore[T any](_ T, err error) error { return err }

// stopNodeManagers stops every node manager the sandbox in dir started.
func stopNodeManagers(dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, nodeManagerName+"-*.pid"))
	for _, f := range files {
		devenv.StopPIDFile(f)
	}
}
