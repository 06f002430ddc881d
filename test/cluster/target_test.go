// Package cluster is the black-box suite `make test-e2e-cluster` runs:
// azlb's common scenarios against whatever cluster KUBECONFIG names and
// whatever Azure the azure.json (AZLB_E2E_CLOUD_CONFIG) or the AZURE_*
// variables name, by default the running sandbox (make sandbox). It reads
// Azure only through the Azure SDK and the cluster only through the
// Kubernetes API, creates everything in a namespace of its own (and, in
// Azure, one public IP named azlb-e2e-*) and deletes it afterwards. See
// docs/install.md, "Check a cluster before switching".
package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// The variables the suite reads.
const (
	// envCloudConfig names an azure.json (the controller's own): the
	// subscription, resource group, credential and, for an emulator,
	// endpoints and CA bundle. Default: the sandbox's, unless
	// AZURE_SUBSCRIPTION_ID is set.
	envCloudConfig = "AZLB_E2E_CLOUD_CONFIG"
	// envWrites is the opt-in: the name of the resource group the suite
	// may write to (through azlb, and its own public IP). Required unless
	// the ARM endpoint is an emulator on a loopback address.
	envWrites = "AZLB_E2E_RESOURCE_GROUP_WRITES"
	// envAzlb is the azlb CLI for azlb verify (default bin/azlb).
	envAzlb = "AZLB_E2E_AZLB"
	// envSkipTaint skips the one scenario that changes an object the
	// suite did not create (a taint on a node, removed afterwards).
	envSkipTaint = "AZLB_E2E_SKIP_NODE_TAINT"
)

// target is the cluster and the Azure under test.
type target struct {
	kubeconfig  string
	cloudConfig string // the azure.json file, if one was given
	sub, rg     string
	location    string
	tenant      string
	clientID    string
	secret      string
	armEndpoint string
	aadHost     string
	caFile      string
	nsgName     string
	nsgRG       string
	clusterName string
	// emulator: the ARM endpoint is on a loopback address (the sandbox).
	emulator bool
}

// azureJSON holds the azure.json fields the suite reads (the file may have
// many more).
type azureJSON struct {
	Cloud                        string `json:"cloud"`
	TenantID                     string `json:"tenantId"`
	SubscriptionID               string `json:"subscriptionId"`
	AADClientID                  string `json:"aadClientId"`
	AADClientSecret              string `json:"aadClientSecret"`
	ResourceGroup                string `json:"resourceGroup"`
	Location                     string `json:"location"`
	SecurityGroupName            string `json:"securityGroupName"`
	SecurityGroupResourceGroup   string `json:"securityGroupResourceGroup"`
	ResourceManagerEndpoint      string `json:"resourceManagerEndpoint"`
	ActiveDirectoryAuthorityHost string `json:"activeDirectoryAuthorityHost"`
	CACertFile                   string `json:"caCertFile"`
	ClusterName                  string `json:"clusterName"`
}

// loadTarget reads the target from the environment. The sandbox is the
// default: its kubeconfig and azure.json under .sandbox.
func loadTarget(root string) (*target, error) {
	tg := &target{kubeconfig: os.Getenv("KUBECONFIG")}
	sandboxDir := filepath.Join(root, ".sandbox")
	if tg.kubeconfig == "" {
		tg.kubeconfig = filepath.Join(sandboxDir, "kubeconfig")
	}
	if _, err := os.Stat(tg.kubeconfig); err != nil {
		return nil, fmt.Errorf("no cluster: KUBECONFIG is unset and there is no sandbox (%s); start one with make sandbox, or set KUBECONFIG", tg.kubeconfig)
	}
	tg.cloudConfig = os.Getenv(envCloudConfig)
	if tg.cloudConfig == "" && os.Getenv("AZURE_SUBSCRIPTION_ID") == "" {
		tg.cloudConfig = filepath.Join(sandboxDir, "azure.json")
	}
	var cfg azureJSON
	if tg.cloudConfig != "" {
		b, err := os.ReadFile(tg.cloudConfig)
		if err != nil {
			return nil, fmt.Errorf("%s: %w (set %s, or the AZURE_* variables)", envCloudConfig, err, envCloudConfig)
		}
		if err := json.Unmarshal(b, &cfg); err != nil {
			return nil, fmt.Errorf("%s: %w", tg.cloudConfig, err)
		}
	}
	// The AZURE_* variables of the Azure cloud provider's e2e suite win.
	pick := func(env, fromFile string) string {
		if v := os.Getenv(env); v != "" {
			return v
		}
		return fromFile
	}
	tg.sub = pick("AZURE_SUBSCRIPTION_ID", cfg.SubscriptionID)
	tg.tenant = pick("AZURE_TENANT_ID", cfg.TenantID)
	tg.clientID = pick("AZURE_CLIENT_ID", cfg.AADClientID)
	tg.secret = pick("AZURE_CLIENT_SECRET", cfg.AADClientSecret)
	tg.rg = pick("AZURE_RESOURCE_GROUP", cfg.ResourceGroup)
	tg.location = pick("AZURE_LOCATION", cfg.Location)
	tg.armEndpoint, tg.aadHost, tg.caFile = cfg.ResourceManagerEndpoint, cfg.ActiveDirectoryAuthorityHost, cfg.CACertFile
	tg.nsgName, tg.nsgRG = cfg.SecurityGroupName, cfg.SecurityGroupResourceGroup
	if tg.nsgRG == "" {
		tg.nsgRG = tg.rg
	}
	tg.clusterName = cfg.ClusterName
	if tg.clusterName == "" {
		tg.clusterName = "kubernetes"
	}
	for name, v := range map[string]string{"subscription (AZURE_SUBSCRIPTION_ID)": tg.sub, "tenant (AZURE_TENANT_ID)": tg.tenant,
		"client id (AZURE_CLIENT_ID)": tg.clientID, "client secret (AZURE_CLIENT_SECRET)": tg.secret, "resource group (AZURE_RESOURCE_GROUP)": tg.rg} {
		if v == "" {
			return nil, fmt.Errorf("no %s: set it, or %s to an azure.json with a client secret", name, envCloudConfig)
		}
	}
	if tg.armEndpoint != "" {
		u, err := url.Parse(tg.armEndpoint)
		if err != nil {
			return nil, fmt.Errorf("resourceManagerEndpoint %q: %w", tg.armEndpoint, err)
		}
		if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsLoopback() {
			tg.emulator = true
		}
	}
	if !tg.emulator && os.Getenv(envWrites) != tg.rg {
		return nil, fmt.Errorf("refusing to run: the suite creates Services (azlb then writes load balancer rules, public IPs and security rules) "+
			"and one public IP of its own in resource group %q of subscription %s; to allow it, set %s=%s", tg.rg, tg.sub, envWrites, tg.rg)
	}
	return tg, nil
}

// armClients are the SDK clients the suite reads Azure with.
type armClients struct {
	lbs   *armnetwork.LoadBalancersClient
	pips  *armnetwork.PublicIPAddressesClient
	nsgs  *armnetwork.SecurityGroupsClient
	pls   *armnetwork.PrivateLinkServicesClient
	nics  *armnetwork.InterfacesClient
	close func()
}

func newARMClients(tg *target) (*armClients, error) {
	transport := &http.Transport{Proxy: http.ProxyFromEnvironment, TLSHandshakeTimeout: 10 * time.Second}
	if tg.caFile != "" {
		pem, err := os.ReadFile(tg.caFile)
		if err != nil {
			return nil, fmt.Errorf("caCertFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("caCertFile %s holds no PEM certificate", tg.caFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	hc := &http.Client{Transport: transport, Timeout: time.Minute}
	cl := cloud.AzurePublic
	if tg.armEndpoint != "" {
		cl = cloud.Configuration{ActiveDirectoryAuthorityHost: tg.aadHost, Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
			cloud.ResourceManager: {Endpoint: tg.armEndpoint, Audience: tg.armEndpoint}}}
	}
	copts := azcore.ClientOptions{Cloud: cl, Transport: hc}
	cred, err := azidentity.NewClientSecretCredential(tg.tenant, tg.clientID, tg.secret,
		&azidentity.ClientSecretCredentialOptions{ClientOptions: copts, DisableInstanceDiscovery: tg.armEndpoint != ""})
	if err != nil {
		return nil, err
	}
	opts := &arm.ClientOptions{ClientOptions: copts, DisableRPRegistration: true}
	c := &armClients{close: transport.CloseIdleConnections}
	if c.lbs, err = armnetwork.NewLoadBalancersClient(tg.sub, cred, opts); err != nil {
		return nil, err
	}
	if c.pips, err = armnetwork.NewPublicIPAddressesClient(tg.sub, cred, opts); err != nil {
		return nil, err
	}
	if c.nsgs, err = armnetwork.NewSecurityGroupsClient(tg.sub, cred, opts); err != nil {
		return nil, err
	}
	if c.pls, err = armnetwork.NewPrivateLinkServicesClient(tg.sub, cred, opts); err != nil {
		return nil, err
	}
	if c.nics, err = armnetwork.NewInterfacesClient(tg.sub, cred, opts); err != nil {
		return nil, err
	}
	return c, nil
}

// loadBalancers lists the resource group's load balancers.
func (c *armClients) loadBalancers(ctx context.Context, rg string) ([]*armnetwork.LoadBalancer, error) {
	var out []*armnetwork.LoadBalancer
	pager := c.lbs.NewListPager(rg, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Value...)
	}
	return out, nil
}

// publicIPs lists the resource group's public IPs.
func (c *armClients) publicIPs(ctx context.Context, rg string) ([]*armnetwork.PublicIPAddress, error) {
	var out []*armnetwork.PublicIPAddress
	pager := c.pips.NewListPager(rg, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Value...)
	}
	return out, nil
}

// privateLinkServices lists the resource group's Private Link Services.
func (c *armClients) privateLinkServices(ctx context.Context, rg string) ([]*armnetwork.PrivateLinkService, error) {
	var out []*armnetwork.PrivateLinkService
	pager := c.pls.NewListPager(rg, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Value...)
	}
	return out, nil
}

// securityGroups lists the security groups of a resource group.
func (c *armClients) securityGroups(ctx context.Context, rg string) ([]*armnetwork.SecurityGroup, error) {
	var out []*armnetwork.SecurityGroup
	pager := c.nsgs.NewListPager(rg, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Value...)
	}
	return out, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func sameID(a, b string) bool {
	return strings.EqualFold(strings.TrimRight(a, "/"), strings.TrimRight(b, "/"))
}
