package sandbox

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/testutil"
)

// fakeControllerEnv makes the test binary a stand-in for
// azlb-controller-manager (fakeController): "serve" loads --cloud-config
// as the controller does, dies at once with a klog fatal line when it is
// invalid, and otherwise serves /healthz on 127.0.0.1:--secure-port after
// a second; "hang" logs a line and never serves.
const fakeControllerEnv = "AZLB_SANDBOX_TEST_CONTROLLER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeControllerEnv); mode != "" {
		os.Exit(fakeController(mode, os.Args[1:]))
	}
	// The tests start processes and servers: none of their goroutines may
	// outlive them.
	goleak.VerifyTestMain(m)
}

func fakeController(mode string, args []string) int {
	var cloudConfig string
	port := 0
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--cloud-config":
			cloudConfig = args[i+1]
		case "--secure-port":
			port, _ = strconv.Atoi(args[i+1])
		}
	}
	klogLine := func(sev, format string, a ...any) {
		fmt.Printf("%s%s %7d fake.go:1] %s\n", sev, time.Now().Format("0102 15:04:05.000000"), os.Getpid(), fmt.Sprintf(format, a...))
	}
	klogLine("I", "Version: fake")
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	if mode == "hang" {
		klogLine("I", "waiting for something that never comes")
		<-stop
		return 0
	}
	cfg, err := config.LoadFile(cloudConfig)
	if err == nil {
		err = cfg.CheckController()
	}
	if err != nil {
		klogLine("F", "Cloud provider could not be initialized: could not init cloud provider \"azure\": cloud provider azure: %v", err)
		return 255
	}
	time.Sleep(time.Second) // building the cloud
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		klogLine("F", "listen: %v", err)
		return 1
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			_, _ = w.Write([]byte("ok"))
			return
		}
		http.NotFound(w, r)
	}))
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.StartTLS()
	klogLine("I", "Serving securely on 127.0.0.1:%d", port)
	// Its first ARM call, as the controller's service sync makes one.
	if clients, err := azure.NewClients(context.Background(), cfg, azure.ClientOptions{Source: "fake"}); err != nil {
		klogLine("E", "clients: %v", err)
	} else if _, err := clients.LoadBalancer.List(context.Background(), cfg.ResourceGroup); err != nil {
		klogLine("E", "list load balancers: %s", strings.ReplaceAll(err.Error(), "\n", " "))
	} else {
		klogLine("I", "listed load balancers")
	}
	<-stop
	srv.Close()
	return 0
}

// fakeSandbox is a sandbox directory whose controller (controller.json, as
// Up writes it) is the fake controller in mode, reading a valid azure.json;
// it returns the directory, the azure.json path and the secure port. The
// controller is stopped when the test ends.
func fakeSandbox(t *testing.T, mode string) (dir, azureJSON string, port int) {
	t.Helper()
	t.Setenv(fakeControllerEnv, mode)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if port, err = testutil.FreeLoopbackPort(); err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o700); err != nil {
		t.Fatal(err)
	}
	azureJSON = filepath.Join(dir, AzureJSONFile)
	env := testutil.StartEmulator(t, emulator.Options{}, nil)
	if err := os.WriteFile(azureJSON, AzureJSON(env.URL, env.CAFile), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(controllerCommand{Bin: self, Args: []string{"--cloud-config", azureJSON, "--secure-port", strconv.Itoa(port), "--v=2"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, controllerFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { devenv.StopPIDFile(filepath.Join(dir, controllerPIDFile)) })
	return dir, azureJSON, port
}

func healthzAnswers(port int) bool {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the fake's self-signed certificate
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("https://127.0.0.1:" + strconv.Itoa(port) + "/healthz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// RestartController returns once the restarted controller serves /healthz,
// not as soon as the process started.
func TestRestartControllerWaitsUntilServing(t *testing.T) {
	dir, _, port := fakeSandbox(t, "serve")
	if err := RestartControllerWithin(context.Background(), dir, 30*time.Second); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if !healthzAnswers(port) {
		t.Fatal("RestartController returned before the controller served /healthz")
	}
	// Again: the running controller is stopped, its log kept.
	if err := RestartControllerWithin(context.Background(), dir, 30*time.Second); err != nil {
		t.Fatalf("second restart: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "logs", "controller.log.1")); err != nil || !strings.Contains(string(b), "Serving securely") {
		t.Errorf("previous log: %q, %v", b, err)
	}
}

// A controller that dies at once on a bad azure.json (the audit's
// reproduction: restart printed "restarted" and exited 0) fails the
// restart, with the controller's last log entry: every line of its error.
func TestRestartControllerReportsBadAzureJSON(t *testing.T) {
	dir, azureJSON, _ := fakeSandbox(t, "serve")
	b, err := os.ReadFile(azureJSON)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(b), `"loadBalancerSku": "standard"`, `"loadBalancerSku": "premium"`, 1)
	bad = strings.Replace(bad, `"location": "`, `"location": "", "x": "`, 1)
	if bad == string(b) {
		t.Fatalf("azure.json has no loadBalancerSku standard:\n%s", b)
	}
	if err := os.WriteFile(azureJSON, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = RestartControllerWithin(context.Background(), dir, 30*time.Second)
	if err == nil {
		t.Fatal("restart with an invalid azure.json succeeded")
	}
	for _, want := range []string{"exited before serving /healthz", "Cloud provider could not be initialized", `loadBalancerSku: must be one of basic, standard, service; got "premium"`, "location: required"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "Version: fake") {
		t.Errorf("error has more than the last log entry:\n%v", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("took %s to notice the controller exited", d)
	}
}

// A controller that serves /healthz with a credential Azure AD refuses (a
// wrong aadClientSecret: issue 37, item 8) fails the restart with its log
// line naming the refusal, instead of "restarted and serving" while every
// ARM call fails.
func TestRestartControllerWithARefusedSecret(t *testing.T) {
	dir, azureJSON, _ := fakeSandbox(t, "serve")
	b, err := os.ReadFile(azureJSON)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(b), `"aadClientSecret": "`+emulator.DefaultClientSecret+`"`, `"aadClientSecret": "not-the-secret"`, 1)
	if bad == string(b) {
		t.Fatalf("azure.json has no aadClientSecret %s:\n%s", emulator.DefaultClientSecret, b)
	}
	if err := os.WriteFile(azureJSON, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	err = RestartControllerWithin(context.Background(), dir, 30*time.Second)
	if err == nil {
		t.Fatal("restart with a refused secret succeeded")
	}
	for _, want := range []string{"Azure AD refuses its credential", "AADSTS7000215", "list load balancers"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "not-the-secret") {
		t.Errorf("the error shows the secret:\n%v", err)
	}
}

// A controller that runs but never serves fails the restart at the
// deadline, with its last log line; it is left running.
func TestRestartControllerDeadline(t *testing.T) {
	dir, _, _ := fakeSandbox(t, "hang")
	err := RestartControllerWithin(context.Background(), dir, 1500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not answer") || !strings.Contains(err.Error(), "waiting for something that never comes") {
		t.Fatalf("restart of a controller that never serves: %v", err)
	}
	if !running(dir, controllerPIDFile) {
		t.Error("the controller was stopped")
	}
}

func TestLastLogEntry(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ log, want string }{
		{"I1127 00:11:50.1 1 a.go:1] start\nF1127 00:11:50.2 1 main.go:87] bad:\nx: required\ny: required\n\n", "F1127 00:11:50.2 1 main.go:87] bad:\nx: required\ny: required"},
		{"I1127 00:11:50.1 1 a.go:1] start\nE1127 00:11:50.3 1 run.go:72] \"command failed\"\n", "E1127 00:11:50.3 1 run.go:72] \"command failed\""},
		{"Error: unknown flag: --nope\n  usage line\n", "  usage line"},
		{"", "(the log is empty)"},
	} {
		path := filepath.Join(dir, "log")
		if err := os.WriteFile(path, []byte(c.log), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := lastLogEntry(path); got != c.want {
			t.Errorf("lastLogEntry(%q) = %q, want %q", c.log, got, c.want)
		}
	}
}
