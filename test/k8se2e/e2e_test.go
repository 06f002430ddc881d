package k8se2e

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/localcluster"
	"github.com/azlb/azlb/internal/testutil"
)

// TestKubernetesE2E brings up the cluster, azlb and the emulator, runs
// the e2e specs of specs_test.go, and judges each: it passes, or is skipped
// for the reason documented there. Then the cluster is torn down and the
// host must be as it was.
func TestKubernetesE2E(t *testing.T) {
	if os.Getenv("AZLB_K8S_E2E") == "" {
		t.Skip("brings up a real cluster and runs e2e.test: run make test-k8s-e2e")
	}
	ctx := context.Background()
	root := testutil.RepoRoot()
	bin := filepath.Join(root, "bin")
	out := filepath.Join(root, "_out", "k8s-e2e")
	clusterDir := filepath.Join(out, "cluster")
	if err := localcluster.Down(ctx, clusterDir); err != nil { // a previous run's, if its process died
		t.Fatal(err)
	}
	for _, d := range []string{clusterDir, filepath.Join(out, "report"), filepath.Join(out, "logs")} {
		if err := os.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
	}
	logs := filepath.Join(out, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	before, err := localcluster.TakeSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// The binaries under test, built as make build does (the controller
	// with the race detector when AZLB_E2E_RACE is set, as make test-e2e).
	emuBin, ccmBin := filepath.Join(work, "azlb-emulator"), filepath.Join(work, "azlb-controller-manager")
	var race []string
	if os.Getenv("AZLB_E2E_RACE") != "" {
		race = []string{"-race"}
	}
	if err := testutil.GoBuild(emuBin, "./cmd/azlb-emulator"); err != nil {
		t.Fatal(err)
	}
	if err := testutil.GoBuild(ccmBin, "./cmd/azlb-controller-manager", race...); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	c, err := localcluster.Up(ctx, localcluster.Options{Dir: clusterDir, BinDir: bin, Progress: logWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster up in %v", time.Since(start).Round(100*time.Millisecond))
	t.Cleanup(func() {
		dctx := context.Background()
		downStart := time.Now()
		if err := c.Down(dctx); err != nil {
			t.Errorf("tear down: %v", err)
		}
		t.Logf("cluster down in %v", time.Since(downStart).Round(100*time.Millisecond))
		after, err := localcluster.TakeSnapshot(dctx)
		if err != nil {
			t.Error(err)
			return
		}
		if d := localcluster.Diff(before, after, localcluster.Relevant(c.Plan.Slot, clusterDir)); len(d) > 0 {
			t.Errorf("the host differs after tear-down:\n%s", strings.Join(d, "\n"))
		}
	})

	// The emulator, serving the cluster's network.
	caFile := filepath.Join(work, "emulator-ca.pem")
	emuLog := filepath.Join(logs, "emulator.log")
	emu, err := devenv.StartProcess(emuBin, append(c.EmulatorArgs(), "--listen", "127.0.0.1:0", "--ca-file", caFile), emuLog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emu.Stop(10 * time.Second) })
	url, err := devenv.WaitForWord(ctx, emuLog, "https://127.0.0.1:", 30*time.Second)
	if err != nil {
		t.Fatalf("emulator did not start (%s): %v", emuLog, err)
	}
	env, err := devenv.Connect(ctx, url, caFile, nil, devenv.WithNetwork(c.Network()))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CreateVMs(ctx, env); err != nil {
		t.Fatal(err)
	}

	// azlb-controller-manager as the chart runs it.
	chartArgs, err := devenv.ApplyChartIdentities(ctx, c.Client, bin, filepath.Join(root, "deploy", "helm", "azlb"), "--set", "image.registry=e2e.invalid")
	if err != nil {
		t.Fatal(err)
	}
	azureJSON := filepath.Join(work, "azure.json")
	if err := os.WriteFile(azureJSON, devenv.ConfigJSON(url, caFile), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := testutil.FreeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	kc := c.Kube.ControllerKubeconfig
	args := make([]string, 0, len(chartArgs)+12)
	for _, a := range chartArgs {
		args = append(args, strings.ReplaceAll(a, "$(POD_IP)", "127.0.0.1"))
	}
	args = append(args, "--cloud-config", azureJSON, "--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--leader-elect=false", "--secure-port", strconv.Itoa(port), "--v=2")
	ccmLog := filepath.Join(logs, "azlb-controller-manager.log")
	ccm, err := devenv.StartProcess(ccmBin, args, ccmLog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ccm.Stop(20 * time.Second)
		if b, err := os.ReadFile(ccmLog); err == nil {
			testutil.CheckControllerLog(t, "azlb-controller-manager", string(b))
		}
	})
	if err := c.WaitInitialized(ctx, 2*time.Minute); err != nil {
		t.Fatalf("%v (see %s)", err, ccmLog)
	}
	t.Logf("nodes initialized by azlb %v after start", time.Since(start).Round(100*time.Millisecond))

	results := runE2E(ctx, t, bin, filepath.Join(out, "report"), c.Kube.AdminKubeconfig)
	judge(t, results)
}

// runE2E runs e2e.test with the suite's specs, in parallel processes
// (the ginkgo command, as Kubernetes' hack/ginkgo-e2e.sh does), and
// returns the outcome of each spec from the JUnit report.
func runE2E(ctx context.Context, t *testing.T, bin, reportDir, kubeconfig string) []specResult {
	t.Helper()
	if err := os.MkdirAll(reportDir, 0o755); err != nil {
		t.Fatal(err)
	}
	procs := 4
	if v, err := strconv.Atoi(os.Getenv("AZLB_K8S_E2E_PROCS")); err == nil && v > 0 {
		procs = v
	}
	args := append([]string{
		"run", "--procs", strconv.Itoa(procs), "--timeout", "55m", "--no-color", "--v",
		"--focus", focus(), "--junit-report", "junit.xml", "--output-dir", reportDir,
		filepath.Join(bin, "e2e.test"), "--",
		"--kubeconfig", kubeconfig,
		"--kubectl-path", filepath.Join(bin, "kubectl"),
		"--report-dir", reportDir,
	}, e2eFlags...)
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "ginkgo"), args...)
	logPath := filepath.Join(reportDir, "e2e.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	start := time.Now()
	err = cmd.Run()
	t.Logf("e2e.test ran %v in %d processes (%s): %v", time.Since(start).Round(time.Second), procs, logPath, err)
	// The framework's own report (junit_01.xml), all processes merged.
	results, perr := readJUnit(filepath.Join(reportDir, "junit_01.xml"))
	if perr != nil {
		t.Fatalf("e2e.test left no report (%v; see %s)", perr, logPath)
	}
	return results
}

// specResult is one spec's outcome.
type specResult struct {
	Name    string
	State   string // passed, failed, skipped, ...
	Message string
	Time    time.Duration
}

func readJUnit(path string) ([]specResult, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Suites []struct {
			Cases []struct {
				Name    string  `xml:"name,attr"`
				Status  string  `xml:"status,attr"`
				Time    float64 `xml:"time,attr"`
				Skipped *struct {
					Message string `xml:"message,attr"`
				} `xml:"skipped"`
				Failure *struct {
					Message string `xml:"message,attr"`
					Text    string `xml:",chardata"`
				} `xml:"failure"`
				Error *struct {
					Message string `xml:"message,attr"`
				} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	var out []specResult
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			r := specResult{Name: c.Name, State: c.Status, Time: time.Duration(c.Time * float64(time.Second))}
			switch {
			case c.Failure != nil:
				r.Message = c.Failure.Message
			case c.Error != nil:
				r.Message = c.Error.Message
			case c.Skipped != nil:
				r.Message = c.Skipped.Message
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// judge fails the test for every spec that did not pass, unless it was
// skipped for the reason specs_test.go documents; and for every spec of
// specs_test.go that did not run, and every spec that ran but is not there.
func judge(t *testing.T, results []specResult) {
	t.Helper()
	seen := map[string]bool{}
	var summary []string
	counts := map[string]int{}
	for _, r := range results {
		if strings.HasPrefix(r.Name, "[SynchronizedBeforeSuite]") || strings.HasPrefix(r.Name, "[SynchronizedAfterSuite]") ||
			strings.HasPrefix(r.Name, "[ReportAfterSuite]") || strings.HasPrefix(r.Name, "[ReportBeforeSuite]") {
			if r.State != "passed" {
				t.Errorf("%s %s: %s", r.Name, r.State, r.Message)
			}
			continue
		}
		s, ours := specByName(r.Name)
		if !ours {
			continue // not selected (the report lists every spec, skipped)
		}
		if seen[s.Name] {
			t.Errorf("spec %q reported twice", s.Name)
		}
		seen[s.Name] = true
		counts[r.State]++
		summary = append(summary, fmt.Sprintf("%-7s %6.1fs %s", r.State, r.Time.Seconds(), bare(r.Name)))
		switch {
		case r.State == "passed":
		case r.State == "skipped" && s.Skip != "" && regexp.MustCompile(s.Skip).MatchString(r.Message):
		case r.State == "skipped":
			t.Errorf("spec %q skipped: %s (specs_test.go expects it to pass)", bare(r.Name), r.Message)
		default:
			t.Errorf("spec %q %s: %s", bare(r.Name), r.State, r.Message)
		}
	}
	for _, s := range specs {
		if !seen[s.Name] {
			t.Errorf("spec %q of specs_test.go is not in the report", s.Name)
		}
	}
	sort.Strings(summary)
	b, _ := json.Marshal(counts)
	t.Logf("specs %s:\n%s", b, strings.Join(summary, "\n"))
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}
