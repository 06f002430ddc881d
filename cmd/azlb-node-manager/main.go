package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/imds"
	"github.com/azlb/azlb/internal/version"
)

// options are the command's flags.
type options struct {
	nodeName, kubeconfig     string
	imdsEndpoint, imdsCAFile string
	statusFrequency          time.Duration
	showVersion              bool
}

func main() {
	o := options{}
	fs := flag.NewFlagSet("azlb-node-manager", flag.ExitOnError)
	klog.InitFlags(fs)
	fs.StringVar(&o.nodeName, "node-name", os.Getenv("NODE_NAME"), "Name of the node this process runs on (default $NODE_NAME; the DaemonSet sets it from spec.nodeName).")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Kubeconfig file; empty: the pod's in-cluster ServiceAccount.")
	fs.StringVar(&o.imdsEndpoint, "imds-endpoint", imds.DefaultEndpoint, "Base URL of the Instance Metadata Service (the azlb emulator: https://HOST:PORT/imds/SUB/RG/VM).")
	fs.StringVar(&o.imdsCAFile, "imds-ca-file", "", "CA certificate (PEM) of an https --imds-endpoint (the emulator's).")
	fs.DurationVar(&o.statusFrequency, "node-status-update-frequency", time.Minute, "How often the node's addresses are compared with instance metadata and patched.")
	fs.BoolVar(&o.showVersion, "version", false, "Print the version and exit.")
	_ = fs.Parse(os.Args[1:])
	if o.showVersion {
		fmt.Println(version.String("azlb-node-manager"))
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := start(ctx, o); err != nil {
		klog.ErrorS(err, "azlb-node-manager failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}

// start builds the clients from the options and runs until ctx ends.
func start(ctx context.Context, o options) error {
	if o.nodeName == "" {
		return errors.New("--node-name (or $NODE_NAME) is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.UserAgent = "azlb-node-manager/" + o.nodeName
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	hc, err := imdsHTTPClient(o.imdsCAFile)
	if err != nil {
		return err
	}
	klog.InfoS("Starting", "version", version.String("azlb-node-manager"), "node", o.nodeName, "imds", o.imdsEndpoint)
	cloud := &imds.Cloud{Node: &imds.Instances{NodeName: o.nodeName, Client: &imds.Client{Endpoint: o.imdsEndpoint, HTTP: hc}}}
	return run(ctx, cs, o.nodeName, cloud, o.statusFrequency, clock.RealClock{})
}

// imdsHTTPClient never uses a proxy (IMDS must be reached directly) and
// trusts caFile when given.
func imdsHTTPClient(caFile string) (*http.Client, error) {
	tr := &http.Transport{Proxy: nil, MaxIdleConns: 2, IdleConnTimeout: 90 * time.Second}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--imds-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--imds-ca-file %s: no certificate", caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}, nil
}
