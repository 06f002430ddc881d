package sandbox

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/azlb/azlb/internal/config"
)

// The sandbox's azure.json is the file the controller reads: it must load
// and validate, in multiple-SLB mode with a short update interval.
func TestAzureJSONIsAValidConfig(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.Load(bytes.NewReader(AzureJSON("https://127.0.0.1:1234", writeCA(t, dir))))
	if err != nil {
		t.Fatalf("sandbox azure.json does not load: %v", err)
	}
	if !cfg.UseMultipleStandardLoadBalancers() || len(cfg.MultipleStandardLoadBalancerConfigurations) != 2 {
		t.Fatalf("want two load balancer configurations, got %+v", cfg.MultipleStandardLoadBalancerConfigurations)
	}
	if cfg.LoadBalancerBackendPoolUpdateIntervalInSeconds != 2 {
		t.Fatalf("update interval %d, want 2", cfg.LoadBalancerBackendPoolUpdateIntervalInSeconds)
	}
}

func writeCA(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "config", "testdata", "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The container sandbox's azure.json selects pod-based load balancing.
func TestContainerAzureJSONIsAValidConfig(t *testing.T) {
	cfg, err := config.Load(bytes.NewReader(ContainerAzureJSON("https://127.0.0.1:1234", writeCA(t, t.TempDir()))))
	if err != nil {
		t.Fatalf("container sandbox azure.json does not load: %v", err)
	}
	if !cfg.PodIPMode() || cfg.UseMultipleStandardLoadBalancers() {
		t.Fatalf("not pod-based: %s", cfg)
	}
}

// The NIC demo's azure.json selects NIC-based pools on one load balancer.
func TestNICAzureJSONIsAValidConfig(t *testing.T) {
	cfg, err := config.Load(bytes.NewReader(NICAzureJSON("https://127.0.0.1:1234", writeCA(t, t.TempDir()))))
	if err != nil {
		t.Fatalf("NIC sandbox azure.json does not load: %v", err)
	}
	if cfg.LoadBalancerBackendPoolConfigurationType != config.BackendPoolNodeIPConfiguration || cfg.PodIPMode() || cfg.UseMultipleStandardLoadBalancers() {
		t.Fatalf("not NIC-based on one load balancer: %s", cfg)
	}
}

// An unknown variant is refused before anything starts.
func TestUpRefusesUnknownVariant(t *testing.T) {
	dir := t.TempDir()
	err := Up(context.Background(), Options{Dir: dir, Variant: "nics", Out: io.Discard})
	if err == nil || !strings.Contains(err.Error(), `unknown sandbox variant "nics"`) {
		t.Fatalf("got %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("Up wrote %d entries for an unknown variant", len(entries))
	}
}

// The Basic demo's azure.json loads (tools read it) but the controller
// refuses it until loadBalancerSku is standard.
func TestBasicAzureJSON(t *testing.T) {
	cfg, err := config.Load(bytes.NewReader(BasicAzureJSON("https://127.0.0.1:1234", writeCA(t, t.TempDir()))))
	if err != nil {
		t.Fatalf("Basic sandbox azure.json does not load: %v", err)
	}
	if err := cfg.CheckController(); err == nil || !strings.Contains(err.Error(), "retired") {
		t.Fatalf("the controller would accept it: %v", err)
	}
	if cfg.LoadBalancerBackendPoolConfigurationType != config.BackendPoolNodeIPConfiguration {
		t.Fatalf("pools %s, want NIC-based", cfg.LoadBalancerBackendPoolConfigurationType)
	}
}

// RestartController needs a sandbox that Up started.
func TestRestartControllerWithoutSandbox(t *testing.T) {
	if err := RestartController(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no sandbox controller to restart") {
		t.Fatalf("RestartController in an empty directory: %v", err)
	}
}

// Every Service of the default demo is placed by annotation on the load
// balancer the README and the end-to-end test count on (web on
// "kubernetes", whose nodes are pool1's): created together, Services left
// to automatic placement spread across the load balancers in no fixed way.
func TestDemoServicesArePinned(t *testing.T) {
	cs := fake.NewClientset()
	if err := createDemo(context.Background(), cs); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"web": "kubernetes", "restricted": "kubernetes", "api": "lb-pool2", "echo": "lb-pool2", "echo-tcp": "lb-pool2"}
	for _, name := range demoServices {
		svc, err := cs.CoreV1().Services(DemoNamespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := svc.Annotations["service.beta.kubernetes.io/azure-load-balancer-configurations"]
		if got != want[name] {
			t.Errorf("service %s placed on %q, want %q", name, got, want[name])
		}
	}
}
