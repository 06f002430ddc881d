package devenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// ErrNoHelm is returned when bin/helm is missing.
var ErrNoHelm = errors.New("helm missing (build it with hack/build-tools.sh helm)")

// RenderChart runs `helm template azlb <chart> --namespace kube-system
// <args>` with the helm binary in binDir and returns the manifest.
func RenderChart(ctx context.Context, binDir, chart string, args ...string) ([]byte, error) {
	helm := filepath.Join(binDir, "helm")
	if _, err := os.Stat(helm); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrNoHelm, helm)
	}
	cmd := exec.CommandContext(ctx, helm, append([]string{"template", "azlb", chart, "--namespace", "kube-system"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// helm keeps caches and plugins under HOME; a run must not depend on
	// or write to the user's.
	home, err := os.MkdirTemp("", "azlb-helm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(home)
	cmd.Env = append(os.Environ(), "HOME="+home, "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm template %s: %w: %s", chart, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// Identities keeps the ServiceAccounts and RBAC objects of objs: what a
// controller manager runs as, without the workload.
func Identities(objs []runtime.Object) []runtime.Object {
	var out []runtime.Object
	for _, o := range objs {
		switch o.(type) {
		case *corev1.ServiceAccount, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *rbacv1.Role, *rbacv1.RoleBinding:
			out = append(out, o)
		}
	}
	return out
}

// ApplyChartIdentities renders the chart (helm in binDir) with extra
// `helm template` arguments, applies its ServiceAccounts and RBAC, and
// returns the container arguments of its Deployment: how the controller
// manager runs when the chart deploys it.
func ApplyChartIdentities(ctx context.Context, cs kubernetes.Interface, binDir, chart string, args ...string) ([]string, error) {
	manifest, err := RenderChart(ctx, binDir, chart, args...)
	if err != nil {
		return nil, err
	}
	objs, err := DecodeManifest("chart", manifest)
	if err != nil {
		return nil, err
	}
	var containerArgs []string
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok {
			containerArgs = d.Spec.Template.Spec.Containers[0].Args
		}
	}
	if containerArgs == nil {
		return nil, fmt.Errorf("the chart %s renders no Deployment", chart)
	}
	return containerArgs, Apply(ctx, cs, "chart", Identities(objs))
}
