// Package chart checks the Helm chart deploy/helm/azlb: helm lint, and what
// helm template renders, parsed into Kubernetes objects, for the defaults
// and for each option. deploy/rbac.yaml must be the chart's rendering of
// its identities. The e2e suite (test/e2e) applies the same rendering to a
// real API server and runs the controller as those identities.
//
// It needs bin/helm (hack/build-tools.sh helm); `make test-chart` builds it.
package chart

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/azlb/azlb/internal/devenv"
)

var root = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}()

var (
	chartDir   = filepath.Join(root, "deploy", "helm", "azlb")
	testValues = filepath.Join(chartDir, "ci", "test-values.yaml")
	binDir     = filepath.Join(root, "bin")
)

// render runs helm template with the test values and args.
func render(t *testing.T, args ...string) []k8sruntime.Object {
	t.Helper()
	out, err := devenv.RenderChart(context.Background(), binDir, chartDir, append([]string{"-f", testValues}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := devenv.DecodeManifest("helm template", out)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// renderErr runs helm template expecting it to fail, and returns its error.
func renderErr(t *testing.T, args ...string) string {
	t.Helper()
	_, err := devenv.RenderChart(context.Background(), binDir, chartDir, append([]string{"-f", testValues}, args...)...)
	if err == nil {
		t.Fatalf("helm template %v succeeded, want an error", args)
	}
	return err.Error()
}

func only[T any](t *testing.T, objs []k8sruntime.Object) T {
	t.Helper()
	all := all[T](objs)
	if len(all) != 1 {
		t.Fatalf("rendered %d objects of type %T, want 1", len(all), *new(T))
	}
	return all[0]
}

func all[T any](objs []k8sruntime.Object) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func TestLint(t *testing.T) {
	cmd := exec.Command(filepath.Join(binDir, "helm"), "lint", "--strict", chartDir, "-f", testValues, "--namespace", "kube-system")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "1 chart(s) linted, 0 chart(s) failed") {
		t.Fatalf("helm lint said:\n%s", out)
	}
}

func TestDeploymentDefaults(t *testing.T) {
	objs := render(t)
	d := only[*appsv1.Deployment](t, objs)
	if d.Namespace != "kube-system" || d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("deployment %s/%s replicas %v, want kube-system and 2", d.Namespace, d.Name, d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != "azlb-controller-manager" || pod.PriorityClassName != "system-cluster-critical" {
		t.Errorf("pod runs as %q with priority %q", pod.ServiceAccountName, pod.PriorityClassName)
	}
	if pod.NodeSelector["node-role.kubernetes.io/control-plane"] != "" || len(pod.NodeSelector) != 1 {
		t.Errorf("nodeSelector %v, want the control plane", pod.NodeSelector)
	}
	for _, key := range []string{"node-role.kubernetes.io/control-plane", "node.cloudprovider.kubernetes.io/uninitialized"} {
		if !slices.ContainsFunc(pod.Tolerations, func(tol corev1.Toleration) bool {
			return tol.Key == key && tol.Operator == corev1.TolerationOpExists
		}) {
			t.Errorf("no toleration of %s", key)
		}
	}
	if a := pod.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 ||
		a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != "kubernetes.io/hostname" {
		t.Errorf("affinity %+v, want replicas on distinct nodes", pod.Affinity)
	}
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v, want non-root 65532 with the runtime's seccomp profile", psc)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != "registry.example.test/azlb/azlb-controller-manager:v0.1.0" {
		t.Errorf("image %q, want the test registry and the chart's appVersion", c.Image)
	}
	sc := c.SecurityContext
	if sc == nil || sc.Privileged == nil || *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v, want unprivileged, read-only root, no capabilities", sc)
	}
	for _, want := range []string{
		"--cloud-config=/etc/azlb/azure.json",
		"--controllers=service-lb-controller,cloud-node-controller,cloud-node-lifecycle-controller,node-admin-state,spot-eviction,local-service-pools,service-gateway,drift-repair",
		"--use-service-account-credentials",
		"--leader-elect=true",
		"--leader-elect-resource-name=azlb-controller-manager",
		"--bind-address=$(POD_IP)",
		"--secure-port=10268",
	} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %q", c.Args, want)
		}
	}
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--load-balancer-class") }) {
		t.Errorf("args %q: a load-balancer class by default, want none (the class-less Services)", c.Args)
	}
	if len(c.Env) != 1 || c.Env[0].Name != "POD_IP" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("env %+v, want POD_IP from status.podIP", c.Env)
	}
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Scheme != corev1.URISchemeHTTPS || p.HTTPGet.Port.String() != "https" {
			t.Errorf("%s probe %+v, want HTTPS GET /healthz on the https port", name, p)
		}
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 10268 {
		t.Errorf("ports %+v, want 10268", c.Ports)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v, want cpu and memory requests and a memory limit", c.Resources)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	if mounts["cloud-config"] != "/etc/azlb" || mounts["tmp"] != "/tmp" {
		t.Errorf("mounts %v, want azure.json at /etc/azlb and a writable /tmp", mounts)
	}
	vol := volume(t, pod, "cloud-config")
	if vol.Secret == nil || vol.Secret.SecretName != "azure-cloud-provider" || vol.Secret.Items[0].Key != "azure.json" || vol.Secret.Items[0].Path != "azure.json" {
		t.Errorf("cloud-config volume %+v, want key azure.json of Secret azure-cloud-provider", vol)
	}

	pdb := only[*policyv1.PodDisruptionBudget](t, objs)
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PDB maxUnavailable %v, want 1", pdb.Spec.MaxUnavailable)
	}
	for k, v := range pdb.Spec.Selector.MatchLabels {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("PDB selector %v does not select the pods (%v)", pdb.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
		}
	}
	if n := len(all[*unstructured.Unstructured](objs)); n != 0 {
		t.Errorf("%d objects of kinds outside client-go by default, want none (ServiceMonitor is opt-in)", n)
	}
}

func volume(t *testing.T, pod corev1.PodSpec, name string) corev1.Volume {
	t.Helper()
	for _, v := range pod.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no volume %s", name)
	return corev1.Volume{}
}

// controllerSAs are the client identities of the default controllers and
// of the cloud provider.
var controllerSAs = []string{
	"azlb-admin-state-controller", "azlb-cloud-node-controller", "azlb-cloud-node-lifecycle-controller",
	"azlb-cloud-provider", "azlb-drift-controller", "azlb-local-service-controller", "azlb-service-controller", "azlb-service-gateway-controller",
	"azlb-spot-eviction-controller",
}

func TestRBACIsPerIdentityAndLeastPrivilege(t *testing.T) {
	objs := render(t)
	var sas []string
	for _, sa := range all[*corev1.ServiceAccount](objs) {
		if sa.Namespace != "kube-system" {
			t.Errorf("ServiceAccount %s in %s", sa.Name, sa.Namespace)
		}
		if sa.Name != "azlb-controller-manager" && (sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken) {
			t.Errorf("controller ServiceAccount %s mounts its token; its tokens are minted", sa.Name)
		}
		sas = append(sas, sa.Name)
	}
	slices.Sort(sas)
	want := append([]string{"azlb-controller-manager"}, controllerSAs...)
	slices.Sort(want)
	if !slices.Equal(sas, want) {
		t.Errorf("ServiceAccounts %v, want %v", sas, want)
	}

	roles := map[string]*rbacv1.ClusterRole{}
	for _, r := range all[*rbacv1.ClusterRole](objs) {
		roles[r.Name] = r
		for _, rule := range r.Rules {
			for _, field := range [][]string{rule.Verbs, rule.Resources, rule.APIGroups} {
				if slices.Contains(field, "*") {
					t.Errorf("ClusterRole %s has a wildcard rule %+v", r.Name, rule)
				}
			}
			if slices.Contains(rule.Resources, "secrets") {
				t.Errorf("ClusterRole %s reads secrets", r.Name)
			}
		}
	}
	// Each controller identity is bound to its own ClusterRole and to no
	// other.
	bound := map[string][]string{}
	for _, b := range all[*rbacv1.ClusterRoleBinding](objs) {
		for _, s := range b.Subjects {
			bound[s.Name] = append(bound[s.Name], b.RoleRef.Name)
		}
	}
	for _, sa := range controllerSAs {
		if !slices.Equal(bound[sa], []string{sa}) {
			t.Errorf("%s is bound to %v, want only its own ClusterRole", sa, bound[sa])
		}
		if roles[sa] == nil {
			t.Errorf("no ClusterRole %s", sa)
		}
	}
	if !allows(roles["azlb-service-controller"].Rules, "", "services/status", "patch") || allows(roles["azlb-service-controller"].Rules, "", "nodes", "patch") {
		t.Error("service controller: want services/status patch and no node writes")
	}
	if !allows(roles["azlb-spot-eviction-controller"].Rules, "", "nodes", "patch") || !allows(roles["azlb-spot-eviction-controller"].Rules, "", "events", "watch") {
		t.Error("spot-eviction controller: want node patch and event watch")
	}
	cn, cnl := roles["azlb-cloud-node-controller"].Rules, roles["azlb-cloud-node-lifecycle-controller"].Rules
	if !allows(cn, "", "nodes", "update") || !allows(cn, "", "nodes/status", "patch") || allows(cn, "", "nodes", "delete") {
		t.Error("cloud node controller: want node update and status patch, and no node deletion")
	}
	if !allows(cnl, "", "nodes", "patch") || !allows(cnl, "", "nodes", "delete") || allows(cnl, "", "nodes", "update") || allows(cnl, "", "nodes/status", "patch") {
		t.Error("cloud node lifecycle controller: want node patch (taint) and delete, nothing else on nodes")
	}
	if gw := roles["azlb-service-gateway-controller"].Rules; !allows(gw, "", "services", "update") || !allows(gw, "", "services/status", "patch") ||
		allows(gw, "", "services", "delete") || allows(gw, "", "nodes", "patch") {
		t.Error("service-gateway controller: want Service update (its finalizer) and status patch, no Service delete, no node writes")
	}
	if as := roles["azlb-admin-state-controller"].Rules; allows(as, "", "nodes", "patch") || allows(as, "", "nodes", "update") ||
		allows(as, "", "nodes/status", "update") || !allows(as, "", "nodes/status", "patch") {
		t.Error("admin-state controller: want nodes/status patch (its LoadBalancerDrained condition) and no other node writes")
	}
	if allows(roles["azlb-controller-manager"].Rules, "", "services/status", "patch") || !allows(roles["azlb-controller-manager"].Rules, "discovery.k8s.io", "endpointslices", "watch") {
		t.Error("manager: want the informers' reads and no writes")
	}

	// The manager mints tokens for exactly the controller identities.
	role := only[*rbacv1.Role](t, objs)
	var tokenFor []string
	for _, rule := range role.Rules {
		if slices.Contains(rule.Resources, "serviceaccounts/token") {
			tokenFor = rule.ResourceNames
		}
		if slices.Contains(rule.Resources, "leases") && slices.Contains(rule.Verbs, "update") && !slices.Equal(rule.ResourceNames, []string{"azlb-controller-manager"}) {
			t.Errorf("lease update on %v, want only the leader-election lease", rule.ResourceNames)
		}
	}
	if !slices.Equal(tokenFor, controllerSAs) {
		t.Errorf("tokens for %v, want %v", tokenFor, controllerSAs)
	}
	// Secrets: get on the one Secret cloudConfigType reads, nothing else.
	var secretRules []rbacv1.PolicyRule
	for _, rule := range role.Rules {
		if slices.Contains(rule.Resources, "secrets") {
			secretRules = append(secretRules, rule)
		}
	}
	if len(secretRules) != 1 || !slices.Equal(secretRules[0].ResourceNames, []string{"azure-cloud-provider"}) || !slices.Equal(secretRules[0].Verbs, []string{"get"}) {
		t.Errorf("secret rules %+v, want get on azure-cloud-provider only", secretRules)
	}
	for _, rule := range only[*rbacv1.Role](t, render(t, "--set", "cloudConfig.readSecret=false")).Rules {
		if slices.Contains(rule.Resources, "secrets") {
			t.Errorf("cloudConfig.readSecret=false still grants %+v", rule)
		}
	}
}

// allows is true when rules grant verb on group/resource.
func allows(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb)
	})
}

func TestControllersSelectIdentities(t *testing.T) {
	objs := render(t, "--set", "controllers={service-lb-controller}")
	var sas []string
	for _, sa := range all[*corev1.ServiceAccount](objs) {
		sas = append(sas, sa.Name)
	}
	slices.Sort(sas)
	if want := []string{"azlb-cloud-provider", "azlb-controller-manager", "azlb-service-controller"}; !slices.Equal(sas, want) {
		t.Errorf("ServiceAccounts %v, want %v", sas, want)
	}
	d := only[*appsv1.Deployment](t, objs)
	if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--controllers=service-lb-controller") {
		t.Errorf("args %q", d.Spec.Template.Spec.Containers[0].Args)
	}
}

func TestRefusesWhatItCannotHonour(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "controllers={service-lb-controller,route}"}, `controllers: "route" is not a controller azlb knows`},
		{[]string{"--set", "controllers=null"}, "controllers: name at least one controller"},
		{[]string{"--set", "image.registry="}, "image.registry is required"},
		{[]string{"--namespace", "azlb"}, `install azlb into kube-system`},
		{[]string{"--set", "cloudConfig.source=file"}, `cloudConfig.source: "file" is not one of`},
		{[]string{"--set", "workloadIdentity.enabled=true"}, "workloadIdentity.clientId is required"},
		{[]string{"--set", "loadBalancerClass=Azlb Class"}, `loadBalancerClass: "Azlb Class" is not a label-style name`},
		{[]string{"--set", "loadBalancerClass=a/b/c"}, `loadBalancerClass: "a/b/c" is not a label-style name`},
	} {
		if got := renderErr(t, tc.args...); !strings.Contains(got, tc.want) {
			t.Errorf("helm template %v failed with %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestOptions(t *testing.T) {
	t.Run("workload identity", func(t *testing.T) {
		objs := render(t, "--set", "workloadIdentity.enabled=true,workloadIdentity.clientId=11111111-2222-3333-4444-555555555555")
		for _, sa := range all[*corev1.ServiceAccount](objs) {
			got := sa.Annotations["azure.workload.identity/client-id"]
			if sa.Name == "azlb-controller-manager" && got != "11111111-2222-3333-4444-555555555555" {
				t.Errorf("manager ServiceAccount annotations %v", sa.Annotations)
			}
			if sa.Name != "azlb-controller-manager" && got != "" {
				t.Errorf("controller ServiceAccount %s has the workload identity", sa.Name)
			}
		}
		d := only[*appsv1.Deployment](t, objs)
		if d.Spec.Template.Labels["azure.workload.identity/use"] != "true" {
			t.Errorf("pod labels %v, want azure.workload.identity/use", d.Spec.Template.Labels)
		}
	})
	t.Run("hostPath azure.json", func(t *testing.T) {
		d := only[*appsv1.Deployment](t, render(t, "--set", "cloudConfig.source=hostPath"))
		pod := d.Spec.Template.Spec
		v := volume(t, pod, "cloud-config")
		if v.HostPath == nil || v.HostPath.Path != "/etc/kubernetes/azure.json" || *v.HostPath.Type != corev1.HostPathFile {
			t.Errorf("volume %+v, want the node's /etc/kubernetes/azure.json", v)
		}
		if m := pod.Containers[0].VolumeMounts[0]; m.MountPath != "/etc/azlb/azure.json" || !m.ReadOnly {
			t.Errorf("mount %+v, want the file read-only at /etc/azlb/azure.json", m)
		}
	})
	t.Run("configMap azure.json", func(t *testing.T) {
		d := only[*appsv1.Deployment](t, render(t, "--set", "cloudConfig.source=configMap,cloudConfig.name=azlb-config"))
		if v := volume(t, d.Spec.Template.Spec, "cloud-config"); v.ConfigMap == nil || v.ConfigMap.Name != "azlb-config" {
			t.Errorf("volume %+v, want ConfigMap azlb-config", v)
		}
	})
	t.Run("client certificate", func(t *testing.T) {
		pod := only[*appsv1.Deployment](t, render(t)).Spec.Template.Spec
		for _, v := range pod.Volumes {
			if v.Name == "client-certificate" {
				t.Errorf("a client-certificate volume by default: %+v", v)
			}
		}
		pod = only[*appsv1.Deployment](t, render(t, "--set", "clientCertificate.secretName=azlb-client-certificate")).Spec.Template.Spec
		v := volume(t, pod, "client-certificate")
		if v.Secret == nil || v.Secret.SecretName != "azlb-client-certificate" || v.Secret.DefaultMode == nil || *v.Secret.DefaultMode != 0o400 {
			t.Errorf("volume %+v, want the Secret azlb-client-certificate, mode 0400", v)
		}
		found := false
		for _, m := range pod.Containers[0].VolumeMounts {
			if m.Name == "client-certificate" {
				found = m.MountPath == "/etc/azlb-client-certificate" && m.ReadOnly
			}
		}
		if !found {
			t.Errorf("mounts %+v, want client-certificate read-only at /etc/azlb-client-certificate", pod.Containers[0].VolumeMounts)
		}
	})
	t.Run("digest, pull secrets, extra args, no PDB", func(t *testing.T) {
		objs := render(t, "--set", "image.digest=sha256:0123,imagePullSecrets={regcred},extraArgs={--concurrent-service-syncs=20},podDisruptionBudget.enabled=false,replicas=3")
		d := only[*appsv1.Deployment](t, objs)
		c := d.Spec.Template.Spec.Containers[0]
		if c.Image != "registry.example.test/azlb/azlb-controller-manager@sha256:0123" || *d.Spec.Replicas != 3 {
			t.Errorf("image %q replicas %d", c.Image, *d.Spec.Replicas)
		}
		if c.Args[len(c.Args)-1] != "--concurrent-service-syncs=20" || d.Spec.Template.Spec.ImagePullSecrets[0].Name != "regcred" {
			t.Errorf("args %q pull secrets %v", c.Args, d.Spec.Template.Spec.ImagePullSecrets)
		}
		if n := len(all[*policyv1.PodDisruptionBudget](objs)); n != 0 {
			t.Errorf("%d PDBs with podDisruptionBudget.enabled=false", n)
		}
	})
	t.Run("AKS: load-balancer class, any node, pod network", func(t *testing.T) {
		d := only[*appsv1.Deployment](t, render(t, "--set", "loadBalancerClass=azlb.example/test,hostNetwork=false,nodeSelector=null"))
		pod := d.Spec.Template.Spec
		if args := pod.Containers[0].Args; !slices.Contains(args, "--load-balancer-class=azlb.example/test") {
			t.Errorf("args %q lack --load-balancer-class=azlb.example/test", args)
		}
		if len(pod.NodeSelector) != 0 || pod.HostNetwork {
			t.Errorf("nodeSelector %v, hostNetwork %v; want none and off (docs/install.md, AKS)", pod.NodeSelector, pod.HostNetwork)
		}
	})
	t.Run("ServiceMonitor", func(t *testing.T) {
		objs := render(t, "--set", "serviceMonitor.enabled=true")
		var sm *unstructured.Unstructured
		for _, u := range all[*unstructured.Unstructured](objs) {
			if u.GetKind() == "ServiceMonitor" {
				sm = u
			}
		}
		if sm == nil {
			t.Fatal("no ServiceMonitor")
		}
		eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		if len(eps) != 1 {
			t.Fatalf("endpoints %v", eps)
		}
		ep := eps[0].(map[string]any)
		secret, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "name")
		if ep["scheme"] != "https" || ep["path"] != "/metrics" || secret != "azlb-metrics-reader" {
			t.Errorf("endpoint %v, want https /metrics with the metrics reader's token", ep)
		}
		var reader *rbacv1.ClusterRole
		for _, r := range all[*rbacv1.ClusterRole](objs) {
			if r.Name == "azlb-metrics-reader" {
				reader = r
			}
		}
		if reader == nil || len(reader.Rules) != 1 || !slices.Equal(reader.Rules[0].NonResourceURLs, []string{"/metrics"}) || !slices.Equal(reader.Rules[0].Verbs, []string{"get"}) {
			t.Errorf("metrics reader role %+v, want only get /metrics", reader)
		}
		svc := only[*corev1.Service](t, objs)
		if svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Spec.Ports[0].Port != 10268 {
			t.Errorf("metrics Service %+v, want headless on 10268", svc.Spec)
		}
	})
}

// TestRBACManifestIsTheChartsRendering keeps deploy/rbac.yaml, for
// kubectl apply and the sandbox, identical to what the chart renders
// (`make manifests` writes it).
func TestRBACManifestIsTheChartsRendering(t *testing.T) {
	got, err := os.ReadFile(filepath.Join(root, "deploy", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(root, "hack", "render-rbac.sh")).Output()
	if err != nil {
		t.Fatalf("hack/render-rbac.sh: %v", err)
	}
	if !bytes.Equal(got, out) {
		t.Fatal("deploy/rbac.yaml is not the chart's rendering: run make manifests")
	}
	objs, err := devenv.DecodeManifest("deploy/rbac.yaml", got)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(devenv.Identities(objs)); n != len(objs) || n == 0 {
		t.Errorf("deploy/rbac.yaml holds %d objects, %d of them identities; want identities only", len(objs), n)
	}
}
