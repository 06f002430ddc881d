package azure

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"k8s.io/klog/v2"

	"github.com/azlb/azlb/internal/config"
)

func knownCloud(name string) (cloud.Configuration, bool) {
	switch {
	case name == "", strings.EqualFold(name, config.CloudAzurePublic):
		return cloud.AzurePublic, true
	case strings.EqualFold(name, config.CloudAzureChina):
		return cloud.AzureChina, true
	case strings.EqualFold(name, config.CloudAzureUSGovernment):
		return cloud.AzureGovernment, true
	}
	return cloud.Configuration{}, false
}

func normHost(u string) string { return strings.ToLower(strings.TrimRight(u, "/")) }

func isKnownAuthorityHost(host string) bool {
	for _, c := range []cloud.Configuration{cloud.AzurePublic, cloud.AzureChina, cloud.AzureGovernment} {
		if normHost(c.ActiveDirectoryAuthorityHost) == normHost(host) {
			return true
		}
	}
	return false
}

func checkHTTPSURL(field, v string) error {
	u, err := url.Parse(v)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("%s %q must be an absolute https URL", field, v)
	}
	return nil
}

// cloudSettings is the resolved cloud: the azcore configuration and whether
// AAD instance discovery must be disabled (custom authority hosts, as Azure
// Stack and private clouds need).
type cloudSettings struct {
	cloud                    cloud.Configuration
	disableInstanceDiscovery bool
}

// resolveCloud builds the azcore cloud configuration from azure.json:
//
//   - cloud names AzurePublicCloud (default), AzureChinaCloud and
//     AzureUSGovernmentCloud select azcore's built-in clouds;
//   - resourceManagerEndpoint replaces the ARM endpoint, and the ARM token
//     audience is that endpoint;
//   - activeDirectoryAuthorityHost replaces the AAD authority host; when it
//     is not one of the built-in clouds' hosts, AAD instance discovery is
//     disabled;
//   - any other cloud name is a custom cloud and needs both endpoints.
func resolveCloud(a config.AuthConfig) (cloudSettings, error) {
	base, known := knownCloud(a.Cloud)
	if !known && (a.ResourceManagerEndpoint == "" || a.ActiveDirectoryAuthorityHost == "") {
		return cloudSettings{}, fmt.Errorf("cloud %q is not one of %s, %s, %s; a custom cloud needs both resourceManagerEndpoint and activeDirectoryAuthorityHost",
			a.Cloud, config.CloudAzurePublic, config.CloudAzureChina, config.CloudAzureUSGovernment)
	}
	cs := cloudSettings{cloud: cloud.Configuration{
		ActiveDirectoryAuthorityHost: base.ActiveDirectoryAuthorityHost,
		Services:                     maps.Clone(base.Services),
	}}
	if cs.cloud.Services == nil {
		cs.cloud.Services = map[cloud.ServiceName]cloud.ServiceConfiguration{}
	}
	if ep := a.ResourceManagerEndpoint; ep != "" {
		if err := checkHTTPSURL("resourceManagerEndpoint", ep); err != nil {
			return cloudSettings{}, err
		}
		cs.cloud.Services[cloud.ResourceManager] = cloud.ServiceConfiguration{Endpoint: ep, Audience: ep}
	}
	if host := a.ActiveDirectoryAuthorityHost; host != "" {
		if err := checkHTTPSURL("activeDirectoryAuthorityHost", host); err != nil {
			return cloudSettings{}, err
		}
		cs.cloud.ActiveDirectoryAuthorityHost = host
		cs.disableInstanceDiscovery = !isKnownAuthorityHost(host)
	}
	if rm, ok := cs.cloud.Services[cloud.ResourceManager]; !ok || rm.Endpoint == "" {
		return cloudSettings{}, fmt.Errorf("cloud %q has no Azure Resource Manager endpoint; set resourceManagerEndpoint", a.Cloud)
	}
	return cs, nil
}

// newCredential builds the azidentity credential azure.json asks for. copts
// carries the cloud and the transport. Errors never contain the client
// secret.
//
// The method is cfg.AuthMethod(): workload identity
// (useFederatedWorkloadIdentityExtension), managed identity
// (useManagedIdentityExtension, userAssignedIdentityID as the client ID),
// client secret (aadClientId, aadClientSecret, tenantId) or client
// certificate (aadClientId, aadClientCertPath, aadClientCertPassword,
// tenantId; the certificate chain is sent in the assertion's x5c header, as
// the Azure cloud provider sends it).
func newCredential(logger klog.Logger, cfg *config.Config, copts azcore.ClientOptions, disableInstanceDiscovery bool) (azcore.TokenCredential, error) {
	return newCredentialOf(logger, cfg, copts, disableInstanceDiscovery, cfg.TenantID, nil)
}

// newCredentials builds the credential of tenantId and that of the network
// tenant. Within one tenant they are one credential. Across tenants
// (networkResourceTenantID, a service principal: config.Validate refuses
// the identities there) the network credential gets tokens of the network
// tenant, and the cluster's may also get them (AdditionallyAllowedTenants),
// for the auxiliary header of the compute calls.
func newCredentials(logger klog.Logger, cfg *config.Config, copts azcore.ClientOptions, disableInstanceDiscovery bool) (cluster, network azcore.TokenCredential, err error) {
	if !cfg.CrossTenantNetwork() {
		cred, err := newCredential(logger, cfg, copts, disableInstanceDiscovery)
		return cred, cred, err
	}
	switch cfg.AuthMethod() {
	case config.AuthMethodClientSecret, config.AuthMethodClientCertificate:
	default:
		return nil, nil, fmt.Errorf("networkResourceTenantID %s: %s cannot get tokens of another tenant; a service principal (aadClientSecret or aadClientCertPath) can",
			cfg.NetworkResourceTenantID, cfg.AuthMethod())
	}
	netTenant := cfg.NetworkTenantID()
	if cluster, err = newCredentialOf(logger, cfg, copts, disableInstanceDiscovery, cfg.TenantID, []string{netTenant}); err != nil {
		return nil, nil, err
	}
	if network, err = newCredentialOf(logger, cfg, copts, disableInstanceDiscovery, netTenant, nil); err != nil {
		return nil, nil, err
	}
	return cluster, network, nil
}

// newCredentialOf builds the credential of azure.json's method for tenant
// (a service principal's; the identities have their own), allowed to get
// tokens of the tenants also.
func newCredentialOf(logger klog.Logger, cfg *config.Config, copts azcore.ClientOptions, disableInstanceDiscovery bool, tenant string, also []string) (azcore.TokenCredential, error) {
	a := cfg.AuthConfig
	a.TenantID = tenant
	kind := cfg.AuthMethod()
	var (
		cred azcore.TokenCredential
		err  error
	)
	switch kind {
	case config.AuthMethodWorkloadIdentity:
		// Empty fields fall back to the AZURE_CLIENT_ID, AZURE_TENANT_ID and
		// AZURE_FEDERATED_TOKEN_FILE variables the workload identity webhook
		// injects.
		cred, err = azidentity.NewWorkloadIdentityCredential(&azidentity.WorkloadIdentityCredentialOptions{
			ClientOptions:            copts,
			ClientID:                 a.AADClientID,
			TenantID:                 a.TenantID,
			TokenFilePath:            a.AADFederatedTokenFile,
			DisableInstanceDiscovery: disableInstanceDiscovery,
		})
	case config.AuthMethodManagedIdentity:
		o := &azidentity.ManagedIdentityCredentialOptions{ClientOptions: copts}
		if a.UserAssignedIdentityID != "" {
			o.ID = azidentity.ClientID(a.UserAssignedIdentityID)
		}
		cred, err = azidentity.NewManagedIdentityCredential(o)
	case config.AuthMethodClientSecret:
		if a.TenantID == "" || a.AADClientID == "" {
			return nil, errors.New("client secret authentication needs tenantId and aadClientId")
		}
		cred, err = azidentity.NewClientSecretCredential(a.TenantID, a.AADClientID, a.AADClientSecret.Reveal(),
			&azidentity.ClientSecretCredentialOptions{ClientOptions: copts, DisableInstanceDiscovery: disableInstanceDiscovery,
				AdditionallyAllowedTenants: also})
	case config.AuthMethodClientCertificate:
		if a.TenantID == "" || a.AADClientID == "" {
			return nil, errors.New("client certificate authentication needs tenantId and aadClientId")
		}
		certs, key, cerr := cfg.ClientCertificate()
		if cerr != nil {
			return nil, cerr
		}
		cred, err = azidentity.NewClientCertificateCredential(a.TenantID, a.AADClientID, certs, key,
			&azidentity.ClientCertificateCredentialOptions{ClientOptions: copts, DisableInstanceDiscovery: disableInstanceDiscovery,
				SendCertificateChain: true, AdditionallyAllowedTenants: also})
	default:
		return nil, errors.New("no Azure credential configured: set exactly one of useFederatedWorkloadIdentityExtension (with aadClientId, tenantId, aadFederatedTokenFile) or useManagedIdentityExtension (optionally userAssignedIdentityID), or set aadClientId and aadClientSecret (or aadClientCertPath)")
	}
	if err != nil {
		return nil, redactError(fmt.Errorf("%s credential: %w", kind, err), credentialSecrets(cfg)...)
	}
	logger.V(2).Info("Using Azure credential", "kind", kind, "tenantID", a.TenantID, "additionallyAllowedTenants", also, "clientID", a.AADClientID,
		"userAssignedIdentityID", a.UserAssignedIdentityID, "authorityHost", copts.Cloud.ActiveDirectoryAuthorityHost,
		"instanceDiscovery", !disableInstanceDiscovery)
	return cred, nil
}

// redactedError hides a secret that leaked into an error's text (for example
// echoed by a token endpoint). errors.Is/As still see the wrapped chain.
type redactedError struct {
	err error
	msg string
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// Redacted is the marker that replaces secrets in error text.
const Redacted = "[REDACTED]"

// redactError returns err, or a wrapper whose text has every occurrence of
// the secrets replaced by Redacted.
func redactError(err error, secrets ...string) error {
	if err == nil {
		return err
	}
	msg := err.Error()
	out := msg
	for _, s := range secrets {
		if s != "" {
			out = strings.ReplaceAll(out, s, Redacted)
		}
	}
	if out == msg {
		return err
	}
	return &redactedError{err: err, msg: out}
}

// credentialSecrets are the credentials of the configured method (the
// client secret, the certificate's password), for redactError.
func credentialSecrets(cfg *config.Config) []string {
	switch cfg.AuthMethod() {
	case config.AuthMethodClientSecret:
		return []string{cfg.AADClientSecret.Reveal()}
	case config.AuthMethodClientCertificate:
		return []string{cfg.AADClientCertPassword.Reveal()}
	}
	return nil
}
