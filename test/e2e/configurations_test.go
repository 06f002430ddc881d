package e2e

// The configurations of issue 40 items 10 to 12, through the real
// controller: certificate credentials, network resources in another tenant,
// and configuration from the Secret kube-system/azure-cloud-provider.

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/cloudconfig"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
)

// TestClientCertificateCredential runs the controller with certificate
// authentication (azure.json aadClientCertPath and aadClientCertPassword, a
// PKCS#12 file, no aadClientSecret). While the emulator's AAD knows no
// certificate of the client, the Service gets a Warning naming AAD's
// AADSTS700027 and nothing is written to ARM; with the certificate
// registered, the Service gets its load balancer. The password is in
// neither controller's log.
func TestClientCertificateCredential(t *testing.T) {
	const certPassword = "p12-Pa55word" // internal/config/testdata/clientcert/README.md
	ctx := context.Background()
	p12, err := filepath.Abs(filepath.Join(suite.root, "internal", "config", "testdata", "clientcert", "rsa-legacy.p12"))
	if err != nil {
		t.Fatal(err)
	}
	certs, _, err := config.LoadClientCertificate(p12, certPassword)
	if err != nil {
		t.Fatal(err)
	}
	emu := suite.env.Emulator()
	t.Cleanup(func() { emu.SetClientCertificates() })
	cfgPath := writeConfig(t, map[string]any{"aadClientSecret": nil, "aadClientCertPath": p12, "aadClientCertPassword": certPassword})
	createNode(t, "cert-n1", "10.240.12.1", nil)
	ns := createNamespace(t)

	// Not registered: AAD refuses the assertion, ARM sees no request.
	emu.SetClientCertificates()
	before := armWrites()
	a := startController(t, "a", cfgPath, false)
	if _, err := suite.cs.CoreV1().Services(ns).Create(ctx, loadBalancerService(ns, "web", 80), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteService(t, ns, "web") })
	eventually(t, 60*time.Second, "a SyncLoadBalancerFailed event naming AADSTS700027", serviceEvent(ns, "web", "SyncLoadBalancerFailed", "AADSTS700027"))
	if n := armWrites() - before; n != 0 {
		t.Fatalf("%d ARM writes without a token", n)
	}
	logA := a.logText(t)
	a.stop()

	// Registered: the Service is served.
	emu.SetClientCertificates(certs...)
	b := startController(t, "b", cfgPath, false)
	ingressIP(t, ns, "web")
	for name, log := range map[string]string{"a": logA, "b": b.logText(t)} {
		if strings.Contains(log, certPassword) {
			t.Errorf("controller %s logged the certificate's password", name)
		}
	}
	deleteServiceAndWait(t, ns, "web")
}

// The hub: a second tenant of the emulator and its subscription, which
// holds the cluster's network resources.
const (
	hubTenant = "0b0b0b0b-0000-4000-8000-00000000000b"
	hubSub    = "0c0c0c0c-0000-4000-8000-00000000000c"
)

// TestNetworkResourcesInAnotherTenant runs the controller with the
// network resources in another subscription of another tenant
// (networkResourceSubscriptionID, networkResourceTenantID): the emulator's
// second tenant holds the virtual network, subnet and NSG; the nodes are
// VMs of a scale set in the cluster's subscription, in the hub's subnet,
// with NIC-based pools. The emulator holds ARM's rules across tenants: a
// subscription takes only tokens of its tenant, and a compute write that
// links the hub's pool needs the hub's auxiliary token.
//
// Without networkResourceTenantID the controller's calls to the hub carry
// the cluster tenant's token: the Service gets a Warning naming
// InvalidAuthenticationTokenTenant and no load balancer exists. With it,
// the load balancer, public IP and rules are in the hub, and the VMs of the
// cluster's subscription are members of its pool.
func TestNetworkResourcesInAnotherTenant(t *testing.T) {
	ctx := context.Background()
	const cluster = "e2e-hub"
	hub := func(c *config.Config) { c.NetworkResourceSubscriptionID, c.NetworkResourceTenantID = hubSub, hubTenant }
	env, err := devenv.Start(ctx, t.TempDir(), emulator.Options{Tenants: []emulator.Tenant{{ID: hubTenant, Subscriptions: []string{hubSub}}}}, hub)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	notThrottled(t, env)
	clients, err := env.Clients(ctx, azure.ClientOptions{Source: "e2e-hub"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(clients.Close)
	// The scale set (cluster subscription) in the hub's subnet: the
	// devenv's own compute write already needs the hub's auxiliary token.
	_, vms := scaleSetNodes(t, env, clients, "e2e-hub", 2, "e2e-hub-")
	ns := createNamespace(t)
	settings := map[string]any{"clusterName": cluster, "loadBalancerBackendPoolConfigurationType": "nodeIPConfiguration",
		"networkResourceSubscriptionID": hubSub}

	// The hub's tenant left out: refused, nothing written in the hub.
	a := startController(t, "a", writeConfigFor(t, env, settings), false)
	if _, err := suite.cs.CoreV1().Services(ns).Create(ctx, loadBalancerService(ns, "web", 80), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteService(t, ns, "web") })
	eventually(t, 60*time.Second, "a SyncLoadBalancerFailed event naming InvalidAuthenticationTokenTenant",
		serviceEvent(ns, "web", "SyncLoadBalancerFailed", "InvalidAuthenticationTokenTenant"))
	a.stop()
	if lbs, err := clients.LoadBalancer.List(ctx, devenv.ResourceGroup); err != nil || len(lbs) != 0 {
		t.Fatalf("load balancers in the hub after the refusals: %d, %v", len(lbs), err)
	}

	// With the tenant: served from the hub.
	settings["networkResourceTenantID"] = hubTenant
	startController(t, "b", writeConfigFor(t, env, settings), false)
	ip := ingressIP(t, ns, "web")
	lb, err := clients.LoadBalancer.Get(ctx, devenv.ResourceGroup, cluster)
	if err != nil || !strings.HasPrefix(strings.ToLower(*lb.ID), "/subscriptions/"+hubSub+"/") {
		t.Fatalf("load balancer %s in the hub: %v", cluster, err)
	}
	pips, err := clients.PublicIP.List(ctx, devenv.ResourceGroup)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range pips {
		found = found || (p.Properties != nil && p.Properties.IPAddress != nil && *p.Properties.IPAddress == ip && strings.Contains(*p.ID, hubSub))
	}
	if !found {
		t.Fatalf("the ingress IP %s is no public IP of the hub", ip)
	}
	owner := func(vm devenv.NodeVM) string { return strings.ToLower(strings.TrimPrefix(vm.ProviderID, "azure://")) }
	eventually(t, 60*time.Second, "both VMs of the cluster's subscription in the hub's pool", func(context.Context) (bool, error) {
		in := nicEntries(clients, cluster)
		_, first := in[owner(vms[0])]
		_, second := in[owner(vms[1])]
		return first && second, nil
	})
	for _, vm := range vms {
		if !strings.HasPrefix(strings.ToLower(strings.TrimPrefix(vm.ProviderID, "azure://")), "/subscriptions/"+devenv.SubscriptionID+"/") {
			t.Fatalf("VM %s is not in the cluster's subscription", vm.ProviderID)
		}
	}
	deleteServiceAndWait(t, ns, "web")
}

// putCloudConfigSecret writes (or with an empty document deletes) the
// Secret kube-system/azure-cloud-provider, key cloud-config.
func putCloudConfigSecret(t *testing.T, document string) {
	t.Helper()
	ctx := context.Background()
	secrets := suite.cs.CoreV1().Secrets(cloudconfig.SecretNamespace)
	_ = secrets.Delete(ctx, cloudconfig.SecretName, metav1.DeleteOptions{}) // absent is fine; any other trouble fails Create
	if document == "" {
		return
	}
	s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cloudconfig.SecretNamespace, Name: cloudconfig.SecretName},
		Data: map[string][]byte{cloudconfig.SecretKey: []byte(document)}}
	if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestCloudConfigFromSecret runs the controller, as the chart's identity,
// with azure.json whose settings the Secret kube-system/azure-cloud-provider
// completes or replaces (cloudConfigType):
//
//   - merge (the default): azure.json without the client secret, the Secret
//     holding it and the cluster's name. The controller serves the Service
//     on the load balancer the Secret names, and logs what it took from the
//     Secret (field names, no value).
//   - secret, the Secret missing: the controller refuses to start, naming
//     the Secret; nothing is written to Azure.
//
// The chart's RBAC lets the manager get exactly that Secret
// (startController fails the test on any RBAC refusal in the log).
func TestCloudConfigFromSecret(t *testing.T) {
	ctx := context.Background()
	const cluster = "e2e-from-secret"
	t.Cleanup(func() { putCloudConfigSecret(t, "") })
	createNode(t, "ccs-n1", "10.240.13.1", nil)
	ns := createNamespace(t)

	putCloudConfigSecret(t, "aadClientSecret: "+emulator.DefaultClientSecret+"\nclusterName: "+cluster+"\n")
	a := startController(t, "a", writeConfig(t, map[string]any{"aadClientSecret": nil}), false)
	if _, err := suite.cs.CoreV1().Services(ns).Create(ctx, loadBalancerService(ns, "web", 80), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ingressIP(t, ns, "web")
	if getLB(t, cluster) == nil {
		t.Fatalf("no load balancer %s (the Secret's clusterName)", cluster)
	}
	log := a.logText(t)
	if !strings.Contains(log, `"Cloud configuration loaded" source="azure.json and Secret kube-system/azure-cloud-provider (key cloud-config)" cloudConfigType="merge" secretOverrides=["aadClientSecret","clusterName"]`) {
		t.Errorf("no log line saying what the Secret set:\n%s", tail([]byte(log), 4096))
	}
	if strings.Contains(log, emulator.DefaultClientSecret) {
		t.Error("the controller logged the client secret")
	}
	deleteServiceAndWait(t, ns, "web")
	a.stop()

	// cloudConfigType secret without the Secret: the controller refuses to
	// start.
	putCloudConfigSecret(t, "")
	before := armWrites()
	b := startController(t, "b", writeConfig(t, map[string]any{"cloudConfigType": "secret"}), false)
	select {
	case <-b.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("the controller runs with cloudConfigType secret and no Secret")
	}
	if log := b.logText(t); !strings.Contains(log, "no Secret kube-system/azure-cloud-provider (cloudConfigType secret") {
		t.Errorf("the refusal does not name the Secret:\n%s", tail([]byte(log), 2048))
	}
	if n := armWrites() - before; n != 0 {
		t.Errorf("%d ARM writes by a controller that refused to start", n)
	}
}
