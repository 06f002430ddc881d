package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"k8s.io/klog/v2"

	"github.com/azlb/azlb/internal/lbclass"
	"github.com/azlb/azlb/internal/verify"
)

// Exit codes of azlb verify.
const (
	verifyClean = 0 // Azure holds what the documentation says
	verifyDrift = 1 // at least one difference
	verifyError = 2 // bad usage, or the cluster or Azure could not be read
)

// runVerify is `azlb verify`: it prints every difference between Azure and
// the documented behaviour (docs/verify.md) and exits 1 when there is one.
func runVerify(ctx context.Context, args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(errOut)
	kubeconfig, cloudConfig := clusterFlags(fs)
	class := classFlag(fs)
	clusterName := clusterNameFlag(fs)
	timeout := fs.Duration("timeout", 2*time.Minute, "give up reading the cluster and Azure after this long")
	quiet := fs.Bool("quiet", false, "print only the summary line")
	if err := fs.Parse(args); err != nil {
		return verifyError
	}
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	report, err := verifyOnce(ctx, *kubeconfig, *cloudConfig, *clusterName, *class)
	if err != nil {
		fmt.Fprintf(errOut, "azlb verify: %v\n", err)
		return verifyError
	}
	if *quiet {
		err = writeLine(out, report.Summary())
	} else {
		err = report.Write(out)
	}
	if err != nil {
		return verifyError
	}
	if !report.Clean() {
		return verifyDrift
	}
	return verifyClean
}

func verifyOnce(ctx context.Context, kubeconfig, cloudConfig, clusterName string, class lbclass.Class) (*verify.Report, error) {
	kube, err := kubeClient(kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg, err := loadConfig(ctx, cloudConfig, clusterName, kube)
	if err != nil {
		return nil, err
	}
	clients, err := verify.NewReadOnlyClients(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer clients.Close()
	return verify.RunClass(ctx, cfg, clients, kube, class)
}

func writeLine(w io.Writer, s string) error {
	_, err := fmt.Fprintln(w, s)
	return err
}
