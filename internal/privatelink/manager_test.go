package privatelink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/emulator"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testSub = "11111111-2222-3333-4444-555555555555"
	rg      = "rg"
)

// env is an in-process emulator with a virtual network (subnet "nodes",
// private link service network policies Enabled, the ARM default), an
// internal Standard load balancer "ilb" with frontends fe1 and fe2, and a
// Manager over a running Store.
type env struct {
	t        *testing.T
	srv      *emulator.Server
	opts     *arm.ClientOptions
	cred     azcore.TokenCredential
	client   Client
	subnets  SubnetClient
	lbs      *armnetwork.LoadBalancersClient
	pes      *armnetwork.PrivateEndpointsClient
	snc      *armnetwork.SubnetsClient
	rec      *record.FakeRecorder
	mgr      *Manager
	stopRun  func()
	location string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv, err := emulator.Start(emulator.Options{}, "", false)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(srv.CACertPEM())
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	hc := &http.Client{Transport: tr}
	cfg := cloud.Configuration{
		ActiveDirectoryAuthorityHost: srv.URL() + "/",
		Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
			cloud.ResourceManager: {Audience: "https://management.core.windows.net/", Endpoint: srv.URL()},
		},
	}
	cred, err := azidentity.NewClientSecretCredential(emulator.DefaultTenantID, emulator.DefaultClientID, emulator.DefaultClientSecret,
		&azidentity.ClientSecretCredentialOptions{ClientOptions: azcore.ClientOptions{Cloud: cfg, Transport: hc}, DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	opts := &arm.ClientOptions{ClientOptions: policy.ClientOptions{Cloud: cfg, Transport: hc, Retry: policy.RetryOptions{MaxRetries: -1}}}
	e := &env{t: t, srv: srv, opts: opts, cred: cred, location: "eastus"}
	t.Cleanup(func() {
		if e.stopRun != nil {
			e.stopRun()
		}
		tr.CloseIdleConnections()
		_ = srv.Close()
	})
	e.client, e.subnets, err = NewClients(testSub, cred, opts, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	e.lbs, _ = armnetwork.NewLoadBalancersClient(testSub, cred, opts)
	e.pes, _ = armnetwork.NewPrivateEndpointsClient(testSub, cred, opts)
	e.snc, _ = armnetwork.NewSubnetsClient(testSub, cred, opts)
	e.seed()
	e.restart()
	return e
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) seed() {
	t := e.t
	ctx := ctxT(t)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, e.srv.URL()+"/subscriptions/"+testSub+"/resourcegroups/"+rg+"?api-version=2021-04-01", strings.NewReader(`{"location":"eastus"}`))
	tok, err := e.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{"https://management.core.windows.net//.default"}})
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.opts.Transport.(*http.Client).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	vnets, _ := armnetwork.NewVirtualNetworksClient(testSub, e.cred, e.opts)
	p, err := vnets.BeginCreateOrUpdate(ctx, rg, "vnet", armnetwork.VirtualNetwork{Location: ptr.To(e.location), Properties: &armnetwork.VirtualNetworkPropertiesFormat{
		AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: []*string{ptr.To("10.0.0.0/16")}},
		Subnets: []*armnetwork.Subnet{
			{Name: ptr.To("nodes"), Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: ptr.To("10.0.0.0/24")}},
			{Name: ptr.To("consumers"), Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: ptr.To("10.0.9.0/24")}},
		},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(ctx, &runtimePoll); err != nil {
		t.Fatal(err)
	}
	e.putLB(ctx, "fe1", "fe2")
}

func (e *env) putLB(ctx context.Context, frontends ...string) error {
	var fes []*armnetwork.FrontendIPConfiguration
	for _, f := range frontends {
		fes = append(fes, &armnetwork.FrontendIPConfiguration{Name: ptr.To(f), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{
			Subnet: &armnetwork.Subnet{ID: ptr.To(e.subnetID("nodes"))}}})
	}
	p, err := e.lbs.BeginCreateOrUpdate(ctx, rg, "ilb", armnetwork.LoadBalancer{Location: ptr.To(e.location),
		SKU:        &armnetwork.LoadBalancerSKU{Name: ptr.To(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{FrontendIPConfigurations: fes}}, nil)
	if err == nil {
		_, err = p.PollUntilDone(ctx, &runtimePoll)
	}
	if err != nil && len(frontends) == 2 {
		e.t.Fatal(err)
	}
	return err
}

var runtimePoll = runtime.PollUntilDoneOptions{Frequency: time.Millisecond}

func (e *env) subnetID(name string) string {
	return "/subscriptions/" + testSub + "/resourceGroups/" + rg + "/providers/Microsoft.Network/virtualNetworks/vnet/subnets/" + name
}

func (e *env) feID(name string) string {
	return "/subscriptions/" + testSub + "/resourceGroups/" + rg + "/providers/Microsoft.Network/loadBalancers/ilb/frontendIPConfigurations/" + name
}

// restart builds a fresh Store and Manager (a controller restart).
func (e *env) restart() {
	if e.stopRun != nil {
		e.stopRun()
	}
	store := NewStore(e.client, e.subnets)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { store.Run(ctx); close(done) }()
	e.stopRun = func() { cancel(); <-done }
	e.rec = record.NewFakeRecorder(100)
	e.mgr = NewManager(store, Config{SubscriptionID: testSub, ClusterName: "kubernetes", ResourceGroup: rg,
		VnetResourceGroup: rg, VnetName: "vnet", SubnetName: "nodes"}, e.rec)
}

func svc(name string, ann map[string]string) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: ann}}
}

func (e *env) writes() (puts, deletes int) {
	for _, r := range e.srv.Emulator().Requests() {
		if r.Kind != "arm" {
			continue
		}
		switch r.Method {
		case http.MethodPut:
			puts++
		case http.MethodDelete:
			deletes++
		}
	}
	return puts, deletes
}

func (e *env) reads() int {
	n := 0
	for _, r := range e.srv.Emulator().Requests() {
		if r.Kind == "arm" && r.Method == http.MethodGet {
			n++
		}
	}
	return n
}

// events drains the fake recorder.
func (e *env) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.rec.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func hasEvent(evs []string, prefix string) bool {
	for _, ev := range evs {
		if strings.HasPrefix(ev, prefix) {
			return true
		}
	}
	return false
}

func (e *env) endpoint(name, plsID string) {
	ctx := ctxT(e.t)
	p, err := e.pes.BeginCreateOrUpdate(ctx, rg, name, armnetwork.PrivateEndpoint{Location: ptr.To(e.location), Properties: &armnetwork.PrivateEndpointProperties{
		Subnet: &armnetwork.Subnet{ID: ptr.To(e.subnetID("consumers"))},
		PrivateLinkServiceConnections: []*armnetwork.PrivateLinkServiceConnection{{Name: ptr.To("c"),
			Properties: &armnetwork.PrivateLinkServiceConnectionProperties{PrivateLinkServiceID: ptr.To(plsID)}}},
	}}, nil)
	if err == nil {
		_, err = p.PollUntilDone(ctx, &runtimePoll)
	}
	if err != nil {
		e.t.Fatalf("private endpoint %s: %v", name, err)
	}
}

var fe1 = Frontend{Internal: true, FloatingIP: true, Location: "eastus"}

func (e *env) fe(name string) Frontend { f := fe1; f.ID = e.feID(name); return f }

func TestCreateAdoptUpdateDelete(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	s := svc("web", map[string]string{KeyCreate: "true", KeyFQDNs: "web.example.com"})
	pls, err := e.mgr.Reconcile(ctx, s, e.fe("fe1"))
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(pls.Name, "") != "pls-fe1" || ptr.Deref(tagValue(pls.Tags, TagOwnerService), "") != "default/web" {
		t.Fatalf("created %s tags %v", ptr.Deref(pls.Name, ""), pls.Tags)
	}
	if !hasEvent(e.events(), "Normal "+EventReasonEnsured) {
		t.Error("no Ensured event")
	}
	// The NAT subnet's policy was disabled on the way.
	sn, err := e.snc.Get(ctx, rg, "vnet", "nodes", nil)
	if err != nil || ptr.Deref(sn.Properties.PrivateLinkServiceNetworkPolicies, "") != armnetwork.VirtualNetworkPrivateLinkServiceNetworkPoliciesDisabled {
		t.Fatalf("subnet policy %v %v", sn.Properties.PrivateLinkServiceNetworkPolicies, err)
	}

	// Adoption after a restart: one List, no write.
	e.restart()
	e.srv.Emulator().ResetRequests()
	if _, err := e.mgr.Reconcile(ctx, s, e.fe("fe1")); err != nil {
		t.Fatal(err)
	}
	if p, d := e.writes(); p+d != 0 || e.reads() != 1 {
		t.Fatalf("adoption: %d PUTs, %d DELETEs, %d GETs; want 0, 0, 1", p, d, e.reads())
	}

	// An update: one PUT.
	s.Annotations[KeyVisibility] = "*"
	s.Annotations[KeyProxyProtocol] = "true"
	e.srv.Emulator().ResetRequests()
	pls, err = e.mgr.Reconcile(ctx, s, e.fe("fe1"))
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := e.writes(); p != 1 || !ptr.Deref(pls.Properties.EnableProxyProtocol, false) {
		t.Fatalf("update: %d PUTs, proxy %v", p, pls.Properties.EnableProxyProtocol)
	}

	// A consumer connects; removing the annotation deletes the connection,
	// then the PLS.
	e.endpoint("pe1", *pls.ID)
	delete(s.Annotations, KeyCreate)
	e.srv.Emulator().ResetRequests()
	if pls, err := e.mgr.Reconcile(ctx, s, e.fe("fe1")); err != nil || pls != nil {
		t.Fatalf("delete: %v %v", pls, err)
	}
	var order []string
	for _, r := range e.srv.Emulator().Requests() {
		if r.Method == http.MethodDelete {
			order = append(order, r.Path[strings.Index(r.Path, "privateLinkServices/"):])
		}
	}
	if len(order) != 2 || !strings.Contains(order[0], "/privateEndpointConnections/") || strings.Contains(order[1], "/privateEndpointConnections/") {
		t.Fatalf("delete order %v", order)
	}
	if !hasEvent(e.events(), "Normal "+EventReasonDeleted) {
		t.Error("no Deleted event")
	}
	pe, err := e.pes.Get(ctx, rg, "pe1", nil)
	if err != nil || *pe.Properties.PrivateLinkServiceConnections[0].Properties.PrivateLinkServiceConnectionState.Status != "Disconnected" {
		t.Fatalf("endpoint after delete: %v", err)
	}
	// The frontend can go now.
	if err := e.putLB(ctx, "fe2"); err != nil {
		t.Fatalf("frontend removal after the PLS: %v", err)
	}
}

func TestSharedFrontend(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	owner := svc("a", map[string]string{KeyCreate: "true", KeyName: "shared"})
	if _, err := e.mgr.Reconcile(ctx, owner, e.fe("fe1")); err != nil {
		t.Fatal(err)
	}
	e.srv.Emulator().ResetRequests()
	other := svc("b", map[string]string{KeyCreate: "true"})
	pls, err := e.mgr.Reconcile(ctx, other, e.fe("fe1"))
	if err != nil || ptr.Deref(pls.Name, "") != "shared" {
		t.Fatalf("sharer: %v %v", pls, err)
	}
	if p, d := e.writes(); p+d != 0 {
		t.Fatalf("sharing wrote %d", p+d)
	}
	other.Annotations[KeyProxyProtocol] = "true"
	_, err = e.mgr.Reconcile(ctx, other, e.fe("fe1"))
	var ae *annotations.Error
	if !errors.As(err, &ae) || ae.Key != KeyProxyProtocol {
		t.Fatalf("sharer configuring: %v", err)
	}
	if !hasEvent(e.events(), "Warning "+EventReasonInvalid) {
		t.Error("no Warning event")
	}
	// A sharer that stops asking deletes nothing.
	delete(other.Annotations, KeyCreate)
	if pls, err := e.mgr.Reconcile(ctx, other, e.fe("fe1")); err != nil || pls == nil {
		t.Fatalf("sharer leaving: %v %v", pls, err)
	}
}

func TestNameRules(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	a := svc("a", map[string]string{KeyCreate: "true", KeyName: "one"})
	if _, err := e.mgr.Reconcile(ctx, a, e.fe("fe1")); err != nil {
		t.Fatal(err)
	}
	a.Annotations[KeyName] = "two"
	var ae *annotations.Error
	if _, err := e.mgr.Reconcile(ctx, a, e.fe("fe1")); !errors.As(err, &ae) || ae.Key != KeyName || !strings.Contains(err.Error(), "never changes") {
		t.Fatalf("rename: %v", err)
	}
	b := svc("b", map[string]string{KeyCreate: "true", KeyName: "one"})
	if _, err := e.mgr.Reconcile(ctx, b, e.fe("fe2")); !errors.As(err, &ae) || ae.Key != KeyName || !strings.Contains(err.Error(), "already serves") {
		t.Fatalf("name of another frontend's PLS: %v", err)
	}
}

func TestFrontendRules(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	s := svc("a", map[string]string{KeyCreate: "true"})
	var ae *annotations.Error
	public := Frontend{ID: e.feID("fe1"), Location: "eastus", FloatingIP: true}
	if _, err := e.mgr.Reconcile(ctx, s, public); !errors.As(err, &ae) || ae.Key != KeyCreate {
		t.Fatalf("public with floating IP: %v", err)
	}
	v6 := e.fe("fe1")
	v6.IPv6Only = true
	if _, err := e.mgr.Reconcile(ctx, s, v6); !errors.As(err, &ae) || !strings.Contains(err.Error(), "IPv6") {
		t.Fatalf("IPv6: %v", err)
	}
	if p, d := e.writes(); p+d != 3 { // the seed only: group, vnet, load balancer
		t.Fatalf("refused frontends wrote: %d", p+d)
	}
}

func TestNATConfigurationsOnlyGrow(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	s := svc("a", map[string]string{KeyCreate: "true", KeyIPCount: "2"})
	if _, err := e.mgr.Reconcile(ctx, s, e.fe("fe1")); err != nil {
		t.Fatal(err)
	}
	s.Annotations[KeyIPCount] = "3"
	pls, err := e.mgr.Reconcile(ctx, s, e.fe("fe1"))
	if err != nil || len(pls.Properties.IPConfigurations) != 3 {
		t.Fatalf("grow: %v", err)
	}
	s.Annotations[KeyIPCount] = "1"
	var ae *annotations.Error
	if _, err := e.mgr.Reconcile(ctx, s, e.fe("fe1")); !errors.As(err, &ae) || ae.Key != KeyIPCount {
		t.Fatalf("shrink: %v", err)
	}
}

func TestConflictRetriedWithFreshRead(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	s := svc("a", map[string]string{KeyCreate: "true"})
	if _, err := e.mgr.Reconcile(ctx, s, e.fe("fe1")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.Emulator().AddFault(emulator.Fault{Method: http.MethodPut, PathRegex: "/privateLinkServices/", Status: http.StatusPreconditionFailed, Count: 1}); err != nil {
		t.Fatal(err)
	}
	e.srv.Emulator().ResetRequests()
	s.Annotations[KeyFQDNs] = "x.example.com"
	pls, err := e.mgr.Reconcile(ctx, s, e.fe("fe1"))
	if err != nil || len(pls.Properties.Fqdns) != 1 {
		t.Fatalf("after a 412: %v", err)
	}
	var puts, gets int
	for _, r := range e.srv.Emulator().Requests() {
		if strings.Contains(r.Path, "/privateLinkServices/") && !strings.Contains(r.Path, "operations") {
			switch r.Method {
			case http.MethodPut:
				puts++
			case http.MethodGet:
				gets++
			}
		}
	}
	if puts != 2 || gets < 1 {
		t.Fatalf("%d PUTs and %d GETs of the PLS, want 2 and a fresh read", puts, gets)
	}
}

func TestReleaseFrontendDeletesConnectionsFirst(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	s := svc("a", map[string]string{KeyCreate: "true"})
	pls, err := e.mgr.Reconcile(ctx, s, e.fe("fe1"))
	if err != nil {
		t.Fatal(err)
	}
	e.endpoint("pe1", *pls.ID)
	e.endpoint("pe2", *pls.ID)
	if err := e.putLB(ctx, "fe2"); err == nil {
		t.Fatal("Azure (the emulator) let a frontend in use by a PLS go")
	}
	if err := e.mgr.ReleaseFrontend(ctx, s, "", e.feID("fe1")); err != nil {
		t.Fatal(err)
	}
	if err := e.putLB(ctx, "fe2"); err != nil {
		t.Fatalf("frontend removal after release: %v", err)
	}
	// Releasing again is a no-op.
	e.srv.Emulator().ResetRequests()
	if err := e.mgr.ReleaseFrontend(ctx, s, "", e.feID("fe1")); err != nil {
		t.Fatal(err)
	}
	if p, d := e.writes(); p+d != 0 {
		t.Fatalf("second release wrote %d", p+d)
	}
}

func TestUpdateKeepsConnectionsAndForeignPLSIsRefused(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	s := svc("a", map[string]string{KeyCreate: "true"})
	pls, err := e.mgr.Reconcile(ctx, s, e.fe("fe1"))
	if err != nil {
		t.Fatal(err)
	}
	e.endpoint("pe1", *pls.ID)
	s.Annotations[KeyFQDNs] = "a.example.com"
	pls, err = e.mgr.Reconcile(ctx, s, e.fe("fe1"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(pls.Properties.PrivateEndpointConnections); n != 1 {
		t.Fatalf("an update left %d connections", n)
	}

	// A PLS of another cluster on fe2, made after the listing.
	other := Desired(Spec{Create: true, IPCount: 1}, Target{FrontendID: e.feID("fe2"), Location: "eastus",
		SubnetID: e.subnetID("nodes"), ClusterName: "other", Owner: "x/y"}, "foreign")
	if _, err := e.client.CreateOrUpdate(ctx, rg, "foreign", other, ""); err != nil {
		t.Fatal(err)
	}
	b := svc("b", map[string]string{KeyCreate: "true"})
	_, err = e.mgr.Reconcile(ctx, b, e.fe("fe2"))
	if err == nil || !hasEvent(e.events(), "Warning") {
		t.Fatalf("creating on a frontend another cluster's PLS serves: %v", err)
	}
	// The refused write made the next reconcile list again: now it is
	// recognised as another cluster's.
	_, err = e.mgr.Reconcile(ctx, b, e.fe("fe2"))
	if err == nil || !strings.Contains(err.Error(), "not this cluster's") {
		t.Fatalf("second try: %v", err)
	}
	if err := e.mgr.ReleaseFrontend(ctx, b, rg, e.feID("fe2")); err == nil || !strings.Contains(err.Error(), "another cluster") {
		t.Fatalf("release of another cluster's PLS: %v", err)
	}
}
