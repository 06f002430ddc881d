package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The images every node's containerd imports (hack/test-images.sh builds
// them under BinDir/images), by archive.
var nodeImages = []string{"pause.tar", "agnhost.tar", "busybox.tar"}

// PauseImage is the pods' sandbox image.
const PauseImage = "registry.k8s.io/pause:3.10.2"

// nodeDirs are one node's paths under <dir>/nodes/<name>.
type nodeDirs struct {
	root                         string
	containerdRoot, containerdSt string
	socket, config               string
	cniConf, cniData             string
	kubelet, kubeletConfig       string
	podLogs, runc                string
	proxyConfig, sysctls         string
}

func dirsOf(dir string, n NodePlan) nodeDirs {
	r := filepath.Join(dir, "nodes", n.Name)
	return nodeDirs{
		root:           r,
		containerdRoot: filepath.Join(r, "containerd", "root"),
		containerdSt:   filepath.Join(r, "containerd", "state"),
		socket:         filepath.Join(r, "containerd.sock"),
		config:         filepath.Join(r, "containerd.toml"),
		cniConf:        filepath.Join(r, "cni", "net.d"),
		cniData:        filepath.Join(r, "cni", "data"),
		kubelet:        filepath.Join(r, "kubelet"),
		kubeletConfig:  filepath.Join(r, "kubelet.yaml"),
		podLogs:        filepath.Join(r, "pod-logs"),
		runc:           filepath.Join(r, "runc"),
		proxyConfig:    filepath.Join(r, "kube-proxy.yaml"),
		sysctls:        filepath.Join(r, "sysctl"),
	}
}

// cgroupRoot is the node's cgroup (in every hierarchy): its pods live
// under it, and Down removes it.
func cgroupRoot(p Plan, n NodePlan) string {
	return fmt.Sprintf("/azlb%d-%s", p.Slot, n.Name)
}

// containerdConfig is containerd 1.6's configuration (version 2) for one
// node: everything under the node's directory (but the shims' sockets, the
// pods' network namespace files and the CNI cache, which go to /run and
// /var/lib: a tmpfs of containerd's own mount namespace), the CNI plugins
// of containernetworking-plugins.
// restrict_oom_score_adj: runc cannot lower oom_score_adj below its own
// where CAP_SYS_RESOURCE is not in the bounding set (a VM or container),
// and every sandbox would fail.
func containerdConfig(d nodeDirs, cniBin string) string {
	q := strconv.Quote
	return `version = 2
root = ` + q(d.containerdRoot) + `
state = ` + q(d.containerdSt) + `
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.internal.v1.tracing"]

[grpc]
  address = ` + q(d.socket) + `

[ttrpc]
  address = ` + q(d.socket+".ttrpc") + `

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = ` + q(filepath.Join(d.root, "opt")) + `

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = ` + q(PauseImage) + `
  restrict_oom_score_adj = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = ` + q(d.runc) + `
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = ` + q(cniBin) + `
    conf_dir = ` + q(d.cniConf) + `
`
}

// cniConfig is the node's pod network: a bridge with the node as the
// pods' gateway, addresses from the node's pod range, no masquerade (pods
// are seen with their own addresses everywhere in the cluster).
func cniConfig(d nodeDirs, n NodePlan) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0",
		"name":       "azlb",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  []any{[]any{map[string]any{"subnet": n.PodCIDR.String()}}},
					"routes":  []any{map[string]any{"dst": "0.0.0.0/0"}},
					"dataDir": d.cniData,
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}},
		},
	}, "", "  ")
}

// kubeletConfig is the node's KubeletConfiguration. Its kernel settings
// are only read (protectKernelDefaults): they are host-wide, and the
// kubelet's mount namespace shows it the values it wants
// (kubeletSysctls). Image garbage collection is off: the imported images
// could not be pulled again.
func kubeletConfig(p Plan, n NodePlan, d nodeDirs, caFile string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %q
cgroupsPerQOS: true
enforceNodeAllocatable: ["pods"]
containerRuntimeEndpoint: %q
address: %q
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
clusterDNS: [%q]
clusterDomain: cluster.local
resolvConf: ""
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %q}
authorization:
  mode: Webhook
podLogsDir: %q
protectKernelDefaults: true
failSwapOn: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {"memory.available": "100Mi"}
serializeImagePulls: false
maxPods: 110
rotateCertificates: false
`, cgroupRoot(p, n), "unix://"+d.socket, n.IP.String(), p.ClusterDNS.String(), caFile, d.podLogs)
}

// kubeletSysctls are the kernel settings the kubelet checks (v1.37.1,
// container_manager_linux.go setupKernelTunables) and the values it wants.
var kubeletSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// kubeletWrapper is the shell that starts the kubelet in a mount
// namespace of its own (unshare --propagation unchanged: its root
// directory stays a shared mount, so the volumes it mounts there are seen
// by containerd in the host's namespace) where every kernel setting it
// checks and the host holds at another value reads as the value it wants:
// a file bound over the /proc/sys entry. Nothing is written to the host's
// kernel settings.
func kubeletWrapper(d nodeDirs) (string, error) {
	if err := os.MkdirAll(d.sysctls, 0o755); err != nil {
		return "", err
	}
	var b strings.Builder
	// Nothing mounted below may reach the host: the mounts it goes on are
	// made private first (on a machine whose mounts are shared, systemd's
	// default, they would propagate). /var/lib and /var/log are empty
	// tmpfs: the kubelet writes a few fixed paths there whatever its root
	// directory (device plugins' socket, /var/log/containers links).
	b.WriteString("set -e\nmount --make-rprivate /proc\n")
	for _, dir := range []string{"/var/lib", "/var/log"} {
		fmt.Fprintf(&b, "mount --make-private \"$(findmnt -n -o TARGET --target %s)\"\nmount -t tmpfs -o mode=0755 azlb-kubelet %s\n", dir, dir)
	}
	for k, want := range kubeletSysctls {
		cur, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			return "", fmt.Errorf("read kernel setting %s: %w", k, err)
		}
		if strings.TrimSpace(string(cur)) == want {
			continue
		}
		f := filepath.Join(d.sysctls, strings.ReplaceAll(k, "/", "."))
		if err := os.WriteFile(f, []byte(want+"\n"), 0o444); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "mount --bind -o ro %s /proc/sys/%s\n", shellQuote(f), k)
	}
	b.WriteString(`exec "$0" "$@"` + "\n")
	return b.String(), nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// kubeProxyConfig is the node's KubeProxyConfiguration. The conntrack
// settings it would write are host-wide (nf_conntrack_max) or left as the
// namespace has them: all zero.
func kubeProxyConfig(p Plan, n NodePlan, kubeconfig, mode string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %q
hostnameOverride: %q
mode: %q
clusterCIDR: %q
healthzBindAddress: "0.0.0.0:10256"
metricsBindAddress: "127.0.0.1:10249"
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
`, kubeconfig, n.Name, mode, p.PodNet.String())
}

// waitSocket waits for a unix socket to accept connections.
func waitSocket(ctx context.Context, path string, done <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("exited before serving %s", path)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not served after %v", path, timeout)
}
