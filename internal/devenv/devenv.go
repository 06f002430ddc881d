// Package devenv starts the ARM emulator, seeds it with the resources a
// cluster needs (resource group, virtual network, subnet) and builds the
// azure.json settings and ARM clients that point at it. Tests, benchmarks and
// the sandbox share it, so all of them reach the emulator exactly as
// production reaches Azure: through configuration (resourceManagerEndpoint,
// activeDirectoryAuthorityHost, caCertFile) and the real SDK.
package devenv

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/emulator"
)

// Defaults of the seeded environment.
const (
	SubscriptionID = "3f2e1d0c-0000-4000-8000-00000000a21b"
	ResourceGroup  = "azlb-rg"
	Location       = "eastus"
	VnetName       = "azlb-vnet"
	SubnetName     = "azlb-subnet"
	// SecurityGroupName is the NSG on the subnet: Azure's default rules
	// only until the controller writes Services' rules into it.
	SecurityGroupName = "azlb-nsg"
	VnetCIDR          = "10.0.0.0/8"
	SubnetCIDR        = "10.240.0.0/16"
	VnetCIDRv6        = "fd00:10::/48"
	SubnetCIDRv6      = "fd00:10::/64"
)

// Env is a running, seeded emulator and the configuration that reaches it.
type Env struct {
	// Server is the in-process emulator; nil when Connect attached to an
	// emulator running in another process.
	Server *emulator.Server
	// URL is the emulator's base URL (ARM and AAD).
	URL string
	// CAFile holds the emulator's CA certificate (PEM).
	CAFile string
	// Config is a complete azure.json for the emulator, defaults applied.
	Config *config.Config

	caPEM   []byte
	network Network
}

// Network is the address space Seed gives the virtual network and its
// subnet.
type Network struct {
	VnetPrefixes, SubnetPrefixes []string
}

// DefaultNetwork is the seeded network unless WithNetwork says otherwise:
// 10.0.0.0/8 with the subnet 10.240.0.0/16, and their IPv6 twins.
var DefaultNetwork = Network{
	VnetPrefixes:   []string{VnetCIDR, VnetCIDRv6},
	SubnetPrefixes: []string{SubnetCIDR, SubnetCIDRv6},
}

// LoopbackNetwork puts the IPv4 subnet on loopback (127.240.0.0/16 in
// 127.240.0.0/12), so that node addresses and internal frontends in it can
// carry traffic through the emulator's data plane. IPv6 is as in
// DefaultNetwork, which lies in LoopbackIPv6CIDR: served too where
// hack/ipv6-loopback.sh routed that to the loopback device.
var LoopbackNetwork = Network{
	VnetPrefixes:   []string{"127.240.0.0/12", VnetCIDRv6},
	SubnetPrefixes: []string{"127.240.0.0/16", SubnetCIDRv6},
}

// NodeNetwork is a virtual network and subnet of exactly the IPv4 prefix p
// (a loopback range of a test's nodes, whose flows the data plane then
// lets through the subnet's NSG), IPv6 as in DefaultNetwork.
func NodeNetwork(p netip.Prefix) Network {
	return Network{VnetPrefixes: []string{p.String(), VnetCIDRv6}, SubnetPrefixes: []string{p.String(), SubnetCIDRv6}}
}

// Option changes what Start and Connect seed.
type Option func(*Env)

// WithNetwork seeds the virtual network with n instead of DefaultNetwork.
func WithNetwork(n Network) Option { return func(e *Env) { e.network = n } }

// Emulator is the in-process emulator, for faults and the request log.
func (e *Env) Emulator() *emulator.Emulator { return e.Server.Emulator() }

// Close stops an in-process emulator.
func (e *Env) Close() error {
	if e.Server == nil {
		return nil
	}
	return e.Server.Close()
}

// Start runs an emulator on a loopback port, writes its CA to dir, seeds
// it and returns the environment. mutate, if not nil, edits the config
// (before defaults and validation).
func Start(ctx context.Context, dir string, opts emulator.Options, mutate func(*config.Config), seed ...Option) (*Env, error) {
	srv, err := emulator.Start(opts, "", false)
	if err != nil {
		return nil, err
	}
	caFile := filepath.Join(dir, "emulator-ca.pem")
	if err := os.WriteFile(caFile, srv.CACertPEM(), 0o600); err != nil {
		_ = srv.Close()
		return nil, fmt.Errorf("write emulator CA: %w", err)
	}
	env, err := attach(ctx, srv.URL(), caFile, srv.CACertPEM(), mutate, seed)
	if err != nil {
		_ = srv.Close()
		return nil, err
	}
	env.Server = srv
	return env, nil
}

// Connect seeds an emulator running elsewhere (azlb-emulator) at url whose
// CA certificate is in caFile, and returns its environment.
func Connect(ctx context.Context, url, caFile string, mutate func(*config.Config), seed ...Option) (*Env, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read emulator CA: %w", err)
	}
	return attach(ctx, url, caFile, caPEM, mutate, seed)
}

func attach(ctx context.Context, url, caFile string, caPEM []byte, mutate func(*config.Config), seed []Option) (*Env, error) {
	raw := ConfigJSON(url, caFile)
	var cfg config.Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, err
	}
	cfg.AADClientSecret = config.Secret(emulator.DefaultClientSecret)
	if mutate != nil {
		mutate(&cfg)
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("devenv config: %w", err)
	}
	env := &Env{URL: url, CAFile: caFile, Config: &cfg, caPEM: caPEM, network: DefaultNetwork}
	for _, o := range seed {
		o(env)
	}
	if err := env.Seed(ctx); err != nil {
		return nil, err
	}
	return env, nil
}

// ConfigJSON is an azure.json for an emulator at url whose CA is in caFile:
// the same file the sandbox hands the controller.
func ConfigJSON(url, caFile string) []byte {
	m := map[string]any{
		"cloud":                        "AzurePublicCloud",
		"resourceManagerEndpoint":      url,
		"activeDirectoryAuthorityHost": url + "/",
		"caCertFile":                   caFile,
		"tenantId":                     emulator.DefaultTenantID,
		"aadClientId":                  emulator.DefaultClientID,
		"aadClientSecret":              emulator.DefaultClientSecret,
		"subscriptionId":               SubscriptionID,
		"resourceGroup":                ResourceGroup,
		"location":                     Location,
		"vnetName":                     VnetName,
		"subnetName":                   SubnetName,
		"securityGroupName":            SecurityGroupName,
		"loadBalancerSku":              "standard",
		"loadBalancerBackendPoolConfigurationType": "nodeIP",
	}
	b, _ := json.MarshalIndent(m, "", "  ") // a map of strings always marshals
	return append(b, '\n')
}

// Clients builds ARM clients for the environment with the given options
// (Source defaults to "devenv").
func (e *Env) Clients(ctx context.Context, opts azure.ClientOptions) (*azure.Clients, error) {
	if opts.Source == "" {
		opts.Source = "devenv"
	}
	return azure.NewClients(ctx, e.Config, opts)
}

// Seed creates the resource group, the virtual network and its subnet
// (dual-stack, from the Env's Network) if they are missing. It is
// idempotent.
func (e *Env) Seed(ctx context.Context) error {
	clients, err := e.Clients(ctx, azure.ClientOptions{Source: "devenv-seed"})
	if err != nil {
		return err
	}
	defer clients.Close()
	// The resource group in the cluster's subscription and, when the
	// network resources are in another (networkResourceSubscriptionID),
	// there too, each with a token of its tenant.
	if err := e.putResourceGroup(ctx, clients.Credential(), e.Config.SubscriptionID); err != nil {
		return err
	}
	if sub := e.Config.NetworkSubscriptionID(); !strings.EqualFold(sub, e.Config.SubscriptionID) {
		if err := e.putResourceGroup(ctx, clients.NetworkCredential(), sub); err != nil {
			return err
		}
	}
	network := e.network
	if len(network.VnetPrefixes) == 0 {
		network = DefaultNetwork
	}
	nsg, err := e.seedSecurityGroup(ctx, clients)
	if err != nil {
		return err
	}
	vnets, err := armnetwork.NewVirtualNetworksClient(e.Config.NetworkSubscriptionID(), clients.NetworkCredential(), clients.ARMClientOptions("devenv-vnet"))
	if err != nil {
		return err
	}
	poller, err := vnets.BeginCreateOrUpdate(ctx, ResourceGroup, VnetName, armnetwork.VirtualNetwork{
		Location: to.Ptr(Location),
		Properties: &armnetwork.VirtualNetworkPropertiesFormat{
			AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: to.SliceOfPtrs(network.VnetPrefixes...)},
			Subnets: []*armnetwork.Subnet{{
				Name: to.Ptr(SubnetName),
				Properties: &armnetwork.SubnetPropertiesFormat{
					AddressPrefixes:      to.SliceOfPtrs(network.SubnetPrefixes...),
					NetworkSecurityGroup: &armnetwork.SecurityGroup{ID: nsg.ID},
				},
			}},
		},
	}, nil)
	if err != nil {
		return fmt.Errorf("seed virtual network: %w", err)
	}
	if _, err := poller.PollUntilDone(ctx, &PollOptions); err != nil {
		return fmt.Errorf("seed virtual network: %w", err)
	}
	return nil
}

// putResourceGroup creates the resource group in a subscription with a
// plain ARM request (Microsoft.Resources, api-version 2021-04-01),
// authenticated like every other call (cred: of the subscription's tenant).
func (e *Env) putResourceGroup(ctx context.Context, cred azcore.TokenCredential, sub string) error {
	tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{strings.TrimSuffix(e.Config.ResourceManagerEndpoint, "/") + "/.default"}})
	if err != nil {
		return fmt.Errorf("seed resource group: token: %w", err)
	}
	url := fmt.Sprintf("%s/subscriptions/%s/resourcegroups/%s?api-version=2021-04-01", strings.TrimSuffix(e.URL, "/"), sub, ResourceGroup)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader([]byte(`{"location":"`+Location+`"}`)))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.HTTPClient().Do(req)
	if err != nil {
		return fmt.Errorf("seed resource group: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("seed resource group: %s: %s", resp.Status, body)
	}
	return nil
}

// HTTPClient trusts the emulator's CA.
func (e *Env) HTTPClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(e.caPEM)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}

// PollOptions polls long-running operations once a second (the emulator
// completes them on the first poll). It is also the least the Azure SDK
// accepts outside a test binary: azcore's PollUntilDone refuses a Frequency
// under one second unless the flag test.v is defined, so a faster poll
// passes every in-process test and fails every user's binary.
var PollOptions = runtime.PollUntilDoneOptions{Frequency: time.Second}

// seedSecurityGroup creates the subnet's NSG (Azure's default rules only)
// unless it exists; an existing one keeps its rules.
func (e *Env) seedSecurityGroup(ctx context.Context, clients *azure.Clients) (*armnetwork.SecurityGroup, error) {
	sg, err := clients.SecurityGroup.Get(ctx, ResourceGroup, SecurityGroupName)
	if err == nil {
		return sg, nil
	}
	if azure.Classify(err) != azure.ClassStale {
		return nil, fmt.Errorf("seed network security group: %w", err)
	}
	sg, err = clients.SecurityGroup.CreateOrUpdate(ctx, ResourceGroup, SecurityGroupName, armnetwork.SecurityGroup{Location: to.Ptr(Location)}, "")
	if err != nil {
		return nil, fmt.Errorf("seed network security group: %w", err)
	}
	return sg, nil
}
