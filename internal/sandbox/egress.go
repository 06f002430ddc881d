package sandbox

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/servicegateway"
)

// The container demo's egress pod: labelled with an egress identity, it
// leaves through the identity's NAT gateway on the service gateway.
const (
	EgressDemoPod      = "egress-client"
	EgressDemoIdentity = "team-a"
	egressDemoNode     = "aks-nodepool1-1"
	egressDemoPodIP    = "10.244.1.30"
	egressWaitTimeout  = 90 * time.Second
)

// EgressAnswer is what a pod's request through the emulator's data plane
// got (the emulator's POST /_emulator/egress).
type EgressAnswer struct {
	Pod     string `json:"pod"`
	Service string `json:"service"`
	Source  string `json:"source"`
	Status  int    `json:"status"`
	Body    string `json:"body"`
}

// createEgressPod creates the demo's egress pod and gives it its IP, as
// the scheduler and the kubelet would (the sandbox runs neither).
func createEgressPod(ctx context.Context, cs kubernetes.Interface) error {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: DemoNamespace, Name: EgressDemoPod,
			Labels: map[string]string{servicegateway.EgressLabel: EgressDemoIdentity, "app": EgressDemoPod}},
		Spec: v1.PodSpec{NodeName: egressDemoNode, Containers: []v1.Container{{Name: "curl", Image: "sandbox.invalid/curl"}}},
	}
	created, err := cs.CoreV1().Pods(DemoNamespace).Create(ctx, p, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = cs.CoreV1().Pods(DemoNamespace).Get(ctx, EgressDemoPod, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("create pod %s/%s: %w", DemoNamespace, EgressDemoPod, err)
	}
	if created.Status.PodIP == egressDemoPodIP {
		return nil
	}
	created.Status.Phase = v1.PodRunning
	created.Status.PodIP = egressDemoPodIP
	created.Status.PodIPs = []v1.PodIP{{IP: egressDemoPodIP}}
	if _, err := cs.CoreV1().Pods(DemoNamespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("set the IP of pod %s/%s: %w", DemoNamespace, EgressDemoPod, err)
	}
	return nil
}

// readyEgress creates the egress pod, waits until the emulator routes its
// outbound flows through its identity's NAT gateway, and sends one request
// from it to a loopback server that answers with the source address it
// sees.
func (v *variantRun) readyEgress(ctx context.Context) error {
	if err := createEgressPod(ctx, v.cs); err != nil {
		return err
	}
	ctl, err := newEmulatorControl(v.env.Config.ResourceManagerEndpoint, v.env.Config.CACertFile)
	if err != nil {
		return err
	}
	defer ctl.close()
	route, err := ctl.waitEgressRoute(ctx, egressDemoPodIP, EgressDemoIdentity, egressWaitTimeout)
	if err != nil {
		return fmt.Errorf("pod %s/%s (%s=%s) got no outbound route through its identity: %w", DemoNamespace, EgressDemoPod, servicegateway.EgressLabel, EgressDemoIdentity, err)
	}
	v.step("egress identity %s set up: public IP, NAT gateway on the service gateway, outbound service; pod %s/%s leaves from %s",
		EgressDemoIdentity, DemoNamespace, EgressDemoPod, route.Source)
	ans, err := ctl.curlThroughServer(ctx, egressDemoPodIP, "")
	if err != nil {
		return err
	}
	if got := strings.TrimSpace(ans.Body); got != sourceLine(route.Source) {
		return fmt.Errorf("the loopback server answered the pod %q, want %q", got, sourceLine(route.Source))
	}
	v.step("pod %s/%s reached a loopback server, which saw it come from %s", DemoNamespace, EgressDemoPod, ans.Source)
	return nil
}

// EgressCurl plays "curl URL" in a sandbox pod ("namespace/name" or a
// name in the demo namespace): the request goes through the emulator's
// data plane and leaves from the pod's outbound source (its egress
// identity's public IP). Without URL it starts a loopback server for the
// while that answers with the source address it sees, and sends the
// request there. It prints the answer and where the flow left from.
func EgressCurl(ctx context.Context, dir, podRef, target string, out io.Writer) error {
	ns, name, ok := strings.Cut(podRef, "/")
	if !ok {
		ns, name = DemoNamespace, podRef
	}
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, KubeconfigFile))
	if err != nil {
		return fmt.Errorf("the sandbox's kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	ip := pod.Status.PodIP
	for _, a := range pod.Status.PodIPs {
		if addr, err := netip.ParseAddr(a.IP); err == nil && addr.Is4() {
			ip = a.IP
			break
		}
	}
	if ip == "" {
		return fmt.Errorf("pod %s/%s has no IP yet", ns, name)
	}
	cfg, err := config.LoadFile(filepath.Join(dir, AzureJSONFile))
	if err != nil {
		return err
	}
	ctl, err := newEmulatorControl(cfg.ResourceManagerEndpoint, cfg.CACertFile)
	if err != nil {
		return err
	}
	defer ctl.close()
	ans, err := ctl.curlThroughServer(ctx, ip, target)
	if err != nil {
		return fmt.Errorf("pod %s/%s (%s): %w", ns, name, ip, err)
	}
	fmt.Fprint(out, ans.Body)
	if !strings.HasSuffix(ans.Body, "\n") {
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "(HTTP %d; pod %s/%s %s left from %s, the public IP of outbound service %s's NAT gateway)\n", ans.Status, ns, name, ip, ans.Source, ans.Service)
	return nil
}

// sourceLine is what the loopback server answers.
func sourceLine(source string) string { return "source address: " + source }

// curlThroughServer sends the pod's GET to target; with target "" to a
// loopback server started for this request that answers with the source
// address of the connection.
func (c *emulatorControl) curlThroughServer(ctx context.Context, pod, target string) (EgressAnswer, error) {
	if target == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return EgressAnswer{}, err
		}
		srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			host, _, _ := net.SplitHostPort(r.RemoteAddr)
			fmt.Fprintln(w, sourceLine(host))
		})}
		go func() { _ = srv.Serve(ln) }()
		defer func() { _ = srv.Close() }()
		target = "http://" + ln.Addr().String() + "/"
	}
	return c.egress(ctx, pod, target)
}

// emulatorControl calls the emulator's control API (/_emulator/).
type emulatorControl struct {
	base string
	hc   *http.Client
}

func newEmulatorControl(endpoint, caFile string) (*emulatorControl, error) {
	if endpoint == "" {
		return nil, fmt.Errorf("azure.json has no resourceManagerEndpoint: not an emulator sandbox")
	}
	tr := &http.Transport{}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("the emulator's CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the emulator's CA %s holds no certificate", caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &emulatorControl{base: strings.TrimRight(endpoint, "/") + "/_emulator", hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}, nil
}

func (c *emulatorControl) close() { c.hc.CloseIdleConnections() }

// call sends a control request and decodes a 200 answer into out; another
// status is an error carrying the emulator's message.
func (c *emulatorControl) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
			return fmt.Errorf("emulator %s %s: %d: %s", method, path, resp.StatusCode, e.Error.Message)
		}
		return fmt.Errorf("emulator %s %s: %d: %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return json.Unmarshal(b, out)
}

// egress sends one HTTP GET from the pod to target through the data plane.
func (c *emulatorControl) egress(ctx context.Context, pod, target string) (EgressAnswer, error) {
	var a EgressAnswer
	err := c.call(ctx, http.MethodPost, "/egress", map[string]string{"pod": pod, "url": target}, &a)
	return a, err
}

// waitEgressRoute waits until the pod's outbound flows leave through the
// outbound service named service.
func (c *emulatorControl) waitEgressRoute(ctx context.Context, pod, service string, timeout time.Duration) (EgressAnswer, error) {
	var a EgressAnswer
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		a = EgressAnswer{}
		if last = c.call(ctx, http.MethodGet, "/egress?pod="+pod, nil, &a); last != nil {
			return false, nil
		}
		return a.Service == service, nil
	})
	if err != nil && last != nil {
		err = fmt.Errorf("%w (last: %w)", err, last)
	} else if err != nil {
		err = fmt.Errorf("%w (it leaves through %q)", err, a.Service)
	}
	return a, err
}
