package localcluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/testutil"
)

// TestUpRunsPodsAndDownRestoresTheHost brings a cluster up from the built
// binaries, runs a pod on every node, and tears it down: the host is then
// as it was. It needs root and `hack/build-tools.sh cluster`;
// AZLB_LOCALCLUSTER=1 runs it (make test-k8s-e2e does).
func TestUpRunsPodsAndDownRestoresTheHost(t *testing.T) {
	if os.Getenv("AZLB_LOCALCLUSTER") == "" {
		t.Skip("brings up a real cluster: set AZLB_LOCALCLUSTER=1 (make test-k8s-e2e does)")
	}
	ctx := context.Background()
	before, err := TakeSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("AZLB_LOCALCLUSTER_DIR") // kept afterwards, with the logs
	if dir == "" {
		dir = t.TempDir()
	}
	start := time.Now()
	c, err := Up(ctx, Options{Dir: dir, BinDir: filepath.Join(testutil.RepoRoot(), "bin"), Progress: testWriter{t},
		Detached: os.Getenv("AZLB_LOCALCLUSTER_DETACHED") != ""})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("3 nodes Ready in %v: %v", time.Since(start).Round(100*time.Millisecond), c.Timings)
	downed := false
	t.Cleanup(func() {
		if !downed {
			_ = c.Down(ctx)
		}
	})
	// The nodes carry the uninitialized taint until a cloud controller
	// manager initializes them; this test has none, so its pods tolerate it.
	var pods []string
	for _, n := range c.Plan.Nodes {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "hello-", Namespace: "default"},
			Spec: v1.PodSpec{NodeName: n.Name, TerminationGracePeriodSeconds: ptr.To[int64](1),
				Tolerations: []v1.Toleration{{Operator: v1.TolerationOpExists}},
				Containers: []v1.Container{{Name: "agnhost", Image: "registry.k8s.io/e2e-test-images/agnhost:2.66.1",
					ImagePullPolicy: v1.PullNever, Args: []string{"netexec", "--http-port=8080"}}}},
		}
		created, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, created.Name)
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range pods {
			p, err := c.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil || p.Status.Phase != v1.PodRunning || p.Status.PodIP == "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("pods not running: %v (logs in %s/logs)", err, dir)
	}
	t.Logf("a pod running on each node %v after Up", time.Since(start).Round(100*time.Millisecond))
	if os.Getenv("AZLB_LOCALCLUSTER_KEEP") != "" {
		t.Logf("keeping the cluster up until the test's timeout: KUBECONFIG=%s", c.Kube.AdminKubeconfig)
		<-ctx.Done()
	}
	downStart := time.Now()
	downed = true
	if err := c.Down(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("down in %v", time.Since(downStart).Round(100*time.Millisecond))
	after, err := TakeSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff(before, after, Relevant(c.Plan.Slot, dir)); len(d) > 0 {
		t.Errorf("the host differs after Down:\n%s", strings.Join(d, "\n"))
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// TestDownDir tears down the cluster in AZLB_LOCALCLUSTER_DOWN (one a
// killed test left behind), for development.
func TestDownDir(t *testing.T) {
	dir := os.Getenv("AZLB_LOCALCLUSTER_DOWN")
	if dir == "" {
		t.Skip("set AZLB_LOCALCLUSTER_DOWN to a cluster's directory")
	}
	if err := Down(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
}
