package chaos

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/testutil"
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
	ks         *testutil.KubeSuite
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

func TestMain(m *testing.M) {
	suite.root = testutil.RepoRoot()
	suite.params = loadParams()
	os.Exit(testutil.RunSuite(m, "chaos", "AZLB_CHAOS_KEEP", setup, func() { suite.ks.Close() }))
}

func setup(work string) error {
	suite.work = work
	suite.ccmBinary = filepath.Join(work, "azlb-controller-manager")
	suite.cliBinary = filepath.Join(work, "azlb")
	var race []string
	if os.Getenv("AZLB_CHAOS_RACE") != "" {
		race = []string{"-race"} // the short variant in make test runs the controller with the race detector
	}
	if err := testutil.GoBuild(suite.ccmBinary, "./cmd/azlb-controller-manager", race...); err != nil {
		return err
	}
	if err := testutil.GoBuild(suite.cliBinary, "./cmd/azlb"); err != nil {
		return err
	}
	// The write budget is lifted: the suites measure azlb under the
	// injected faults, not under Microsoft.Network's 1,000 writes per 5
	// minutes (which would add 429s of its own). The client is the churn
	// driver's, not the controller's.
	ks, err := testutil.StartKubeSuite(context.Background(), testutil.KubeSuiteOptions{Work: work,
		Emulator: emulator.Options{Throttle: emulator.NoThrottle}, Registry: "chaos.invalid", QPS: 500, Burst: 1000})
	suite.ks = ks
	suite.env, suite.kube, suite.cs, suite.chartArgs = ks.Env, ks.Kube, ks.Client, ks.ChartArgs
	return err
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
