// Package sandbox runs the whole of azlb on one machine: the ARM emulator,
// etcd and kube-apiserver on loopback, and azlb-controller-manager with a
// small demo cluster. Everything it writes lives under one directory
// (.sandbox by default); the processes outlive the command that started them
// and Down stops them.
package sandbox

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
)

// Options of Up.
type Options struct {
	// Dir receives the kubeconfig, azure.json, the emulator CA, pid files
	// and logs.
	Dir string
	// BinDir holds azlb-emulator, azlb-controller-manager, kube-apiserver
	// and etcd.
	BinDir string
	// RBACFile is the manifest granting the controller its permissions
	// (deploy/rbac.yaml).
	RBACFile string
	// SecurePort is the controller manager's /metrics and /healthz port on
	// 127.0.0.1; 0 means 10258.
	SecurePort int
	// Out receives progress lines.
	Out io.Writer
	// Variant selects the demo: VariantMulti ("" too), VariantNIC,
	// VariantContainer or VariantBasic.
	Variant string
}

// Files the sandbox writes under Dir.
const (
	KubeconfigFile = "kubeconfig"
	AzureJSONFile  = "azure.json"
	EmulatorCAFile = "emulator-ca.pem"
)

// ErrAlreadyRunning is Up's error when a sandbox runs in the directory
// already: nothing was started, and the running one must be left alone.
var ErrAlreadyRunning = errors.New("a sandbox is already running")

// Up starts everything and creates the demo cluster. It returns once every
// demo Service has its ingress IP and, in the default demo, answers through
// the emulator's data plane (TCP Services an HTTP request, the UDP one a
// datagram), so the README's first request is served.
func Up(ctx context.Context, o Options) error {
	start := time.Now()
	if !knownVariant(o.Variant) {
		return fmt.Errorf("unknown sandbox variant %q (known: %s)", o.Variant, strings.Join(Variants, ", "))
	}
	if running(o.Dir) {
		return fmt.Errorf("%w in %s: stop it with 'make sandbox-down'", ErrAlreadyRunning, o.Dir)
	}
	// The emulator keeps its state in memory, so the cluster starts afresh
	// too: a previous run's etcd data would describe Azure objects that no
	// longer exist.
	if err := downNodes(o.Dir); err != nil { // a nodes sandbox whose processes died
		return err
	}
	for _, stale := range []string{"kube", "logs", ClusterDir} {
		if err := os.RemoveAll(filepath.Join(o.Dir, stale)); err != nil {
			return err
		}
	}
	logs := filepath.Join(o.Dir, "logs")
	if err := os.MkdirAll(logs, 0o700); err != nil {
		return err
	}
	step := func(format string, args ...any) {
		fmt.Fprintf(o.Out, "[%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	if o.Variant == VariantNodes {
		if err := upNodes(ctx, o, logs, step); err != nil {
			return err
		}
		step("sandbox ready")
		return nil
	}

	// 1. The ARM emulator.
	caFile := filepath.Join(o.Dir, EmulatorCAFile)
	_ = os.Remove(caFile)
	emuLog := filepath.Join(logs, "emulator.log")
	if err := startDetached(o.Dir, "azlb-emulator", emuLog, filepath.Join(o.BinDir, "azlb-emulator"),
		"--listen", "127.0.0.1:0", "--ca-file", caFile, "--data-plane"); err != nil {
		return err
	}
	url, err := waitForLine(ctx, emuLog, "https://127.0.0.1:")
	if err != nil {
		return fmt.Errorf("emulator did not start (see %s): %w", emuLog, err)
	}
	step("ARM emulator serving on %s (data plane on: Service IPs from %s)", url, emulator.DefaultDataPlanePublicIPv4CIDR)

	// 2. etcd + kube-apiserver.
	kubeLog, err := os.Create(filepath.Join(logs, "kube.log"))
	if err != nil {
		return err
	}
	defer kubeLog.Close()
	kube, err := devenv.StartKube(ctx, filepath.Join(o.Dir, "kube"), devenv.KubeOptions{BinDir: o.BinDir, Logs: kubeLog, Detach: true})
	if err != nil {
		return err
	}
	step("kube-apiserver v1.37.1 ready on %s", kube.URL)
	if err := copyFile(kube.AdminKubeconfig, filepath.Join(o.Dir, KubeconfigFile)); err != nil {
		return err
	}
	rc, err := kube.RestConfig()
	if err != nil {
		return err
	}
	cs := kubernetes.NewForConfigOrDie(rc)

	// 3. Seed Azure, write azure.json, apply RBAC, start the controller.
	env, err := devenv.Connect(ctx, url, caFile, nil, devenv.WithNetwork(devenv.LoopbackNetwork))
	if err != nil {
		return err
	}
	v := &variantRun{o: o, env: env, cs: cs, logs: logs, step: step}
	azureJSON, err := v.seed(ctx, url, caFile, kube.AdminKubeconfig)
	if err != nil {
		return err
	}
	if err := devenv.ApplyFile(ctx, cs, o.RBACFile); err != nil {
		return err
	}
	kc := kube.ControllerKubeconfig
	ctl := controllerCommand{Bin: filepath.Join(o.BinDir, "azlb-controller-manager"), Args: []string{
		"--cloud-config", azureJSON, "--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--leader-elect=false", "--use-service-account-credentials", "--secure-port", strconv.Itoa(cmp.Or(o.SecurePort, 10258)),
		"--node-monitor-period=2s", "--v=2"}}
	if v.nodeManagers {
		ctl.Args = append(ctl.Args, "--controllers=*,-cloud-node-controller")
	}
	if err := ctl.start(o.Dir, filepath.Join(logs, "controller.log")); err != nil {
		return err
	}
	step("azlb-controller-manager started (the manager as ServiceAccount kube-system/azlb-controller-manager, each controller as its own)")

	// 4. The demo cluster.
	services, err := v.demo(ctx, cs)
	if err != nil {
		return err
	}
	for _, name := range services {
		ip, err := waitIngress(ctx, cs, DemoNamespace, name)
		if err != nil {
			return fmt.Errorf("service %s/%s got no ingress IP (see %s): %w", DemoNamespace, name, filepath.Join(logs, "controller.log"), err)
		}
		step("service %s/%s has ingress IP %s", DemoNamespace, name, ip)
	}
	if err := v.ready(ctx); err != nil {
		return err
	}
	step("sandbox ready")
	return nil
}

// controllerFile keeps the controller's command line, for RestartController.
const controllerFile = "controller.json"

// controllerCommand is how Up started the controller.
type controllerCommand struct {
	Bin  string   `json:"bin"`
	Args []string `json:"args"`
}

func (c controllerCommand) start(dir, logPath string) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, controllerFile), b, 0o600); err != nil {
		return err
	}
	return startDetached(dir, "azlb-controller-manager", logPath, c.Bin, c.Args...)
}

// ControllerStartTimeout is how long RestartController waits for the
// restarted controller to serve /healthz.
const ControllerStartTimeout = time.Minute

// RestartController stops the sandbox's controller (if it runs) and starts
// it again as Up did, reading azure.json afresh: what a user does after
// editing it (for example to migrate the Basic sandbox). The previous log
// is kept as controller.log.1. It returns once the controller serves
// /healthz (RestartControllerWithin, ControllerStartTimeout).
func RestartController(dir string) error {
	return RestartControllerWithin(context.Background(), dir, ControllerStartTimeout)
}

// RestartControllerWithin is RestartController waiting at most timeout for
// the controller to come up: it returns nil once the controller answers
// /healthz on its secure port (which it serves only after loading
// azure.json and building its cloud) and the emulator has answered one of
// its ARM calls with success, and an error with the controller's last log
// entry (its last line, with the lines that continue it) when the
// controller exits first (a bad azure.json: it dies at once) or the
// deadline passes (it is left running then), or with its log line naming
// Azure AD's refusal when its credential is refused (a wrong
// aadClientSecret: every ARM call would fail).
func RestartControllerWithin(ctx context.Context, dir string, timeout time.Duration) error {
	b, err := os.ReadFile(filepath.Join(dir, controllerFile))
	if err != nil {
		return fmt.Errorf("no sandbox controller to restart in %s (start one with 'make sandbox'): %w", dir, err)
	}
	var c controllerCommand
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, controllerFile), err)
	}
	devenv.StopPIDFile(filepath.Join(dir, controllerPIDFile))
	logPath := filepath.Join(dir, "logs", "controller.log")
	if err := os.Rename(logPath, logPath+".1"); err != nil && !os.IsNotExist(err) {
		return err
	}
	started := time.Now()
	if err := c.start(dir, logPath); err != nil {
		return err
	}
	if err := waitController(ctx, dir, logPath, c.securePort(), timeout); err != nil {
		return err
	}
	// Serving /healthz is not serving Services: its credential may be
	// refused by Azure AD (armready.go).
	return waitFirstARMCall(ctx, c.cloudConfig(dir), logPath, started, started.Add(timeout))
}

// cloudConfig is the path of the controller's --cloud-config (the
// sandbox's azure.json without one).
func (c controllerCommand) cloudConfig(dir string) string {
	for i, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--cloud-config="); ok {
			return v
		}
		if a == "--cloud-config" && i+1 < len(c.Args) {
			return c.Args[i+1]
		}
	}
	return filepath.Join(dir, AzureJSONFile)
}

// controllerPIDFile is the controller's pid file under the sandbox's
// directory.
const controllerPIDFile = "azlb-controller-manager.pid"

// securePort is the port of the controller's --secure-port flag (the
// framework's default, 10258, without one).
func (c controllerCommand) securePort() int {
	for i, a := range c.Args {
		v, ok := strings.CutPrefix(a, "--secure-port=")
		if !ok && a == "--secure-port" && i+1 < len(c.Args) {
			v, ok = c.Args[i+1], true
		}
		if ok {
			if p, err := strconv.Atoi(v); err == nil {
				return p
			}
		}
	}
	return 10258
}

// waitController waits until the controller started in dir answers
// /healthz on 127.0.0.1:port with 200. It fails, with the last entry of
// the log at logPath, when the process exits first or timeout passes.
func waitController(ctx context.Context, dir, logPath string, port int, timeout time.Duration) error {
	url := "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz"
	// The controller serves a self-signed certificate it made at start,
	// on loopback.
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // see above
	defer hc.CloseIdleConnections()
	var last string
	healthy := func(ctx context.Context) bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			last = err.Error()
			return false
		}
		resp, err := hc.Do(req)
		if err != nil {
			last = err.Error()
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		last = resp.Status + ": " + strings.TrimSpace(string(body))
		return resp.StatusCode == http.StatusOK
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if !running(dir, controllerPIDFile) {
			return fmt.Errorf("azlb-controller-manager exited before serving /healthz (log: %s); its last log entry:\n%s", logPath, lastLogEntry(logPath))
		}
		if healthy(ctx) {
			return nil
		}
		select {
		case <-ctx.Done():
			if parent.Err() != nil {
				return fmt.Errorf("waiting for azlb-controller-manager to serve: %w (it is left running; log: %s)", parent.Err(), logPath)
			}
			return fmt.Errorf("azlb-controller-manager did not answer %s within %s (last: %s); it is left running (log: %s); its last log entry:\n%s",
				url, timeout, last, logPath, lastLogEntry(logPath))
		case <-tick.C:
		}
	}
}

// klogHeader starts a klog line: severity, date, time (I1127 00:11:50.7).
var klogHeader = regexp.MustCompile(`^[IWEF]\d{4} \d{2}:\d{2}:\d{2}`)

// lastLogEntry is the last entry of a log: its last line that starts a
// klog entry with the lines that follow it (a multi-line error, such as
// every invalid field of azure.json), at most 20; without klog lines, the
// last non-empty line.
func lastLogEntry(path string) string {
	const maxRead, maxLines = 64 << 10, 20
	f, err := os.Open(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > maxRead {
		_, _ = f.Seek(st.Size()-maxRead, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(b), "\n \t"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return "(the log is empty)"
	}
	start := len(lines) - 1
	for i := len(lines) - 1; i >= 0; i-- {
		if klogHeader.MatchString(lines[i]) {
			start = i
			break
		}
	}
	entry := lines[start:]
	if len(entry) > maxLines {
		entry = append(entry[:maxLines:maxLines], fmt.Sprintf("(%d more lines)", len(lines)-start-maxLines))
	}
	return strings.Join(entry, "\n")
}

// Down stops every process Up started and leaves the files in place
// (the nodes variant's cluster is torn down: its nodes, mounts and network
// namespaces; its logs stay).
func Down(dir string) {
	devenv.StopPIDFile(filepath.Join(dir, "azlb-node-agent.pid"))
	stopNodeManagers(dir)
	devenv.StopPIDFile(filepath.Join(dir, controllerPIDFile))
	devenv.StopDetached(filepath.Join(dir, "kube"))
	devenv.StopPIDFile(filepath.Join(dir, "azlb-emulator.pid"))
	if err := downNodes(dir); err != nil {
		fmt.Fprintf(os.Stderr, "sandbox: tearing down the nodes: %v\n", err)
	}
}

// running reports whether a process of the pid files (under dir; default:
// every process of the sandbox) runs.
func running(dir string, pidFiles ...string) bool {
	if len(pidFiles) == 0 {
		pidFiles = []string{"azlb-emulator.pid", "azlb-controller-manager.pid", "azlb-node-agent.pid", filepath.Join("kube", "kube-apiserver.pid"),
			filepath.Join(ClusterDir, "kube", "kube-apiserver.pid")}
	}
	for _, f := range pidFiles {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && syscall.Kill(pid, 0) == nil {
			return true
		}
	}
	return false
}

// AzureJSON is the sandbox's azure.json: two Standard load balancers (the
// second takes the pool2 nodes) and a short local-service update interval.
func AzureJSON(url, caFile string) []byte {
	var m map[string]any
	_ = json.Unmarshal(devenv.ConfigJSON(url, caFile), &m) // ConfigJSON is always a JSON object
	m["loadBalancerBackendPoolUpdateIntervalInSeconds"] = 2
	m["multipleStandardLoadBalancerConfigurations"] = []map[string]any{
		{"name": "kubernetes"},
		{"name": "lb-pool2", "nodeSelector": map[string]any{"matchLabels": map[string]string{"kubernetes.azure.com/agentpool": "pool2"}}},
	}
	b, _ := json.MarshalIndent(m, "", "  ") // maps of JSON values always marshal
	return append(b, '\n')
}

func startDetached(dir, name, logPath, bin string, args ...string) error {
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s not built (run 'make build tools'): %w", bin, err)
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600); err != nil {
		return err
	}
	// Reap the process if it exits while this one still runs (a test
	// calling Up in-process); otherwise it stays a zombie and Down would
	// wait for it in vain. The CLI exits right after Up, and init reaps.
	go func() { _ = cmd.Wait() }()
	return nil
}

// waitForLine waits until the file has a line containing marker and
// returns the first whitespace-separated word of that line that starts
// with it.
func waitForLine(ctx context.Context, path, marker string) (string, error) {
	return devenv.WaitForWord(ctx, path, marker, 20*time.Second)
}

func waitIngress(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, error) {
	var ip string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		svc, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if len(svc.Status.LoadBalancer.Ingress) > 0 {
			ip = svc.Status.LoadBalancer.Ingress[0].IP
		}
		return ip != "", nil
	})
	return ip, err
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o600)
}
