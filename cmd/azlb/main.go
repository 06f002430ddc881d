// Command azlb is the azlb command-line tool:
//
//	azlb sandbox up [--dir .sandbox] [--bin bin] [--variant multi|nic|container|basic|nodes]
//	                                                                 start the whole system on this machine
//	azlb sandbox restart [--dir .sandbox] [--timeout 1m]             restart its controller (azure.json read afresh),
//	                                                                 wait until it serves and an ARM call of it succeeds;
//	                                                                 exit 1 with its last log entry if it exits first,
//	                                                                 or with the line of Azure AD's refusal of its secret
//	azlb sandbox down [--dir .sandbox]                               stop it
//	azlb sandbox egress-curl [--dir .sandbox] POD [URL]              a pod's HTTP GET through the emulator's data plane,
//	                                                                 leaving from its egress identity's public IP
//	azlb sandbox register-feature [--dir .sandbox] NAMESPACE/NAME    register a subscription feature in the emulated
//	                                                                 subscription (az feature register + az provider register)
//	azlb status [--kubeconfig F] [--cloud-config F] [--load-balancer-class C] [--cluster-name N]
//	                                                                 show load balancers, pools, admin state,
//	                                                                 each Service's sources in the NSG
//	                                                                 and the service gateway's pods
//	azlb verify [--kubeconfig F] [--cloud-config F] [--load-balancer-class C] [--cluster-name N] [--timeout D] [--quiet]
//	                                                                 every difference between Azure and the
//	                                                                 documented behaviour; exit 1 on drift
//	azlb vm start|deallocate|powerOff|restart NODE [--kubeconfig F] [--cloud-config F]
//	                                                                 a power action on a node's VM (ARM)
//	azlb node-agent --nodes F [--kubeconfig F] [--cloud-config F]    simulated kubelets and kube-proxies (the sandbox runs it)
//
// Without flags, status, verify, vm and node-agent read the sandbox's
// .sandbox/kubeconfig and .sandbox/azure.json. --load-balancer-class is the
// class the controller serves (its flag of that name, docs/verify.md).
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/cloudconfig"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/lbclass"
	"github.com/azlb/azlb/internal/sandbox"
	"github.com/azlb/azlb/internal/status"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  azlb sandbox up [--dir .sandbox] [--bin bin] [--rbac deploy/rbac.yaml] [--secure-port 10258] [--variant multi|nic|container|basic|nodes]
  azlb sandbox restart [--dir .sandbox] [--timeout 1m]
  azlb sandbox down [--dir .sandbox]
  azlb sandbox egress-curl [--dir .sandbox] [NAMESPACE/]POD [URL]
  azlb sandbox register-feature [--dir .sandbox] NAMESPACE/NAME
  azlb status [--kubeconfig FILE] [--cloud-config FILE] [--load-balancer-class CLASS] [--cluster-name NAME]
  azlb verify [--kubeconfig FILE] [--cloud-config FILE] [--load-balancer-class CLASS] [--cluster-name NAME] [--timeout 2m] [--quiet]
  azlb vm start|deallocate|powerOff|restart NODE [--kubeconfig FILE] [--cloud-config FILE]
  azlb node-agent --nodes FILE [--kubeconfig FILE] [--cloud-config FILE] [--interval 1s]
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch {
	case args[0] == "sandbox" && len(args) > 1 && args[1] == "up":
		err = sandboxUp(ctx, args[2:], stdout)
	case args[0] == "sandbox" && len(args) > 1 && args[1] == "down":
		err = sandboxDown(args[2:], stdout)
	case args[0] == "sandbox" && len(args) > 1 && args[1] == "restart":
		err = sandboxRestart(ctx, args[2:], stdout)
	case args[0] == "sandbox" && len(args) > 1 && args[1] == "egress-curl":
		err = sandboxEgressCurl(ctx, args[2:], stdout)
	case args[0] == "sandbox" && len(args) > 1 && args[1] == "register-feature":
		err = sandboxRegisterFeature(ctx, args[2:], stdout)
	case args[0] == "status":
		err = showStatus(ctx, args[1:], stdout)
	case args[0] == "verify":
		return runVerify(ctx, args[1:], stdout, stderr)
	case args[0] == "vm" && len(args) > 2:
		err = vmAction(ctx, args[1], args[2:], stdout)
	case args[0] == "node-agent":
		err = nodeAgent(ctx, args[1:])
	default:
		fmt.Fprint(stderr, usage)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "azlb: %v\n", err)
		return 1
	}
	return 0
}

func sandboxUp(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("sandbox up", flag.ContinueOnError)
	dir := fs.String("dir", ".sandbox", "directory for the sandbox's files and logs")
	bin := fs.String("bin", "bin", "directory holding the built binaries")
	rbac := fs.String("rbac", filepath.Join("deploy", "rbac.yaml"), "RBAC manifest the controller runs with")
	port := fs.Int("secure-port", 10258, "controller manager /metrics and /healthz port on 127.0.0.1")
	variant := fs.String("variant", sandbox.VariantMulti, "the demo cluster: "+sandbox.VariantMulti+" (two Standard load balancers, IP-based pools), "+
		sandbox.VariantNIC+" (NIC-based pools over emulated VMs), "+sandbox.VariantContainer+" (pod-based load balancing through a service gateway) or "+
		sandbox.VariantBasic+" (a cluster on retired Basic load balancers, to migrate) or "+sandbox.VariantNodes+" (3 real nodes: containerd, kubelet, kube-proxy; needs root)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	binAbs, err := filepath.Abs(*bin)
	if err != nil {
		return err
	}
	if err := sandbox.Up(ctx, sandbox.Options{Dir: abs, BinDir: binAbs, RBACFile: *rbac, SecurePort: *port, Out: out, Variant: *variant}); err != nil {
		if errors.Is(err, sandbox.ErrAlreadyRunning) {
			return err // the running sandbox is not this command's to stop
		}
		sandbox.Down(abs)
		return fmt.Errorf("sandbox: %w (processes stopped; logs in %s)", err, filepath.Join(*dir, "logs"))
	}
	switch *variant {
	case sandbox.VariantNIC:
		fmt.Fprintf(out, nicHelp, *dir)
		return nil
	case sandbox.VariantBasic:
		fmt.Fprintf(out, basicHelp, *dir)
		return nil
	case sandbox.VariantNodes:
		fmt.Fprintf(out, nodesHelp, *dir)
		return nil
	case sandbox.VariantContainer:
		fmt.Fprintf(out, `
The pod-based (Container Load Balancer) sandbox is running. Try:

  export KUBECONFIG=%[1]s/kubeconfig
  bin/kubectl get svc -n demo                  # external IPs from the emulated Azure
  bin/azlb status                              # each Service's load balancer; the gateway's pods per node; egress identity team-a
  bin/azlb sandbox egress-curl egress-client   # "curl" from pod demo/egress-client to a loopback server: it sees team-a's public IP
  bin/kubectl -n demo delete endpointslice web-1   # web's pods leave the gateway
  bin/azlb status

Files: %[1]s (azure.json, kubeconfig, emulator-ca.pem, logs/). Stop everything with: make sandbox-down
`, *dir)
		return nil
	}
	fmt.Fprintf(out, `
The sandbox is running. Try:

  export KUBECONFIG=%[1]s/kubeconfig
  bin/kubectl get svc -n demo                  # external IPs from the emulated Azure
  bin/azlb status                              # load balancers, pools, backend admin state
  bin/kubectl taint node aks-pool1-1 node.kubernetes.io/out-of-service=nodeshutdown:NoExecute
  bin/azlb status                              # aks-pool1-1 is Down in every pool
  bin/kubectl taint node aks-pool1-1 node.kubernetes.io/out-of-service-   # back to None

Files: %[1]s (azure.json, kubeconfig, emulator-ca.pem, logs/). Stop everything with: make sandbox-down
`, *dir)
	return nil
}

// basicHelp is what to do with the Basic sandbox.
const basicHelp = `
The Basic sandbox is running: a cluster an earlier cloud provider set up with
Basic load balancers (retired on 2025-09-30). azure.json says
loadBalancerSku basic, so azlb-controller-manager refused to start (above).
Migrate it:

  export KUBECONFIG=%[1]s/kubeconfig
  bin/kubectl get svc -n demo                  # the IPs the Basic load balancers gave the Services
  bin/azlb status                              # load balancers kubernetes and kubernetes-internal, SKU Basic
  sed -i 's/"loadBalancerSku": "basic"/"loadBalancerSku": "standard"/' %[1]s/azure.json
  bin/azlb sandbox restart                     # the controller starts and migrates to Standard
  bin/azlb status                              # Standard load balancers, the nodes in their pools
  bin/kubectl get svc -n demo                  # the same IPs
  bin/kubectl get events -n demo               # BasicLoadBalancerMigration, PublicIPMadeStatic, PublicIPUpgraded
  grep 'Basic load balancer migration' %[1]s/logs/controller.log

See docs/migration.md. Stop everything with: make sandbox-down
`

func sandboxRestart(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("sandbox restart", flag.ContinueOnError)
	dir := fs.String("dir", ".sandbox", "directory of the sandbox")
	timeout := fs.Duration("timeout", sandbox.ControllerStartTimeout, "how long to wait for the controller to serve /healthz and make its first successful ARM call")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := sandbox.RestartControllerWithin(ctx, *dir, *timeout); err != nil {
		return err
	}
	fmt.Fprintf(out, "azlb-controller-manager restarted and serving (log: %s)\n", filepath.Join(*dir, "logs", "controller.log"))
	return nil
}

// sandboxRegisterFeature registers a subscription feature in the sandbox's
// emulated subscription (internal/sandbox.RegisterFeature).
func sandboxRegisterFeature(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("sandbox register-feature", flag.ContinueOnError)
	dir := fs.String("dir", ".sandbox", "directory of the sandbox")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("sandbox register-feature takes one feature name (NAMESPACE/NAME), got %d arguments", fs.NArg())
	}
	return sandbox.RegisterFeature(ctx, *dir, fs.Arg(0), out)
}

// sandboxEgressCurl sends a sandbox pod's HTTP GET through the emulator's
// data plane (internal/sandbox.EgressCurl).
func sandboxEgressCurl(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("sandbox egress-curl", flag.ContinueOnError)
	dir := fs.String("dir", ".sandbox", "directory of the sandbox")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return fmt.Errorf("usage: azlb sandbox egress-curl [--dir .sandbox] [NAMESPACE/]POD [http://LOOPBACK-IP:PORT/] (without URL: a loopback server that answers with the source address it sees)")
	}
	return sandbox.EgressCurl(ctx, *dir, fs.Arg(0), fs.Arg(1), out)
}

func sandboxDown(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("sandbox down", flag.ContinueOnError)
	dir := fs.String("dir", ".sandbox", "directory of the sandbox")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sandbox.Down(*dir)
	fmt.Fprintln(out, "sandbox stopped")
	return nil
}

func showStatus(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", filepath.Join(".sandbox", sandbox.KubeconfigFile), "kubeconfig of the cluster (\"\" to skip Kubernetes)")
	cloudConfig := fs.String("cloud-config", filepath.Join(".sandbox", sandbox.AzureJSONFile), "azure.json")
	class := classFlag(fs)
	clusterName := clusterNameFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	var cs kubernetes.Interface
	if *kubeconfig != "" {
		var err error
		if cs, err = kubeClient(*kubeconfig); err != nil {
			return err
		}
	}
	cfg, err := loadConfig(ctx, *cloudConfig, *clusterName, cs)
	if err != nil {
		return err
	}
	clients, err := azure.NewClients(ctx, cfg, azure.ClientOptions{Source: "azlb-status"})
	if err != nil {
		return err
	}
	defer clients.Close()
	lbRG := cfg.LoadBalancerResourceGroup
	if lbRG == "" {
		lbRG = cfg.ResourceGroup
	}
	snap, err := status.Collect(ctx, clients, lbRG, cfg.ResourceGroup, cs)
	if err != nil {
		return err
	}
	snap.Policy = backendpool.PolicyFromConfig(cfg) // the configured loadBalancerAdminStateTaints
	snap.Class = *class
	if cfg.PodIPMode() {
		if err := status.CollectGateway(ctx, clients, cfg.ResourceGroup, snap); err != nil {
			return err
		}
	} else {
		nsgRG := cmp.Or(cfg.SecurityGroupResourceGroup, cfg.ResourceGroup)
		if err := status.CollectSecurityGroup(ctx, clients, nsgRG, cfg.SecurityGroupName, snap); err != nil {
			return err
		}
		if err := status.CollectPrivateLinks(ctx, clients, cmp.Or(cfg.PrivateLinkServiceResourceGroup, cfg.ResourceGroup), cfg.ClusterName, snap); err != nil {
			return err
		}
	}
	for _, w := range cfg.UnknownFieldWarnings() {
		fmt.Fprintf(out, "WARNING azure.json: %s\n", w)
	}
	return status.Render(out, snap)
}

// clusterNameFlag registers --cluster-name of status and verify: the
// controller manager's --cluster-name, which names the cluster when
// azure.json has no clusterName (CAPZ passes it so).
func clusterNameFlag(fs *flag.FlagSet) *string {
	return fs.String("cluster-name", "", "the controller manager's --cluster-name, when azure.json has no clusterName (both set and different: an error, as for the controller)")
}

// loadConfig reads azure.json, with the Secret its cloudConfigType names
// (through kube; nil: no Kubernetes client, a warning of the result says
// the Secret was not read), and the cluster name the controller's
// --cluster-name gives, as the controller applies them.
func loadConfig(ctx context.Context, path, clusterName string, kube kubernetes.Interface) (*config.Config, error) {
	res, err := cloudconfig.Load(ctx, path, kube)
	if err != nil {
		return nil, err
	}
	cfg := res.Config
	if kube == nil && res.Note != "" {
		cfg.AddWarning("cloudConfigType " + cfg.CloudConfigType + ": " + res.Note)
	}
	if err := cfg.UseClusterNameFlag(clusterName, clusterName != ""); err != nil {
		return nil, err
	}
	return cfg, nil
}

// classFlag registers --load-balancer-class of status and verify: the
// load-balancer class azlb-controller-manager serves, checked as the
// controller checks its flag of that name (lbclass.Parse).
func classFlag(fs *flag.FlagSet) *lbclass.Class {
	class := new(lbclass.Class)
	fs.Func("load-balancer-class", "the load-balancer `class` the controller serves (its --load-balancer-class); "+
		"empty: the LoadBalancer Services without spec.loadBalancerClass", func(s string) error {
		c, err := lbclass.Parse(s)
		*class = c
		return err
	})
	return class
}

const nodesHelp = `
The real-nodes sandbox is running: 3 nodes (kubelet, containerd, kube-proxy), azlb as their cloud
controller manager, the emulated load balancer carrying traffic to them. Try:

  export KUBECONFIG=%[1]s/kubeconfig
  bin/kubectl get nodes -o wide                # initialized by azlb from their emulated VMs
  WEB=$(bin/kubectl get svc -n demo web -o jsonpath='{.status.loadBalancer.ingress[0].ip}')
  curl http://$WEB/clientip                    # the pod sees your address (externalTrafficPolicy Local)
  curl http://$WEB/hostname                    # the pod that served it
  bin/kubectl -n demo scale deploy web --replicas=1   # the nodes left without a pod fail their probe
  bin/azlb status

Files: %[1]s (azure.json, kubeconfig, emulator-ca.pem, logs/, cluster/logs/). Stop everything with: make sandbox-down
`
