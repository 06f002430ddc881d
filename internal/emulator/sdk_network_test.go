package emulator

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

func TestSDKVirtualNetworkAndSubnets(t *testing.T) {
	env := newSDKEnv(t, Options{})
	ctx := ctxT(t)
	env.createGroup(t, "rg", "westus")
	vnet := armnetwork.VirtualNetwork{
		Location: to.Ptr("westus"),
		Properties: &armnetwork.VirtualNetworkPropertiesFormat{
			AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: []*string{to.Ptr("10.1.0.0/16")}},
		},
	}
	for i := 0; i < 2; i++ { // create, then update (ARM answers 201 to both)
		p, err := env.vnets.BeginCreateOrUpdate(ctx, "rg", "vnet", vnet, nil)
		if err != nil {
			t.Fatalf("vnet put %d: %v", i, err)
		}
		if _, err := p.PollUntilDone(ctx, pollOpts); err != nil {
			t.Fatal(err)
		}
	}
	sp, err := env.subnets.BeginCreateOrUpdate(ctx, "rg", "vnet", "a", armnetwork.Subnet{
		Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: to.Ptr("10.1.0.0/24")},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := sp.PollUntilDone(ctx, pollOpts)
	if err != nil {
		t.Fatal(err)
	}
	if *sub.Properties.ProvisioningState != armnetwork.ProvisioningStateSucceeded || *sub.Type != "Microsoft.Network/virtualNetworks/subnets" {
		t.Fatalf("subnet %+v", sub)
	}
	got, err := env.vnets.Get(ctx, "rg", "vnet", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Properties.Subnets) != 1 || *got.Properties.Subnets[0].Etag != *got.Etag {
		t.Fatalf("vnet does not show the subnet with its etag: %+v", got.Properties.Subnets)
	}
	// A subnet outside the address space is rejected.
	_, err = env.subnets.BeginCreateOrUpdate(ctx, "rg", "vnet", "b", armnetwork.Subnet{
		Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: to.Ptr("10.2.0.0/24")},
	}, nil)
	if code, status := errorCode(err); status != 400 || code != "NetcfgSubnetRangeOutsideVnet" {
		t.Fatalf("outside subnet: %v", err)
	}
	pager := env.subnets.NewListPager("rg", "vnet", nil)
	n := 0
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Value)
	}
	if n != 1 {
		t.Fatalf("listed %d subnets", n)
	}
	dp, err := env.subnets.BeginDelete(ctx, "rg", "vnet", "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dp.PollUntilDone(ctx, pollOpts); err != nil {
		t.Fatal(err)
	}
	if _, err := env.subnets.Get(ctx, "rg", "vnet", "a", nil); err == nil {
		t.Fatal("subnet survived delete")
	}
}

func TestSDKListPagers(t *testing.T) {
	env := newSDKEnv(t, Options{})
	ctx := ctxT(t)
	seedNetwork(t, env, "rg1")
	seedNetwork(t, env, "rg2")
	count := func(more func() bool, next func() (int, error)) int {
		n := 0
		for more() {
			k, err := next()
			if err != nil {
				t.Fatal(err)
			}
			n += k
		}
		return n
	}
	lp := env.lbs.NewListPager("rg1", nil)
	if n := count(lp.More, func() (int, error) { p, err := lp.NextPage(ctx); return len(p.Value), err }); n != 1 {
		t.Fatalf("LBs in rg1: %d", n)
	}
	la := env.lbs.NewListAllPager(nil)
	if n := count(la.More, func() (int, error) { p, err := la.NextPage(ctx); return len(p.Value), err }); n != 2 {
		t.Fatalf("LBs in subscription: %d", n)
	}
	pp := env.pools.NewListPager("rg1", "kubernetes", nil)
	if n := count(pp.More, func() (int, error) { p, err := pp.NextPage(ctx); return len(p.Value), err }); n != 1 {
		t.Fatalf("pools: %d", n)
	}
	bad := env.lbs.NewListPager("nope", nil)
	if _, err := bad.NextPage(ctx); err == nil {
		t.Fatal("listing a missing group succeeded")
	} else if code, _ := errorCode(err); code != "ResourceGroupNotFound" {
		t.Fatalf("listing a missing group: %v", err)
	}
}

// TestResetConnectionHTTP1 covers the hijack path (HTTP/2 streams are
// aborted instead).
func TestResetConnectionHTTP1(t *testing.T) {
	env := newSDKEnv(t, Options{})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(env.srv.CACertPEM())
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		TLSNextProto:    map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	defer tr.CloseIdleConnections()
	if _, err := env.emu.AddFault(Fault{PathRegex: "/resourcegroups/", Count: 1, ResetConnection: true}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, env.srv.URL()+rgPath("rg"), nil)
	req.Header.Set("Authorization", "Bearer "+env.token(t))
	resp, err := tr.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got a response (%d) from a reset connection", resp.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodGet, env.srv.URL()+rgPath("rg"), nil)
	req.Header.Set("Authorization", "Bearer "+env.token(t))
	resp, err = tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.ProtoMajor != 1 {
		t.Fatalf("after reset: %d %s", resp.StatusCode, resp.Proto)
	}
}
