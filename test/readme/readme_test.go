package readme

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/azlb/azlb/internal/sandbox"
	"github.com/azlb/azlb/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runEnv is the variable `make test-readme` sets: the walkthroughs start
// sandboxes, take minutes and need root (network namespaces).
const runEnv = "AZLB_README_RUN"

// nodesEnv also plays the walkthrough of `make sandbox SANDBOX=nodes` (a
// real cluster; make test-k8s-e2e sets it).
const nodesEnv = "AZLB_README_NODES"

// pages are the pages whose walkthroughs are played: README.md's, and
// docs/install.md's (make test-e2e-cluster against the sandbox).
var pages = []string{"README.md", "docs/install.md"}

func readmeBlocks(t *testing.T) []Block {
	t.Helper()
	var blocks []Block
	for _, page := range pages {
		f, err := os.Open(filepath.Join(testutil.RepoRoot(), page))
		if err != nil {
			t.Fatal(err)
		}
		b, err := Walkthroughs(page, f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			t.Fatalf("%s has no walkthrough (a ```sh block from make sandbox to make sandbox-down)", page)
		}
		blocks = append(blocks, b...)
	}
	return blocks
}

// Every sandbox variant has a walkthrough in README.md, every step of
// them a check, and every check a step: a README change without its check
// (or the reverse) fails here, before anything runs.
func TestEveryStepHasACheck(t *testing.T) {
	blocks := readmeBlocks(t)
	seen := map[string]bool{}
	variants := map[string]bool{}
	for _, b := range blocks {
		if b.File == "README.md" {
			variants[cmpVariant(b.Variant)] = true
		}
		for _, s := range b.Steps {
			seen[s.Key()] = true
			if _, ok := checks[s.Key()]; !ok {
				t.Errorf("%s:%d: no check for the step\n\t%s\n(add it to checks in test/readme/checks_test.go, keyed by that line)", b.File, s.Line, s.Key())
			}
		}
	}
	for _, v := range sandbox.Variants {
		if !variants[v] {
			t.Errorf("README.md has no walkthrough block for `make sandbox SANDBOX=%s` (a ```sh block from make sandbox to make sandbox-down)", v)
		}
	}
	for k := range checks {
		if !seen[k] {
			t.Errorf("check for a step README.md no longer has:\n\t%s", k)
		}
	}
}

func cmpVariant(v string) string {
	if v == "" {
		return sandbox.VariantMulti
	}
	return v
}

// The walkthroughs, as a user runs them: each block on a fresh copy of the
// repository, in a network namespace of its own, command by command.
func TestWalkthroughs(t *testing.T) {
	if os.Getenv(runEnv) == "" {
		t.Skipf("set %s=1 (make test-readme does) to run README.md's walkthroughs: they start sandboxes and need root", runEnv)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("%s is set but the walkthroughs need root (a network namespace per walkthrough; ports 53 and 80)", runEnv)
	}
	blocks := readmeBlocks(t)
	only := os.Getenv("AZLB_README_ONLY") // a part of a walkthrough's name (page:line-variant), to run one by hand
	for _, b := range blocks {
		name := fmt.Sprintf("%s:%d-%s", b.File, b.Line, cmpVariant(b.Variant))
		if only != "" && !strings.Contains(name, only) {
			continue
		}
		t.Run(name, func(t *testing.T) {
			if b.Variant == sandbox.VariantNodes && os.Getenv(nodesEnv) == "" {
				// A real cluster: its binaries take tens of minutes to
				// build on a fresh machine, more than make test's budget.
				t.Skipf("set %s=1 (make test-k8s-e2e does, once the cluster's binaries are built) to play the real-nodes walkthrough", nodesEnv)
			}
			playBlock(t, b)
		})
	}
}

// playBlock runs one walkthrough.
func playBlock(t *testing.T, b Block) {
	ctx := context.Background()
	root := testutil.RepoRoot()
	work := t.TempDir()
	// The copy's path is short: the real-nodes sandbox keeps unix sockets
	// under it, whose paths a socket address limits to 107 bytes.
	short, err := os.MkdirTemp("", "rd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(short) })
	repo := filepath.Join(short, "azlb")
	tools := []string{"kube-apiserver", "kubectl", "etcd"}
	if b.Variant == sandbox.VariantNodes {
		tools = append(tools, clusterTools...)
	}
	copyRepo(t, root, repo, tools)

	ns := fmt.Sprintf("azlb-readme-%d-%d-%d", os.Getpid(), len(b.File), b.Line)
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { removeNetns(t, ns) })
	run(t, "ip", "-n", ns, "link", "set", "lo", "up")

	out := filepath.Join(work, "steps")
	s, err := StartSession([]string{"nsenter", "--net=/run/netns/" + ns, "--", "bash", "--noprofile", "--norc"}, repo, sessionEnv(t), out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	p := &play{t: t, s: s, repo: repo, ns: ns, results: map[string]Result{}, marks: map[string]time.Time{}}
	down := false
	for _, step := range b.Steps {
		c := checks[step.Key()]
		if c.ok == nil {
			t.Fatalf("%s:%d: no check for %q (TestEveryStepHasACheck says more)", b.File, step.Line, step.Key())
		}
		isDown := strings.Join(strings.Fields(step.Command), " ") == "make sandbox-down"
		t.Logf("%s:%d: %s", b.File, step.Line, step.Command)
		if err := p.step(ctx, step, c); err != nil {
			t.Errorf("%s:%d: %s\n%v", b.File, step.Line, step.Key(), err)
			if !isDown {
				break
			}
		}
		down = down || isDown
	}
	if !down {
		// A step failed: stop what the walkthrough started, as its last
		// step would have.
		if r, err := s.Run(ctx, "make sandbox-down", 2*time.Minute); err != nil || r.Code != 0 {
			t.Errorf("make sandbox-down after the failure: %v\n%s", err, r)
		}
		p.dumpLogs()
	}
}

// play is one walkthrough being played.
type play struct {
	t       *testing.T
	s       *Session
	repo    string
	ns      string
	results map[string]Result    // by step key: the last result
	saved   map[string]string    // what a check keeps for a later one
	marks   map[string]time.Time // when steps ended, by a check's name
}

// outputOf is an earlier step's output file (ext ".out" or ".err") as it
// is now.
func (p *play) outputOf(key, ext string) (string, error) {
	r, ok := p.results[key]
	if !ok {
		return "", fmt.Errorf("the step %q has not run", key)
	}
	b, err := os.ReadFile(r.Base + ext)
	return string(b), err
}

// eventually runs a command of its own in the walkthrough's shell until it
// exits 0, for at most d.
func (p *play) eventually(d time.Duration, command string) error {
	var r Result
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, d, true, func(ctx context.Context) (bool, error) {
		var err error
		r, err = p.s.Run(ctx, command, d)
		return err == nil && r.Code == 0, err
	})
	if err != nil {
		return fmt.Errorf("%q did not succeed within %v: %w\n%s", command, d, err, r)
	}
	return nil
}

// readRepoFile reads a file of the walkthrough's copy of the repository.
func readRepoFile(p *play, path string) ([]byte, error) {
	return os.ReadFile(filepath.Join(p.repo, path))
}

// onlyShellLeft checks that no process but the walkthrough's shell runs in
// its network namespace.
func (p *play) onlyShellLeft() error {
	var left []string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		out, err := exec.Command("ip", "netns", "pids", p.ns).Output()
		if err != nil {
			return false, err
		}
		left = nil
		for _, f := range strings.Fields(string(out)) {
			if f == strconv.Itoa(p.s.Pid()) {
				continue
			}
			cmdline, _ := os.ReadFile("/proc/" + f + "/cmdline")
			left = append(left, f+" "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("processes left in the namespace: %v", left)
	}
	return nil
}

// step runs one step until its check passes (within c.eventually), then
// c.repeat times more, each of which must pass too.
func (p *play) step(ctx context.Context, step Step, c check) error {
	timeout := c.timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	var last error
	var r Result
	attempt := func() (bool, error) {
		var err error
		r, err = p.s.Run(ctx, step.Command, timeout)
		if err != nil {
			return false, fmt.Errorf("%w\n%s", err, r)
		}
		p.results[step.Key()] = r
		if last = c.ok(p, r); last != nil {
			last = fmt.Errorf("%w\n%s", last, r)
			return false, nil
		}
		return true, nil
	}
	if c.eventually == 0 {
		if ok, err := attempt(); err != nil || !ok {
			return firstErr(err, last)
		}
	} else {
		err := wait.PollUntilContextTimeout(ctx, time.Second, c.eventually, true, func(context.Context) (bool, error) { return attempt() })
		if err != nil {
			return fmt.Errorf("not as documented within %v: %w", c.eventually, firstErr(last, err))
		}
	}
	for i := range c.repeat {
		if ok, err := attempt(); err != nil || !ok {
			return fmt.Errorf("run %d of %d after it first held: %w", i+2, c.repeat+1, firstErr(err, last))
		}
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// value is a shell variable of the walkthrough.
func (p *play) value(name string) string {
	v, err := p.s.Value(context.Background(), name)
	if err != nil {
		p.t.Fatalf("$%s: %v", name, err)
	}
	return v
}

// dumpLogs logs the tail of the sandbox's logs after a failure.
func (p *play) dumpLogs() {
	logs, _ := filepath.Glob(filepath.Join(p.repo, ".sandbox", "logs", "*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		lines := strings.Split(string(b), "\n")
		p.t.Logf("--- %s (last 40 lines):\n%s", l, strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
}

// copyRepo copies the repository's files (tracked and untracked, not
// ignored: what a clone with the working tree's changes holds) and the
// Kubernetes binaries hack/build-tools.sh cached in bin/ (with their
// stamps, so make's tools step finds them built).
// clusterTools are what hack/build-tools.sh cluster builds besides the
// control plane: the real-nodes sandbox runs them.
var clusterTools = []string{"kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "coredns", "e2e.test", "ginkgo", "agnhost",
	"images/pause.tar", "images/agnhost.tar", "images/busybox.tar"}

func copyRepo(t *testing.T, from, to string, tools []string) {
	t.Helper()
	ls := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	ls.Dir = from
	list, err := ls.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		if f == "" {
			continue
		}
		if _, err := os.Lstat(filepath.Join(from, f)); os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		copyFile(t, filepath.Join(from, f), filepath.Join(to, f))
	}
	for _, tool := range tools {
		src := filepath.Join(from, "bin", tool)
		if _, err := os.Stat(src); err != nil {
			t.Fatalf("%s is not built (make tools, or hack/build-tools.sh cluster): %v", src, err)
		}
		copyFile(t, src, filepath.Join(to, "bin", tool))
		stamp := filepath.Join(filepath.Dir(tool), "."+filepath.Base(tool)+".stamp")
		if _, err := os.Stat(filepath.Join(from, "bin", stamp)); err == nil {
			copyFile(t, filepath.Join(from, "bin", stamp), filepath.Join(to, "bin", stamp))
		}
	}
	// git describe and the version stamp read the history: a clone has it.
	run(t, "git", "-C", to, "init", "-q")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(from)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		dest, err := os.Readlink(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(dest, to); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := os.Link(from, to); err == nil {
		return
	}
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// sessionEnv is a user's environment: PATH, HOME, Go's caches; nothing of
// the test's. The module proxy is off: the namespace has no network, and
// everything was fetched when the test was built.
func sessionEnv(t *testing.T) []string {
	t.Helper()
	goenv := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	path := []string{filepath.Dir(goBin), "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}
	return []string{
		"PATH=" + strings.Join(slices.Compact(path), ":"),
		"HOME=" + os.Getenv("HOME"),
		"LANG=C.UTF-8",
		"TERM=dumb",
		"GOCACHE=" + goenv("GOCACHE"),
		"GOMODCACHE=" + goenv("GOMODCACHE"),
		"GOPATH=" + goenv("GOPATH"),
		"GOPROXY=off",
		"GOTOOLCHAIN=local",
		"GOFLAGS=",
	}
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// removeNetns kills whatever still runs in the namespace (nothing, after a
// walkthrough's make sandbox-down, but for its bash) and deletes it.
func removeNetns(t *testing.T, ns string) {
	pids, _ := exec.Command("ip", "netns", "pids", ns).Output()
	for _, f := range strings.Fields(string(pids)) {
		if pid, err := strconv.Atoi(f); err == nil {
			if proc, err := os.FindProcess(pid); err == nil {
				_ = proc.Kill()
			}
		}
	}
	// The namespace goes once its last process has.
	_ = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		out, _ := exec.Command("ip", "netns", "pids", ns).Output()
		return strings.TrimSpace(string(out)) == "", nil
	})
	if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
		t.Errorf("ip netns del %s: %v\n%s", ns, err, out)
	}
}
