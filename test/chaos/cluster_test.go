package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/testutil"
	"github.com/azlb/azlb/internal/verify"
)

// chaosLabel marks the namespaces the suites create.
const chaosLabel = "azlb-chaos"

// The cluster under test: three Standard load balancers with IP-based pools
// (the mode with the most controllers at work: Service reconcile with
// placement, the Local Service pool updater, admin state), a one-second
// batching window for Local pools.
func clusterConfig() map[string]any {
	return map[string]any{
		"loadBalancerBackendPoolUpdateIntervalInSeconds": 1,
		"driftRepairIntervalInSeconds":                   int(driftPeriod / time.Second),
		"multipleStandardLoadBalancerConfigurations": []map[string]any{
			{"name": "kubernetes"},
			{"name": "lb-2", "nodeSelector": map[string]any{"matchLabels": map[string]string{"pool": "two"}}},
			{"name": "lb-3", "primaryVMSet": "pool3", "serviceNamespaceSelector": map[string]any{"matchLabels": map[string]string{"team": "c"}}},
		},
	}
}

// writeConfig writes the cluster's azure.json with the replica's
// userAgent, which names its ARM requests in the emulator's log.
func writeConfig(t testing.TB, userAgent string) string {
	t.Helper()
	return writeClusterConfig(t, userAgent, clusterConfig())
}

// writeClusterConfig writes azure.json with the given cluster fields.
func writeClusterConfig(t testing.TB, userAgent string, cluster map[string]any) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(devenv.ConfigJSON(suite.env.Server.URL(), suite.env.CAFile), &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range cluster {
		m[k] = v
	}
	m["userAgent"] = userAgent
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "azure-"+userAgent+".json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// loadConfig is the cluster's configuration as azlb loads it.
func loadConfig(t testing.TB, cluster map[string]any) *config.Config {
	t.Helper()
	cfg, err := config.LoadFile(writeClusterConfig(t, verify.UserAgent, cluster))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// replica is one azlb-controller-manager process.
type replica struct {
	*devenv.Process
	name, userAgent, config string
	leaderElect             bool
	port                    int
	started                 time.Time
}

// startReplica runs the controller as the chart runs it (its arguments and
// identities; with leader election, the chart's lease timings). Its
// requests carry the User-Agent azlb-<name>.
func startReplica(t testing.TB, name string, leaderElect bool) *replica {
	t.Helper()
	return startReplicaWith(t, name, leaderElect, clusterConfig())
}

// startReplicaWith starts a replica with the given cluster fields in its
// azure.json.
func startReplicaWith(t testing.TB, name string, leaderElect bool, cluster map[string]any) *replica {
	t.Helper()
	ua := "azlb-" + name
	r := &replica{name: name, userAgent: ua, config: writeClusterConfig(t, ua, cluster), leaderElect: leaderElect}
	r.start(t)
	return r
}

func (r *replica) start(t testing.TB) {
	t.Helper()
	port, err := testutil.FreeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	kc := suite.kube.ControllerKubeconfig
	var args []string
	for _, a := range suite.chartArgs {
		a = strings.ReplaceAll(a, "$(POD_IP)", "127.0.0.1")
		if strings.HasPrefix(a, "--cloud-config=") || strings.HasPrefix(a, "--secure-port=") || (!r.leaderElect && strings.HasPrefix(a, "--leader-elect")) {
			continue
		}
		args = append(args, a)
	}
	args = append(args, "--cloud-config", r.config, "--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--secure-port", strconv.Itoa(port), "--v=2")
	if !r.leaderElect {
		args = append(args, "--leader-elect=false")
	}
	logPath := filepath.Join(suite.work, fmt.Sprintf("%s-%s.log", strings.ReplaceAll(t.Name(), "/", "_"), r.name))
	p, err := devenv.StartProcess(suite.ccmBinary, args, logPath)
	if err != nil {
		t.Fatal(err)
	}
	r.Process, r.port, r.started = p, port, time.Now()
	proc := p
	t.Cleanup(func() {
		proc.Stop(20 * time.Second)
		log, err := proc.Log()
		if err != nil {
			return
		}
		testutil.CheckControllerLog(t, "replica "+r.name, log)
		if t.Failed() {
			keepLog(t, logPath)
		}
	})
}

// keepLog copies a failed test's replica log where it outlives the work
// directory (removed at the end of the run unless AZLB_CHAOS_KEEP):
// AZLB_CHAOS_OUT/logs (make chaos), else a directory of its own under the
// system's temporary directory, named in the test's log.
func keepLog(t testing.TB, path string) {
	t.Helper()
	dir := os.Getenv("AZLB_CHAOS_OUT")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "azlb-chaos-logs")
	}
	dir = filepath.Join(dir, "logs")
	b, err := os.ReadFile(path)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		kept := filepath.Join(dir, filepath.Base(path))
		if err = os.WriteFile(kept, b, 0o644); err == nil {
			t.Logf("the replica's log is kept in %s", kept)
			return
		}
	}
	t.Logf("keeping the replica's log %s: %v", path, err)
}

// restart starts the replica again after it stopped or was killed.
func (r *replica) restart(t testing.TB) {
	t.Helper()
	if !r.Exited() {
		t.Fatalf("replica %s still runs", r.name)
	}
	r.start(t)
}

// resetCluster leaves nothing of an earlier scenario: no Services,
// EndpointSlices or nodes, an empty emulator seeded again, no faults, an
// empty request log. No controller may run.
func resetCluster(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	cs := suite.cs
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: chaosLabel})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range nss.Items {
		svcs, err := cs.CoreV1().Services(ns.Name).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range svcs.Items {
			if len(s.Finalizers) > 0 {
				patch := []byte(`{"metadata":{"finalizers":null}}`)
				if _, err := cs.CoreV1().Services(ns.Name).Patch(ctx, s.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
			}
			if err := cs.CoreV1().Services(ns.Name).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
		if err := cs.DiscoveryV1().EndpointSlices(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cs.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	emu := suite.env.Emulator()
	emu.Reset()
	if err := suite.env.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	emu.ResetRequests()
}

// checker runs verify in-process, with read-only clients.
type checker struct {
	cfg     *config.Config
	clients *azure.Clients
}

func newChecker(t testing.TB) *checker {
	t.Helper()
	return newCheckerWith(t, clusterConfig())
}

// newCheckerWith checks a cluster with the given azure.json fields.
func newCheckerWith(t testing.TB, cluster map[string]any) *checker {
	t.Helper()
	cfg := loadConfig(t, cluster)
	clients, err := verify.NewReadOnlyClients(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(clients.Close)
	return &checker{cfg: cfg, clients: clients}
}

func (c *checker) check(ctx context.Context) (*verify.Report, error) {
	return verify.Run(ctx, c.cfg, c.clients, suite.cs)
}

// waitClean polls verify (every second) until it is clean and returns how
// long that took; after bound it fails the test with the last report.
func (c *checker) waitClean(t testing.TB, bound time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var last, lastUnclean *verify.Report
	var lastUncleanAt time.Duration
	var lastErr error
	checks := 0
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, bound, true, func(ctx context.Context) (bool, error) {
		rep, err := c.check(ctx)
		if ctx.Err() != nil {
			return false, nil // cut off by the bound: the last complete check says why
		}
		checks++
		if rep != nil {
			last = rep // the last report: a check whose reads failed has none
			if !rep.Clean() {
				lastUnclean, lastUncleanAt = rep, time.Since(start)
			}
		}
		lastErr = err
		return err == nil && rep.Clean(), nil
	})
	if err == nil && lastUnclean != nil && lastUncleanAt > 10*time.Second {
		// What took long (make chaos's figures: time to clean).
		for _, f := range lastUnclean.Findings {
			t.Logf("still a finding %v after the start of the wait: %s", lastUncleanAt.Round(time.Second), f)
		}
	}
	if err != nil {
		// One line per finding, each with this file's prefix, so that
		// make test's filtered output keeps them.
		if last != nil {
			for _, f := range last.Findings {
				t.Logf("finding: %s", f)
			}
		}
		var b strings.Builder
		if last != nil {
			_ = last.Write(&b)
		}
		t.Fatalf("verify not clean %v after the last change (%d complete checks; the last one's error: %v; below: the last report):\n%s", bound, checks, lastErr, b.String())
	}
	return time.Since(start)
}

// verifyCLI runs the azlb verify binary, as an operator would, and
// requires exit 0.
func verifyCLI(t testing.TB) {
	t.Helper()
	out, err := exec.Command(suite.cliBinary, "verify", "--kubeconfig", suite.kube.AdminKubeconfig,
		"--cloud-config", writeConfig(t, "azlb-cli")).CombinedOutput()
	if err != nil {
		t.Fatalf("azlb verify: %v\n%s", err, out)
	}
}

// armCalls counts the ARM requests (reads, writes) of one replica since t0.
func armCalls(ua string, since time.Time) (reads, writes int) {
	for _, r := range suite.env.Emulator().Requests() {
		if r.Kind != "arm" || !strings.HasPrefix(r.UserAgent, ua+" ") || r.Time.Before(since) {
			continue
		}
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			reads++
		} else {
			writes++
		}
	}
	return reads, writes
}

// writesOf lists the ARM writes in the request log, oldest first.
func writesOf(recs []emulator.RequestRecord) []emulator.RequestRecord {
	var out []emulator.RequestRecord
	for _, r := range recs {
		if r.Kind == "arm" && r.Method != http.MethodGet && r.Method != http.MethodHead {
			out = append(out, r)
		}
	}
	return out
}

// newNamespace creates a namespace of the suites, with labels.
func newNamespace(t testing.TB, name string, labels map[string]string) {
	t.Helper()
	l := map[string]string{chaosLabel: "true"}
	for k, v := range labels {
		l[k] = v
	}
	_, err := suite.cs.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
