package devenv

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/azlb/azlb/internal/pki"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Identities the local API server knows (static tokens). The controller
// identity is the manager's ServiceAccount of the Helm chart (deploy/rbac.yaml
// is its rendering), so it gets exactly the permissions a real deployment
// gets and nothing more; with --use-service-account-credentials it mints the
// tokens of the controllers' own ServiceAccounts.
const (
	AdminUser      = "azlb-admin"
	ControllerUser = "system:serviceaccount:kube-system:azlb-controller-manager"
)

// The API server's Service cluster IP ranges: it is dual-stack, IPv4
// first (the primary family: single-stack Services get IPv4), so that
// Services with ipFamilyPolicy PreferDualStack or RequireDualStack are
// accepted. An IPv6 range may have at most 20 host bits (/108 or longer)
// unless the MultiCIDRServiceAllocator is on; /112 is valid either way.
const (
	ServiceCIDR   = "10.96.0.0/16"
	ServiceCIDRv6 = "fd00:96::/112"
)

// Kube is a local control plane: etcd and kube-apiserver on loopback.
type Kube struct {
	Dir string
	// URL is the API server's https URL.
	URL string
	// AdminKubeconfig and ControllerKubeconfig are kubeconfig files for the
	// two identities.
	AdminKubeconfig, ControllerKubeconfig string

	detach                      bool
	opts                        KubeOptions
	adminToken, controllerToken string
	userTokens                  []string // tokens of opts.Users
	caPEM                       []byte
	procs                       []*exec.Cmd
	exited                      []chan struct{}
}

// KubeOptions say where the binaries are and where their output goes.
type KubeOptions struct {
	// BinDir holds kube-apiserver and etcd (hack/build-tools.sh builds them).
	BinDir string
	// Logs receives both processes' output; nil discards it.
	Logs io.Writer
	// Detach lets etcd and kube-apiserver outlive the calling process (the
	// sandbox): they run in their own session and their pids are written to
	// <dir>/<name>.pid for StopDetached.
	Detach bool
	// Address is where the API server listens and what it advertises
	// (default 127.0.0.1): a local cluster's host address on its nodes'
	// network (internal/localcluster), never a routable one.
	Address string
	// Cluster makes it the API server of a cluster with real nodes: the
	// Node authorizer before RBAC, ServiceAccount admission (the
	// kube-controller-manager creates the accounts), the kubernetes
	// Service's endpoints kept (Address is reachable from the pods), and
	// a client certificate for the kubelets (kubelet-client.crt,
	// O=system:masters; kubelets trust ca.crt).
	Cluster bool
	// Users are further static-token identities; Kubeconfig(name) is
	// each one's kubeconfig.
	Users []User
}

// User is an identity of the local API server.
type User struct {
	// Name is the user name (system:node:NAME for a kubelet); Groups its
	// groups.
	Name   string
	Groups []string
}

// StartKube starts etcd and kube-apiserver under dir and waits until the API
// server is ready.
func StartKube(ctx context.Context, dir string, opts KubeOptions) (*Kube, error) {
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(opts.BinDir, b)); err != nil {
			return nil, fmt.Errorf("%w: %s not found in %s", ErrNoBinaries, b, opts.BinDir)
		}
	}
	logs := opts.Logs
	if logs == nil {
		logs = io.Discard
	}
	if opts.Address == "" {
		opts.Address = "127.0.0.1"
	}
	addr := net.ParseIP(opts.Address)
	if addr == nil {
		return nil, fmt.Errorf("API server address %q is not an IP address", opts.Address)
	}
	k := &Kube{Dir: dir, detach: opts.Detach, opts: opts}
	ok := false
	defer func() {
		if !ok {
			k.Stop()
		}
	}()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]
	if err := k.writePKI(); err != nil {
		return nil, err
	}
	if err := k.start(logs, filepath.Join(opts.BinDir, "etcd"),
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", "http://127.0.0.1:"+strconv.Itoa(etcdClient),
		"--advertise-client-urls", "http://127.0.0.1:"+strconv.Itoa(etcdClient),
		"--listen-peer-urls", "http://127.0.0.1:"+strconv.Itoa(etcdPeer),
		"--initial-advertise-peer-urls", "http://127.0.0.1:"+strconv.Itoa(etcdPeer),
		"--initial-cluster", "default=http://127.0.0.1:"+strconv.Itoa(etcdPeer),
		"--unsafe-no-fsync", "--log-level", "warn",
	); err != nil {
		return nil, err
	}
	k.URL = "https://" + net.JoinHostPort(addr.String(), strconv.Itoa(apiPort))
	if err := k.start(logs, filepath.Join(opts.BinDir, "kube-apiserver"), append([]string{
		"--etcd-servers", "http://127.0.0.1:" + strconv.Itoa(etcdClient),
		"--bind-address", addr.String(), "--advertise-address", addr.String(),
		"--secure-port", strconv.Itoa(apiPort),
		"--tls-cert-file", filepath.Join(dir, "serving.crt"),
		"--tls-private-key-file", filepath.Join(dir, "serving.key"),
		"--client-ca-file", filepath.Join(dir, "ca.crt"),
		// Published in kube-system/extension-apiserver-authentication, which
		// delegating servers (the controller manager's /metrics) read.
		"--requestheader-client-ca-file", filepath.Join(dir, "ca.crt"),
		"--requestheader-allowed-names", "front-proxy-client",
		"--requestheader-username-headers", "X-Remote-User",
		"--requestheader-group-headers", "X-Remote-Group",
		"--requestheader-extra-headers-prefix", "X-Remote-Extra-",
		"--token-auth-file", filepath.Join(dir, "tokens.csv"),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", filepath.Join(dir, "sa.key"),
		"--service-account-signing-key-file", filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range", ServiceCIDR + "," + ServiceCIDRv6, // dual-stack: a range per family
		"--enable-priority-and-fairness=false",
		"--v", "0",
	}, k.clusterArgs()...)...); err != nil {
		return nil, err
	}
	if k.AdminKubeconfig, err = k.writeKubeconfig("admin.kubeconfig", k.adminToken); err != nil {
		return nil, err
	}
	if k.ControllerKubeconfig, err = k.writeKubeconfig("controller.kubeconfig", k.controllerToken); err != nil {
		return nil, err
	}
	for i, u := range opts.Users {
		if _, err := k.writeKubeconfig(kubeconfigName(u.Name), k.userTokens[i]); err != nil {
			return nil, err
		}
	}
	if err := k.waitReady(ctx); err != nil {
		return nil, err
	}
	ok = true
	return k, nil
}

// clusterArgs are the flags that differ between the API server of a
// cluster with nodes (KubeOptions.Cluster) and the suite's, which has none.
func (k *Kube) clusterArgs() []string {
	if !k.opts.Cluster {
		return []string{
			"--authorization-mode", "RBAC",
			"--endpoint-reconciler-type", "none", // a loopback address cannot be advertised
			"--disable-admission-plugins", "ServiceAccount",
		}
	}
	return []string{
		"--authorization-mode", "Node,RBAC",
		"--enable-admission-plugins", "NodeRestriction",
		"--kubelet-client-certificate", filepath.Join(k.Dir, "kubelet-client.crt"),
		"--kubelet-client-key", filepath.Join(k.Dir, "kubelet-client.key"),
		// Node names are not in any DNS: exec, logs and port-forward reach
		// a kubelet at its node's InternalIP.
		"--kubelet-preferred-address-types", "InternalIP",
	}
}

// Kubeconfig is the kubeconfig file of one of KubeOptions.Users.
func (k *Kube) Kubeconfig(user string) string { return filepath.Join(k.Dir, kubeconfigName(user)) }

// CAFile holds the cluster's CA certificate (which signed the serving
// certificate and the kubelet client certificate).
func (k *Kube) CAFile() string { return filepath.Join(k.Dir, "ca.crt") }

func kubeconfigName(user string) string {
	return strings.NewReplacer(":", "-", "/", "-").Replace(user) + ".kubeconfig"
}

// RestConfig is the admin's client configuration.
func (k *Kube) RestConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", k.AdminKubeconfig)
}

// Stop terminates the API server and etcd (in that order) and waits for them.
func (k *Kube) Stop() {
	for i := len(k.procs) - 1; i >= 0; i-- {
		p := k.procs[i]
		if p.Process == nil {
			continue
		}
		_ = p.Process.Signal(syscall.SIGTERM)
		select {
		case <-k.exited[i]:
		case <-time.After(15 * time.Second):
			_ = p.Process.Kill()
			<-k.exited[i]
		}
	}
	k.procs, k.exited = nil, nil
}

func (k *Kube) start(logs io.Writer, bin string, args ...string) error {
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if k.detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", filepath.Base(bin), err)
	}
	if k.detach {
		pidFile := filepath.Join(k.Dir, filepath.Base(bin)+".pid")
		if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o600); err != nil {
			return err
		}
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	k.procs = append(k.procs, cmd)
	k.exited = append(k.exited, done)
	return nil
}

func (k *Kube) waitReady(ctx context.Context) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(k.caPEM)
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(90 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		for i, done := range k.exited {
			select {
			case <-done:
				return fmt.Errorf("%s exited during start-up (see its log)", filepath.Base(k.procs[i].Path))
			default:
			}
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, k.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+k.adminToken)
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("readyz: %s", resp.Status)
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("kube-apiserver not ready after 90s: %w", last)
}

func (k *Kube) writeKubeconfig(name, token string) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: k.URL, CertificateAuthorityData: k.caPEM}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "user"}
	cfg.CurrentContext = "local"
	path := filepath.Join(k.Dir, name)
	return path, clientcmd.WriteToFile(*cfg, path)
}

// writePKI writes a CA, the API server's serving certificate, the service
// account signing key and the static token file.
func (k *Kube) writePKI() error {
	const validity = 365 * 24 * time.Hour
	ca, err := pki.NewAuthority("azlb-local-ca", validity)
	if err != nil {
		return err
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.ParseIP("10.96.0.1")}
	if a := net.ParseIP(k.opts.Address); a != nil && !a.IsLoopback() {
		ips = append(ips, a)
	}
	serving, err := ca.Serving("kube-apiserver",
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}, ips, validity)
	if err != nil {
		return err
	}
	k.caPEM = serving.CAPEM
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	k.adminToken, k.controllerToken = randomToken(), randomToken()
	tokens := fmt.Sprintf("%s,%s,admin-uid,\"system:masters\"\n%s,%s,controller-uid,\"system:serviceaccounts,system:serviceaccounts:kube-system\"\n",
		k.adminToken, AdminUser, k.controllerToken, ControllerUser)
	for i, u := range k.opts.Users {
		tok := randomToken()
		k.userTokens = append(k.userTokens, tok)
		tokens += fmt.Sprintf("%s,%s,user-%d-uid,\"%s\"\n", tok, u.Name, i, strings.Join(u.Groups, ","))
	}
	files := map[string][]byte{
		"ca.crt":      k.caPEM,
		"serving.crt": serving.CertPEM,
		"serving.key": serving.KeyPEM,
		"sa.key":      pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}),
		"tokens.csv":  []byte(tokens),
	}
	if k.opts.Cluster {
		// The API server's identity towards the kubelets (exec, logs).
		cert, key, err := ca.Client("kube-apiserver-kubelet-client", []string{"system:masters"}, validity)
		if err != nil {
			return err
		}
		files["kubelet-client.crt"], files["kubelet-client.key"] = cert, key
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(k.Dir, name), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	return hex.EncodeToString(b)
}

// freePorts reserves n distinct loopback ports (released before use, so a
// race with another process is possible but unlikely).
func freePorts(n int) ([]int, error) {
	var out []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// ErrNoBinaries is returned when kube-apiserver or etcd is missing.
var ErrNoBinaries = errors.New("kube-apiserver or etcd missing (build them with hack/build-tools.sh)")

// StopDetached stops the processes a detached StartKube left running under
// dir, API server first.
func StopDetached(dir string) {
	for _, name := range []string{"kube-apiserver", "etcd"} {
		StopPIDFile(filepath.Join(dir, name+".pid"))
	}
}

// StopPIDFile sends SIGTERM to the process in a pid file, waits up to 15s
// for it to exit (SIGKILL after that) and removes the file.
func StopPIDFile(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	defer os.Remove(path)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return
	}
	if syscall.Kill(pid, syscall.SIGTERM) != nil {
		return
	}
	for i := 0; i < 150; i++ {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond) // polling a foreign process: no channel to wait on
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}
