package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/azlb/azlb/internal/devenv"
)

// Options configure Up.
type Options struct {
	// Dir holds everything of the cluster: state.json, configurations,
	// logs (logs/), the nodes' containerd and kubelet directories, the
	// network namespace files. It must not be inside another cluster's.
	Dir string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler, kubelet, kube-proxy, coredns (hack/build-tools.sh
	// cluster) and images/ (hack/test-images.sh).
	BinDir string
	// Nodes is the number of worker nodes (default 3).
	Nodes int
	// ProxyMode is kube-proxy's mode: iptables (default) or nftables.
	ProxyMode string
	// Detached: the processes outlive the caller (the sandbox); Down(Dir)
	// stops them.
	Detached bool
	// Progress, when set, receives one line per step with its time.
	Progress io.Writer
}

// Cluster is a running cluster.
type Cluster struct {
	Plan Plan
	Dir  string
	Kube *devenv.Kube
	// Client is the admin's client.
	Client kubernetes.Interface
	// LBNetNS is the load balancer's network namespace file, for the
	// emulator's data plane.
	LBNetNS string
	// Timings are how long each phase of Up took.
	Timings []Timing

	spawn *spawner // nil when detached

	mu    sync.Mutex
	state state
}

// Timing is one phase of Up.
type Timing struct {
	Phase string
	Took  time.Duration
}

// state is what Down needs, kept in <dir>/state.json from the first step
// of Up on.
type state struct {
	Slot     int    `json:"slot"`
	Dir      string `json:"dir"`
	Nodes    int    `json:"nodes"`
	Detached bool   `json:"detached"`
	Procs    []Proc `json:"procs"`
}

// The users of the cluster's components (static tokens of the API server).
const (
	userControllerManager = "system:kube-controller-manager"
	userScheduler         = "system:kube-scheduler"
	userProxy             = "system:kube-proxy"
	userCoreDNS           = "azlb:coredns"
)

// Host paths a node's components would create in the host's mount
// namespace if they ran there (Snapshot watches them).
var hostRuntimeDirs = []string{"/run/containerd", "/var/lib/cni", "/var/lib/containerd", "/run/runc", "/run/xtables.lock"}

// Up brings the cluster up and returns once every node is registered and
// Ready (nodes keep the uninitialized taint until azlb initializes them).
// On failure it tears down what it started.
func Up(ctx context.Context, o Options) (c *Cluster, err error) {
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.ProxyMode == "" {
		o.ProxyMode = "iptables"
	}
	if o.ProxyMode != "iptables" && o.ProxyMode != "nftables" {
		return nil, fmt.Errorf("kube-proxy mode %q: want iptables or nftables", o.ProxyMode)
	}
	if err := checkPrerequisites(o.BinDir); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	for _, private := range []string{"/run", "/var/lib", "/var/log"} {
		if dir == private || strings.HasPrefix(dir, private+"/") {
			return nil, fmt.Errorf("cluster directory %s: not under %s (the nodes' components see an empty %s of their own)", dir, private, private)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	slot, err := claimSlot(ctx, dir, o.Detached)
	if err != nil {
		return nil, err
	}
	p, err := NewPlan(slot, o.Nodes)
	if err == nil {
		err = checkSocketPaths(dir, p)
	}
	if err != nil {
		releaseSlot(slot)
		return nil, err
	}
	c = &Cluster{Plan: p, Dir: dir, LBNetNS: netnsPath(dir, p.lb),
		state: state{Slot: slot, Dir: dir, Nodes: o.Nodes, Detached: o.Detached}}
	if !o.Detached {
		c.spawn = newSpawner()
	}
	if err := c.save(); err != nil {
		releaseSlot(slot)
		c.spawn.stop()
		return nil, err
	}
	defer func() {
		if err != nil {
			if derr := c.Down(context.WithoutCancel(ctx)); derr != nil {
				err = errors.Join(err, fmt.Errorf("tear down after the failure: %w", derr))
			}
			c = nil
		}
	}()
	phase := c.phase(o.Progress)
	if err := checkFree(ctx, p); err != nil {
		return c, err
	}
	if err := setupNetwork(ctx, dir, p); err != nil {
		return c, fmt.Errorf("network: %w", err)
	}
	phase("network")
	if err := c.startControlPlane(ctx, o); err != nil {
		return c, fmt.Errorf("control plane: %w", err)
	}
	phase("control plane ready")
	errs := make([]error, len(p.Nodes))
	var wg sync.WaitGroup
	for i, n := range p.Nodes {
		wg.Go(func() { errs[i] = c.startNode(ctx, o, n) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	phase("nodes started (containerd, images, kubelet, kube-proxy)")
	if err := c.waitNodesReady(ctx, 3*time.Minute); err != nil {
		return c, err
	}
	phase("nodes Ready")
	return c, nil
}

// phase returns a function that records the time since the last call
// under a name.
func (c *Cluster) phase(progress io.Writer) func(string) {
	last := time.Now()
	return func(name string) {
		now := time.Now()
		c.Timings = append(c.Timings, Timing{Phase: name, Took: now.Sub(last)})
		if progress != nil {
			fmt.Fprintf(progress, "localcluster: %s (%.1fs)\n", name, now.Sub(last).Seconds())
		}
		last = now
	}
}

// checkPrerequisites names every binary, command or package missing.
func checkPrerequisites(binDir string) error {
	if os.Geteuid() != 0 {
		return errors.New("a local cluster needs root (network namespaces, mounts, cgroups)")
	}
	var missing []string
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "coredns"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			missing = append(missing, filepath.Join(binDir, b)+" (hack/build-tools.sh cluster)")
		}
	}
	for _, img := range nodeImages {
		if _, err := os.Stat(filepath.Join(binDir, "images", img)); err != nil {
			missing = append(missing, filepath.Join(binDir, "images", img)+" (hack/build-tools.sh test-images)")
		}
	}
	for _, c := range []string{"containerd", "ctr", "runc", "ip", "nsenter", "unshare", "mount", "sysctl", "iptables", "nft", "conntrack"} {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c+" (hack/node-packages.sh)")
		}
	}
	if _, err := os.Stat(filepath.Join(cniBinDir, "bridge")); err != nil {
		missing = append(missing, filepath.Join(cniBinDir, "bridge")+" (hack/node-packages.sh: containernetworking-plugins)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing: %s", strings.Join(missing, ", "))
	}
	return nil
}

// cniBinDir is where Debian's containernetworking-plugins puts them.
const cniBinDir = "/usr/lib/cni"

// save writes state.json.
func (c *Cluster) save() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return writeState(c.Dir, c.state)
}

func writeState(dir string, s state) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "state.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "state.json"))
}

func readState(dir string) (state, error) {
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return state{}, err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return state{}, fmt.Errorf("%s/state.json: %w", dir, err)
	}
	return s, nil
}

// start starts a process of the cluster and records it in state.json.
func (c *Cluster) start(name, bin string, args ...string) (<-chan struct{}, error) {
	p, done, err := startProc(c.spawn, name, filepath.Join(c.Dir, "logs", name+".log"), bin, args...)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.state.Procs = append(c.state.Procs, p)
	c.mu.Unlock()
	return done, c.save()
}

// startControlPlane starts etcd and kube-apiserver on the host's address
// on the nodes' network, then kube-controller-manager, kube-scheduler and
// CoreDNS.
func (c *Cluster) startControlPlane(ctx context.Context, o Options) error {
	p := c.Plan
	users := []devenv.User{{Name: userControllerManager}, {Name: userScheduler}, {Name: userProxy}, {Name: userCoreDNS}}
	for _, n := range p.Nodes {
		users = append(users, devenv.User{Name: "system:node:" + n.Name, Groups: []string{"system:nodes"}})
	}
	logs, err := os.OpenFile(filepath.Join(c.Dir, "logs", "kube-apiserver+etcd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logs.Close()
	kube, err := devenv.StartKube(ctx, filepath.Join(c.Dir, "kube"), devenv.KubeOptions{BinDir: o.BinDir, Logs: logs,
		Detach: true, Address: p.HostIP.String(), Cluster: true, Users: users})
	if err != nil {
		return err
	}
	c.Kube = kube
	rc, err := kube.RestConfig()
	if err != nil {
		return err
	}
	if c.Client, err = kubernetes.NewForConfig(rc); err != nil {
		return err
	}
	if err := grantCoreDNS(ctx, c.Client); err != nil {
		return err
	}
	kd := kube.Dir
	if _, err := c.start("kube-controller-manager", filepath.Join(o.BinDir, "kube-controller-manager"),
		"--kubeconfig", kube.Kubeconfig(userControllerManager),
		"--authentication-kubeconfig", kube.Kubeconfig(userControllerManager),
		"--authorization-kubeconfig", kube.Kubeconfig(userControllerManager),
		"--secure-port", "0", "--leader-elect=false",
		"--use-service-account-credentials",
		"--service-account-private-key-file", filepath.Join(kd, "sa.key"),
		"--root-ca-file", kube.CAFile(),
		"--cluster-name", "azlb",
		"--allocate-node-cidrs=false", "--configure-cloud-routes=false",
		"--controllers", "*,-csrsigning,-csrapproving,-csrcleaner",
		"--v", "1",
	); err != nil {
		return err
	}
	if _, err := c.start("kube-scheduler", filepath.Join(o.BinDir, "kube-scheduler"),
		"--kubeconfig", kube.Kubeconfig(userScheduler),
		"--authentication-kubeconfig", kube.Kubeconfig(userScheduler),
		"--authorization-kubeconfig", kube.Kubeconfig(userScheduler),
		"--secure-port", "0", "--leader-elect=false", "--v", "1",
	); err != nil {
		return err
	}
	corefile := filepath.Join(c.Dir, "Corefile")
	if err := os.WriteFile(corefile, []byte(fmt.Sprintf(`.:53 {
    bind %s
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 30
}
`, p.ClusterDNS, kube.Kubeconfig(userCoreDNS))), 0o600); err != nil {
		return err
	}
	_, err = c.start("coredns", filepath.Join(o.BinDir, "coredns"), "-conf", corefile)
	return err
}

// grantCoreDNS gives CoreDNS's user what its kubernetes plugin reads.
func grantCoreDNS(ctx context.Context, cs kubernetes.Interface) error {
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: userCoreDNS}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"services", "namespaces"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
	}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: userCoreDNS},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: userCoreDNS},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: userCoreDNS}},
	}, metav1.CreateOptions{})
	return err
}

// startNode starts one node: containerd, its images, the kubelet and
// kube-proxy, each in the node's network namespace.
func (c *Cluster) startNode(ctx context.Context, o Options, n NodePlan) error {
	p, d := c.Plan, dirsOf(c.Dir, n)
	ns := netnsPath(c.Dir, n.NetNS)
	for _, dd := range []string{d.containerdRoot, d.containerdSt, d.cniConf, d.cniData, d.kubelet, d.podLogs, d.runc} {
		if err := os.MkdirAll(dd, 0o755); err != nil {
			return err
		}
	}
	cni, err := cniConfig(d, n)
	if err != nil {
		return err
	}
	files := map[string]string{
		d.config: containerdConfig(d, cniBinDir),
		filepath.Join(d.cniConf, "10-azlb.conflist"): string(cni),
		d.kubeletConfig: kubeletConfig(p, n, d, c.Kube.CAFile()),
		d.proxyConfig:   kubeProxyConfig(p, n, c.Kube.Kubeconfig(userProxy), o.ProxyMode),
	}
	for f, s := range files {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			return err
		}
	}
	// The kubelet's directory is a shared mount: what the kubelet mounts
	// there from its own mount namespace (volumes) shows in the host's,
	// and from there in containerd's, which gives it to containers.
	if err := run(ctx, "mount", "--bind", d.kubelet, d.kubelet); err != nil {
		return err
	}
	if err := run(ctx, "mount", "--make-rshared", d.kubelet); err != nil {
		return err
	}
	// containerd runs in a mount namespace of its own (a slave: it sees
	// the kubelet's volumes, nothing it mounts reaches the host) with
	// empty /run and /var/lib: its shims' sockets and the CNI cache, which
	// containerd 1.6 puts there whatever its configuration says, go with
	// it. Its containers' mounts and the pods' network namespace files
	// live in that namespace only.
	done, err := c.start(n.Name+"-containerd", "nsenter", "--net="+ns, "--",
		"unshare", "--mount", "--propagation", "slave", "--",
		"/bin/sh", "-c", `mount -t tmpfs -o mode=0755 azlb-run /run && mount -t tmpfs -o mode=0755 azlb-var-lib /var/lib && exec "$0" "$@"`,
		"containerd", "--config", d.config)
	if err != nil {
		return err
	}
	if err := waitSocket(ctx, d.socket, done, time.Minute); err != nil {
		return fmt.Errorf("%s containerd: %w (logs/%s-containerd.log)", n.Name, err, n.Name)
	}
	for _, img := range nodeImages {
		if err := run(ctx, "ctr", "--address", d.socket, "--namespace", "k8s.io", "images", "import",
			"--platform", "linux/amd64", "--no-unpack", filepath.Join(o.BinDir, "images", img)); err != nil {
			return fmt.Errorf("%s: import %s: %w", n.Name, img, err)
		}
	}
	if err := makeCgroup(cgroupRoot(p, n)); err != nil {
		return err
	}
	wrapper, err := kubeletWrapper(d)
	if err != nil {
		return err
	}
	if _, err := c.start(n.Name+"-kubelet", "nsenter", "--net="+ns, "--",
		"unshare", "--mount", "--propagation", "unchanged", "--",
		"/bin/sh", "-c", wrapper, filepath.Join(o.BinDir, "kubelet"),
		"--config", d.kubeletConfig,
		"--kubeconfig", c.Kube.Kubeconfig("system:node:"+n.Name),
		"--root-dir", d.kubelet, "--cert-dir", filepath.Join(d.kubelet, "pki"),
		"--hostname-override", n.Name,
		"--node-ip", n.IP.String(),
		"--cloud-provider", "external",
		"--v", "1",
	); err != nil {
		return err
	}
	_, err = c.start(n.Name+"-kube-proxy", "nsenter", "--net="+ns, "--",
		filepath.Join(o.BinDir, "kube-proxy"), "--config", d.proxyConfig, "--v", "1")
	return err
}

// waitNodesReady waits for every node to be registered and Ready.
func (c *Cluster) waitNodesReady(ctx context.Context, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var notReady []string
		for _, n := range c.Plan.Nodes {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				notReady = append(notReady, n.Name+" not registered")
				continue
			}
			ready := false
			for _, cond := range node.Status.Conditions {
				if cond.Type == v1.NodeReady {
					ready = cond.Status == v1.ConditionTrue
					if !ready {
						notReady = append(notReady, n.Name+": "+cond.Message)
					}
				}
			}
			if !ready && len(node.Status.Conditions) == 0 {
				notReady = append(notReady, n.Name+" has no conditions yet")
			}
		}
		last = strings.Join(notReady, "; ")
		return len(notReady) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("nodes not Ready after %v: %s (logs in %s/logs)", timeout, last, c.Dir)
	}
	return nil
}

// Procs are the cluster's processes (name, pid), for figures.
func (c *Cluster) Procs() []Proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Proc(nil), c.state.Procs...)
}

// Down tears down the cluster (Down of its directory).
func (c *Cluster) Down(ctx context.Context) error {
	err := Down(ctx, c.Dir)
	c.spawn.stop()
	c.spawn = nil
	return err
}

// maxSocketPath is the longest path a unix socket can have (sun_path
// holds 108 bytes with the terminating NUL).
const maxSocketPath = 107

// checkSocketPaths refuses a cluster directory so deep that the nodes'
// unix sockets under it (containerd's, kubelet's device plugin and pod
// resources sockets) would not fit a socket address: containerd and
// kubelet would exit at start with an error far from the cause.
func checkSocketPaths(dir string, p Plan) error {
	for _, n := range p.Nodes {
		d := dirsOf(dir, n)
		for _, s := range []string{d.socket + ".ttrpc", filepath.Join(d.kubelet, "device-plugins", "kubelet.sock"), filepath.Join(d.kubelet, "pod-resources", "kubelet.sock")} {
			if len(s) > maxSocketPath {
				return fmt.Errorf("cluster directory %s is too deep: the socket %s would be %d bytes, more than a unix socket's %d; use a directory at least %d bytes shorter",
					dir, s, len(s), maxSocketPath, len(s)-maxSocketPath)
			}
		}
	}
	return nil
}

// slotsDir holds one directory per claimed slot (a variable for the
// tests of the claim).
var slotsDir = "/run/azlb-localcluster"

func slotDir(slot int) string { return filepath.Join(slotsDir, "slot-"+strconv.Itoa(slot)) }

// owner is who claimed a slot.
type owner struct {
	Dir      string `json:"dir"`
	PID      int    `json:"pid"`
	Start    uint64 `json:"start"`
	Detached bool   `json:"detached"`
}

// claimSlot takes the first free slot. A slot whose owner is gone (its
// process died, or a detached cluster whose processes all exited) is torn
// down and taken.
func claimSlot(ctx context.Context, dir string, detached bool) (int, error) {
	me := owner{Dir: dir, PID: os.Getpid(), Detached: detached}
	me.Start, _ = startTime(me.PID)
	b, err := json.Marshal(me)
	if err != nil {
		return 0, err
	}
	for s := range MaxSlots {
		if err := mkSlot(s); err != nil {
			if !os.IsExist(err) {
				return 0, err
			}
			if !stale(s) {
				continue
			}
			prev, _ := readOwner(s)
			if prev.Dir != "" {
				if err := Down(ctx, prev.Dir); err != nil {
					return 0, fmt.Errorf("slot %d: tearing down the cluster its owner left in %s: %w", s, prev.Dir, err)
				}
			}
			releaseSlot(s)
			if err := mkSlot(s); err != nil {
				if os.IsExist(err) {
					continue // taken meanwhile
				}
				return 0, err
			}
		}
		if err := os.WriteFile(filepath.Join(slotDir(s), "owner.json"), b, 0o600); err != nil {
			releaseSlot(s)
			return 0, err
		}
		return s, nil
	}
	return 0, fmt.Errorf("all %d slots of %s are taken by running clusters", MaxSlots, slotsDir)
}

// mkSlot creates slot's directory (an error satisfying os.IsExist if it
// is claimed). The slots directory is created as needed: a tear-down
// (Down of a stale owner's cluster, here or in another process) removes
// it once it is empty, so it may vanish between two claims.
func mkSlot(slot int) error {
	var err error
	for range 3 {
		if err = os.MkdirAll(slotsDir, 0o755); err != nil {
			return err
		}
		if err = os.Mkdir(slotDir(slot), 0o755); !os.IsNotExist(err) {
			return err
		}
	}
	return err
}

func readOwner(slot int) (owner, error) {
	var o owner
	b, err := os.ReadFile(filepath.Join(slotDir(slot), "owner.json"))
	if err != nil {
		return o, err
	}
	return o, json.Unmarshal(b, &o)
}

// stale reports whether a claimed slot's owner is gone.
func stale(slot int) bool {
	o, err := readOwner(slot)
	if err != nil {
		// Being written right now, or left half-written: a claim younger
		// than a minute is someone's.
		fi, serr := os.Stat(slotDir(slot))
		return serr == nil && time.Since(fi.ModTime()) > time.Minute
	}
	if !o.Detached {
		return !(Proc{PID: o.PID, Start: o.Start}).alive()
	}
	s, err := readState(o.Dir)
	if err != nil {
		return true
	}
	for _, p := range s.Procs {
		if p.alive() {
			return false
		}
	}
	return true
}

func releaseSlot(slot int) {
	_ = os.RemoveAll(slotDir(slot))
}
