package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
)

// suite is the shared control plane, emulator and binaries.
var suite struct {
	root, work string
	ccmBinary  string
	cliBinary  string
	chartArgs  []string
	env        *devenv.Env
	kube       *devenv.Kube
	cs         kubernetes.Interface
	params     params
}

// params size the suites: the short variant by default (inside make test),
// the full one with AZLB_CHAOS_FULL=1 (make chaos); each can be set on its
// own.
type params struct {
	Seeds, Events, Crashes, CrashEvents, Failovers int
	// Bound is how long verify may take to come clean after the faults
	// stop (or after the last churn event of a crash point).
	Bound time.Duration
	// FaultRate is the share of ARM calls that fail during churn and for
	// FaultTail after it (the controller's work on the churn's last events
	// is faulted too).
	FaultRate float64
	FaultTail time.Duration
}

func loadParams() params {
	p := params{Seeds: 1, Events: 150, Crashes: 2, CrashEvents: 30, Failovers: 2, Bound: 5 * time.Minute, FaultRate: 0.2, FaultTail: 10 * time.Second}
	if os.Getenv("AZLB_CHAOS_FULL") != "" {
		p.Seeds, p.Events, p.Crashes, p.Failovers = 20, 1000, 20, 6
	}
	for name, dst := range map[string]*int{"AZLB_CHAOS_SEEDS": &p.Seeds, "AZLB_CHAOS_EVENTS": &p.Events, "AZLB_CHAOS_CRASHES": &p.Crashes,
		"AZLB_CHAOS_CRASH_EVENTS": &p.CrashEvents, "AZLB_CHAOS_FAILOVERS": &p.Failovers} {
		if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
			*dst = v
		}
	}
	if d, err := time.ParseDuration(os.Getenv("AZLB_CHAOS_BOUND")); err == nil && d > 0 {
		p.Bound = d
	}
	p.CrashEvents = max(p.CrashEvents, 2) // a kill needs events before and after it
	return p
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	_, file, _, _ := runtime.Caller(0)
	suite.root = filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	suite.params = loadParams()
	work, err := os.MkdirTemp("", "azlb-chaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if os.Getenv("AZLB_CHAOS_KEEP") == "" {
		defer os.RemoveAll(work)
	} else {
		fmt.Fprintln(os.Stderr, "chaos: keeping", work)
	}
	suite.work = work
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "chaos setup:", err)
		teardown()
		return 1
	}
	code := m.Run()
	teardown()
	return code
}

func setup() error {
	ctx := context.Background()
	suite.ccmBinary = filepath.Join(suite.work, "azlb-controller-manager")
	suite.cliBinary = filepath.Join(suite.work, "azlb")
	args := []string{"build", "-o", suite.ccmBinary}
	if os.Getenv("AZLB_CHAOS_RACE") != "" {
		args = append(args, "-race") // the short variant in make test runs the controller with the race detector
	}
	for _, b := range [][]string{append(args, "./cmd/azlb-controller-manager"), {"build", "-o", suite.cliBinary, "./cmd/azlb"}} {
		build := exec.Command("go", b...)
		build.Dir = suite.root
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build %v: %w", b, err)
		}
	}
	// The write budget is lifted: the suites measure azlb under the
	// injected faults, not under Microsoft.Network's 1,000 writes per 5
	// minutes (which would add 429s of its own).
	env, err := devenv.Start(ctx, suite.work, emulator.Options{WriteBudget: 1 << 30}, nil)
	if err != nil {
		return err
	}
	suite.env = env
	logs, err := os.Create(filepath.Join(suite.work, "kube.log"))
	if err != nil {
		return err
	}
	kube, err := devenv.StartKube(ctx, filepath.Join(suite.work, "kube"), devenv.KubeOptions{BinDir: filepath.Join(suite.root, "bin"), Logs: logs})
	if err != nil {
		return err
	}
	suite.kube = kube
	rc, err := kube.RestConfig()
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = 500, 1000 // the churn driver, not the controller
	suite.cs = kubernetes.NewForConfigOrDie(rc)
	suite.chartArgs, err = devenv.ApplyChartIdentities(ctx, suite.cs, filepath.Join(suite.root, "bin"),
		filepath.Join(suite.root, "deploy", "helm", "azlb"), "--set", "image.registry=chaos.invalid")
	return err
}

func teardown() {
	if suite.kube != nil {
		suite.kube.Stop()
	}
	if suite.env != nil {
		_ = suite.env.Close()
	}
}

// figures collects the measured figures; they are logged and, with
// AZLB_CHAOS_OUT, appended to figures.jsonl.
var figuresMu sync.Mutex

func figure(t *testing.T, kind string, fields map[string]any) {
	t.Helper()
	fields["kind"] = kind
	b, _ := json.Marshal(fields) // maps of plain values always marshal
	t.Logf("FIGURE %s", b)
	dir := os.Getenv("AZLB_CHAOS_OUT")
	if dir == "" {
		return
	}
	figuresMu.Lock()
	defer figuresMu.Unlock()
	f, err := os.OpenFile(filepath.Join(dir, "figures.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("figures: %v", err)
		return
	}
	defer f.Close()
	_, _ = f.Write(append(b, '\n'))
}
