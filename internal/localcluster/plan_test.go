package localcluster

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlansOfSlotsNeverOverlap: every range of every slot is distinct
// from every other slot's, nodes and the host and load balancer are in
// the nodes' network, pods in theirs, and nothing is in loopback or the
// documentation network this kind of machine sits on (192.0.2.0/24).
func TestPlansOfSlotsNeverOverlap(t *testing.T) {
	var all []netip.Prefix
	for s := range MaxSlots {
		p, err := NewPlan(s, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Ranges() {
			for _, q := range all {
				if r.Overlaps(q) {
					t.Errorf("slot %d range %s overlaps %s", s, r, q)
				}
			}
			for _, bad := range []string{"127.0.0.0/8", "192.0.2.0/24", "10.96.0.0/16"} {
				if r.Overlaps(netip.MustParsePrefix(bad)) {
					t.Errorf("slot %d range %s overlaps %s", s, r, bad)
				}
			}
			all = append(all, r)
		}
		for _, a := range []netip.Addr{p.HostIP, p.LBNodeIP} {
			if !p.NodeNet.Contains(a) {
				t.Errorf("slot %d: %s not in %s", s, a, p.NodeNet)
			}
		}
		if !p.ClientNet.Contains(p.ClientIP) || !p.ClientNet.Contains(p.LBClientIP) || p.NodeNet.Contains(p.ClientIP) {
			t.Errorf("slot %d: client %s / %s vs %s", s, p.ClientIP, p.LBClientIP, p.ClientNet)
		}
		names := map[string]bool{}
		for i, n := range p.Nodes {
			if !p.NodeNet.Contains(n.IP) || n.IP == p.HostIP || n.IP == p.LBNodeIP || !p.PodNet.Contains(n.PodCIDR.Addr()) || names[n.Name] {
				t.Errorf("slot %d node %d: %+v", s, i, n)
			}
			names[n.Name] = true
		}
		if len(p.HostLink) > 15 || len(p.ClientLink) > 15 {
			t.Errorf("link names %q, %q longer than IFNAMSIZ-1", p.HostLink, p.ClientLink)
		}
	}
	for _, bad := range [][2]int{{-1, 3}, {MaxSlots, 3}, {0, 0}, {0, 201}} {
		if _, err := NewPlan(bad[0], bad[1]); err == nil {
			t.Errorf("NewPlan(%d, %d) accepted", bad[0], bad[1])
		}
	}
}

// TestDiffKeepsWhatIsTheCluster's: a change naming the cluster's links,
// ranges or directory is reported, another process's is not; firewall
// and kernel settings always are.
func TestDiffKeepsWhatIsTheClusters(t *testing.T) {
	before := Snapshot{"routes4": {"default via 192.0.2.1 dev eth0"}, "sysctls": {"net/ipv4/ip_forward=0"}}
	after := Snapshot{
		"routes4": {"default via 192.0.2.1 dev eth0", "10.244.1.0/24 via 10.224.0.4 dev azlb0h", "10.9.0.0/16 dev vethX"},
		"links":   {"7 azlb0c@if3", "9 otherveth"},
		"mounts":  {"/tmp/c/netns/lb nsfs", "/tmp/other proc"},
		"sysctls": {"net/ipv4/ip_forward=1"},
		"cgroups": {"/sys/fs/cgroup/memory/azlb0-aks-nodepool1-0", "/sys/fs/cgroup/memory/docker"},
	}
	got := Diff(before, after, Relevant(0, "/tmp/c"))
	want := []string{
		"+ cgroups: /sys/fs/cgroup/memory/azlb0-aks-nodepool1-0",
		"+ links: 7 azlb0c@if3",
		"+ mounts: /tmp/c/netns/lb nsfs",
		"+ routes4: 10.244.1.0/24 via 10.224.0.4 dev azlb0h",
		"+ sysctls: net/ipv4/ip_forward=1",
		"- sysctls: net/ipv4/ip_forward=0",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Diff:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", "/plain": "/plain", `/x\134y`: `/x\y`, `/bad\9`: `/bad\9`} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestKubeletSeesTheSettingsItWants: the wrapper binds a file of the
// wanted value over exactly the settings the host holds otherwise, and
// writes none.
func TestKubeletSeesTheSettingsItWants(t *testing.T) {
	d := nodeDirs{sysctls: filepath.Join(t.TempDir(), "sysctl")}
	script, err := kubeletWrapper(d)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range kubeletSysctls {
		cur, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(d.sysctls, strings.ReplaceAll(k, "/", "."))
		bound := strings.Contains(script, "/proc/sys/"+k+"\n")
		if differs := strings.TrimSpace(string(cur)) != want; differs != bound {
			t.Errorf("%s: host %q, want %q, bound %v", k, strings.TrimSpace(string(cur)), want, bound)
		} else if bound {
			if b, err := os.ReadFile(f); err != nil || strings.TrimSpace(string(b)) != want {
				t.Errorf("%s: bound file %q, %v", k, b, err)
			}
		}
	}
	if strings.Contains(script, "sysctl") && !strings.Contains(script, d.sysctls) || strings.Contains(script, "echo") {
		t.Errorf("the wrapper writes a setting:\n%s", script)
	}
	if !strings.HasSuffix(script, "exec \"$0\" \"$@\"\n") {
		t.Errorf("the wrapper does not exec the kubelet:\n%s", script)
	}
}

// TestNodeConfigsStayInTheNodesDirectory: containerd's and the CNI's
// state live under the node's directory, never in the host's defaults.
func TestNodeConfigsStayInTheNodesDirectory(t *testing.T) {
	p, _ := NewPlan(1, 3)
	d := dirsOf("/x/c", p.Nodes[2])
	cfg := containerdConfig(d, cniBinDir)
	for _, want := range []string{`root = "/x/c/nodes/aks-nodepool1-2/containerd/root"`,
		`Root = "/x/c/nodes/aks-nodepool1-2/runc"`, "restrict_oom_score_adj = true", `sandbox_image = "registry.k8s.io/pause:3.10.2"`} {
		if !strings.Contains(cfg, want) {
			t.Errorf("containerd config lacks %s", want)
		}
	}
	if strings.Contains(cfg, "/var/lib/containerd") || strings.Contains(cfg, "/run/containerd\"") {
		t.Errorf("containerd config uses the host's defaults:\n%s", cfg)
	}
	b, err := cniConfig(d, p.Nodes[2])
	if err != nil {
		t.Fatal(err)
	}
	var conf map[string]any
	if err := json.Unmarshal(b, &conf); err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, `"dataDir": "/x/c/nodes/aks-nodepool1-2/cni/data"`) || !strings.Contains(s, `"subnet": "10.245.3.0/24"`) ||
		!strings.Contains(s, `"ipMasq": false`) {
		t.Errorf("CNI config:\n%s", s)
	}
	if kc := kubeletConfig(p, p.Nodes[2], d, "/ca"); !strings.Contains(kc, `cgroupRoot: "/azlb1-aks-nodepool1-2"`) ||
		!strings.Contains(kc, "protectKernelDefaults: true") || !strings.Contains(kc, `address: "10.225.0.6"`) {
		t.Errorf("kubelet config:\n%s", kc)
	}
}

// TestClaimSlotAfterTheSlotsDirectoryWent: a tear-down removes the slots
// directory once it is empty (Down of a stale owner's cluster, which
// claimSlot itself runs); a claim afterwards creates it again instead of
// failing with "no such file or directory" (make sandbox SANDBOX=nodes did).
func TestClaimSlotAfterTheSlotsDirectoryWent(t *testing.T) {
	old := slotsDir
	t.Cleanup(func() { slotsDir = old })
	slotsDir = filepath.Join(t.TempDir(), "slots")
	s, err := claimSlot(t.Context(), t.TempDir(), false)
	if err != nil || s != 0 {
		t.Fatalf("first claim: slot %d, %v", s, err)
	}
	releaseSlot(s)
	removeIfEmptyTree(slotsDir)
	if _, err := os.Stat(slotsDir); !os.IsNotExist(err) {
		t.Fatalf("the empty slots directory is still there: %v", err)
	}
	if err := mkSlot(1); err != nil {
		t.Fatalf("mkSlot after the slots directory went: %v", err)
	}
	if err := mkSlot(1); !os.IsExist(err) {
		t.Fatalf("a claimed slot again: %v, want an error satisfying os.IsExist", err)
	}
	s, err = claimSlot(t.Context(), t.TempDir(), false)
	if err != nil || s != 0 {
		t.Fatalf("claim with slot 1 taken: slot %d, %v", s, err)
	}
}

// TestDeepClusterDirectoryIsRefused: a cluster directory whose nodes'
// sockets would not fit a unix socket address is refused with the path
// and by how much, before anything starts (containerd exited "before
// serving" otherwise, under the README test's temporary directory).
func TestDeepClusterDirectoryIsRefused(t *testing.T) {
	p, err := NewPlan(0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkSocketPaths("/work/azlb/.sandbox/cluster", p); err != nil {
		t.Errorf("a usual directory: %v", err)
	}
	deep := "/tmp/" + strings.Repeat("d", 60) + "/azlb/.sandbox/cluster"
	err = checkSocketPaths(deep, p)
	if err == nil || !strings.Contains(err.Error(), deep) || !strings.Contains(err.Error(), ".sock") {
		t.Errorf("a deep directory: %v, want the refusal naming it and the socket", err)
	}
}
