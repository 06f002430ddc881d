package azure

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/testutil/cputime"
)

// randomPool builds a pool exercising every field the codec handles: nil
// and empty slices, nil elements, empty strings, escapes and non-ASCII text.
func randomPool(r *rand.Rand, entries int) armnetwork.BackendAddressPool {
	str := func() *string {
		switch r.IntN(6) {
		case 0:
			return nil
		case 1:
			return to.Ptr("")
		case 2:
			return to.Ptr("quote\" back\\slash \u00e9 \u2028 <&>")
		default:
			return to.Ptr(fmt.Sprintf("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/x/%d", r.IntN(1e6)))
		}
	}
	i32 := func() *int32 {
		if r.IntN(3) == 0 {
			return nil
		}
		return to.Ptr(int32(r.IntN(1<<16) - 100))
	}
	sub := func() *armnetwork.SubResource {
		switch r.IntN(4) {
		case 0:
			return nil
		case 1:
			return &armnetwork.SubResource{}
		default:
			return &armnetwork.SubResource{ID: str()}
		}
	}
	subs := func() []*armnetwork.SubResource {
		switch r.IntN(4) {
		case 0:
			return nil
		case 1:
			return []*armnetwork.SubResource{}
		default:
			out := make([]*armnetwork.SubResource, r.IntN(4))
			for i := range out {
				out[i] = sub()
			}
			return out
		}
	}
	p := armnetwork.BackendAddressPool{Etag: str(), ID: str(), Name: str(), Type: str()}
	if r.IntN(8) == 0 {
		return p
	}
	props := &armnetwork.BackendAddressPoolPropertiesFormat{
		DrainPeriodInSeconds: i32(), InboundNatRules: subs(), LoadBalancingRules: subs(), Location: str(),
		OutboundRule: sub(), OutboundRules: subs(), VirtualNetwork: sub(),
	}
	if r.IntN(2) == 0 {
		props.ProvisioningState = to.Ptr(armnetwork.ProvisioningStateSucceeded)
	}
	if r.IntN(3) == 0 {
		props.SyncMode = to.Ptr(armnetwork.SyncModeManual)
	}
	if r.IntN(4) == 0 {
		props.BackendIPConfigurations = []*armnetwork.InterfaceIPConfiguration{
			{ID: str(), Name: str(), Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{PrivateIPAddress: str(), Primary: to.Ptr(true)}},
			nil,
			{ID: str()},
			{Etag: str(), Type: str(), Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{}},
		}
	}
	if r.IntN(4) == 0 {
		props.TunnelInterfaces = []*armnetwork.GatewayLoadBalancerTunnelInterface{
			{Identifier: i32(), Port: i32(), Protocol: to.Ptr(armnetwork.GatewayLoadBalancerTunnelProtocolVXLAN)},
		}
	}
	switch r.IntN(5) {
	case 0:
	case 1:
		props.LoadBalancerBackendAddresses = []*armnetwork.LoadBalancerBackendAddress{}
	default:
		for range entries {
			if r.IntN(20) == 0 {
				props.LoadBalancerBackendAddresses = append(props.LoadBalancerBackendAddresses, nil)
				continue
			}
			a := &armnetwork.LoadBalancerBackendAddress{Name: str()}
			if r.IntN(10) != 0 {
				ap := &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
					IPAddress: str(), VirtualNetwork: sub(), Subnet: sub(),
					LoadBalancerFrontendIPConfiguration: sub(), NetworkInterfaceIPConfiguration: sub(),
				}
				switch r.IntN(4) {
				case 0:
				case 1:
					ap.AdminState = to.Ptr(armnetwork.LoadBalancerBackendAddressAdminStateDown)
				default:
					ap.AdminState = to.Ptr(armnetwork.LoadBalancerBackendAddressAdminStateNone)
				}
				if r.IntN(5) == 0 {
					ap.InboundNatRulesPortMapping = []*armnetwork.NatRulePortMapping{
						{BackendPort: i32(), FrontendPort: i32(), InboundNatRuleName: str()}, nil}
				}
				a.Properties = ap
			}
			props.LoadBalancerBackendAddresses = append(props.LoadBalancerBackendAddresses, a)
		}
	}
	p.Properties = props
	return p
}

func sdkDecode(t testing.TB, b []byte) armnetwork.BackendAddressPool {
	t.Helper()
	var p armnetwork.BackendAddressPool
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("SDK decode: %v\n%s", err, b)
	}
	return p
}

func jsonValue(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return v
}

// TestPoolCodecMatchesSDK: for random pools, the codec decodes what the SDK
// writes to what the SDK decodes, and writes the same JSON value the SDK
// writes.
func TestPoolCodecMatchesSDK(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		p := randomPool(r, r.IntN(12))
		sdkJSON, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodePool(sdkJSON)
		if err != nil {
			t.Fatalf("case %d: decode: %v\n%s", i, err, sdkJSON)
		}
		if want := sdkDecode(t, sdkJSON); !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d: decode differs from the SDK's\ninput %s", i, sdkJSON)
		}
		ours, err := encodePool(&p)
		if err != nil {
			t.Fatalf("case %d: encode: %v", i, err)
		}
		if !reflect.DeepEqual(jsonValue(t, ours), jsonValue(t, sdkJSON)) {
			t.Fatalf("case %d: encoding differs from the SDK's\nours %s\nsdk  %s", i, ours, sdkJSON)
		}
	}
}

// TestPoolCodecEmptyAndNil pins the two cases a PUT depends on: a nil
// address list is omitted, an empty one is written as [] (it empties the
// pool).
func TestPoolCodecEmptyAndNil(t *testing.T) {
	for _, tc := range []struct {
		addrs []*armnetwork.LoadBalancerBackendAddress
		want  string
	}{
		{nil, `{"name":"p","properties":{}}`},
		{[]*armnetwork.LoadBalancerBackendAddress{}, `{"name":"p","properties":{"loadBalancerBackendAddresses":[]}}`},
	} {
		b, err := encodePool(&armnetwork.BackendAddressPool{Name: to.Ptr("p"),
			Properties: &armnetwork.BackendAddressPoolPropertiesFormat{LoadBalancerBackendAddresses: tc.addrs}})
		if err != nil || string(b) != tc.want {
			t.Errorf("encode = %s, %v; want %s", b, err, tc.want)
		}
	}
}

// TestPoolCodecNullValue: a NullValue sentinel is written as null, as the
// SDK writes it.
func TestPoolCodecNullValue(t *testing.T) {
	p := armnetwork.BackendAddressPool{Name: to.Ptr("p"), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
		LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{{Name: to.Ptr("a"),
			Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
				IPAddress:  to.Ptr("10.0.0.1"),
				AdminState: azcore.NullValue[*armnetwork.LoadBalancerBackendAddressAdminState](),
			}}}}}
	b, err := encodePool(&p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"adminState":null`) {
		t.Errorf("encode = %s; want an explicit null adminState", b)
	}
	p.Properties.LoadBalancerBackendAddresses[0].Properties.AdminState = nil
	p.Properties.BackendIPConfigurations = []*armnetwork.InterfaceIPConfiguration{{ID: to.Ptr("c"), Name: azcore.NullValue[*string]()}}
	if b, err = encodePool(&p); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"name":null`) {
		t.Errorf("encode = %s; want an explicit null ip configuration name", b)
	}
}

// TestPoolCodecErrors: malformed bodies fail with an error naming the type,
// as the SDK's do.
func TestPoolCodecErrors(t *testing.T) {
	for _, in := range []string{
		``, `{`, `[]`, `{"name":5}`, `{"properties":"x"}`, `{"properties":{"loadBalancerBackendAddresses":{}}}`,
		`{"properties":{"loadBalancerBackendAddresses":[{"properties":{"ipAddress":1}}]}}`,
		`{"properties":{"backendIPConfigurations":[1]}}`, `{"properties":{"tunnelInterfaces":"x"}}`, `{} x`,
		`{"properties":{"backendIPConfigurations":[{"properties":{"primary":"x"}}]}}`,
	} {
		_, err := decodePool([]byte(in))
		if err == nil || !strings.Contains(err.Error(), "BackendAddressPool") {
			t.Errorf("decode %q: err = %v; want an error naming BackendAddressPool", in, err)
		}
		var p armnetwork.BackendAddressPool
		if json.Unmarshal([]byte(in), &p) == nil {
			t.Errorf("decode %q: the SDK accepts it; the case does not test an error", in)
		}
	}
}

// FuzzPoolCodec: arbitrary bodies never panic, and whatever decodes
// re-encodes to a body the SDK decodes to the same pool.
func FuzzPoolCodec(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 8 {
		p := randomPool(r, 3)
		b, _ := json.Marshal(p)
		f.Add(b)
	}
	f.Add([]byte(`{"properties":{"loadBalancerBackendAddresses":[null,{"properties":null}],"backendIPConfigurations":null}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := decodePool(data)
		if err != nil {
			return
		}
		b, err := encodePool(&p)
		if err != nil {
			t.Fatalf("encode of a decoded pool: %v", err)
		}
		if back := sdkDecode(t, b); !reflect.DeepEqual(back, p) {
			t.Fatalf("re-encoded pool decodes differently\ninput %q\nencoded %s", data, b)
		}
	})
}

// TestPoolCodecCoversEverySDKField fails when the SDK's pool models gain a
// field the mirror types do not carry (it would be dropped from every pool
// written): each mirror type has exactly the exported fields of its model,
// and the fields kept raw are listed.
func TestPoolCodecCoversEverySDKField(t *testing.T) {
	pairs := []struct {
		sdk, mirror any
	}{
		{armnetwork.BackendAddressPool{}, poolWire{}},
		{armnetwork.BackendAddressPoolPropertiesFormat{}, poolPropsWire{}},
		{armnetwork.LoadBalancerBackendAddress{}, addressWire{}},
		{armnetwork.LoadBalancerBackendAddressPropertiesFormat{}, addressPropsWire{}},
		{armnetwork.SubResource{}, subWire{}},
		{armnetwork.NatRulePortMapping{}, natPortWire{}},
		{armnetwork.InterfaceIPConfiguration{}, ipConfigWire{}},
	}
	for _, p := range pairs {
		st, mt := reflect.TypeOf(p.sdk), reflect.TypeOf(p.mirror)
		want, got := fieldNames(st), fieldNames(mt)
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s has fields %v; the codec's %s has %v: carry the new field (poolcodec.go)", st, want, mt, got)
		}
	}
}

func fieldNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() {
			out = append(out, f.Name)
		}
	}
	sort.Strings(out)
	return out
}

func benchPool(n int) armnetwork.BackendAddressPool {
	vnet := "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet"
	p := armnetwork.BackendAddressPool{Name: to.Ptr("kubernetes"), Etag: to.Ptr(`W/"1"`),
		Properties: &armnetwork.BackendAddressPoolPropertiesFormat{LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{}}}
	for i := range n {
		p.Properties.LoadBalancerBackendAddresses = append(p.Properties.LoadBalancerBackendAddresses, &armnetwork.LoadBalancerBackendAddress{
			Name: to.Ptr(fmt.Sprintf("node-%04d", i)),
			Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
				IPAddress: to.Ptr(fmt.Sprintf("10.0.%d.%d", i/250, i%250)), VirtualNetwork: &armnetwork.SubResource{ID: &vnet},
				AdminState: to.Ptr(armnetwork.LoadBalancerBackendAddressAdminStateNone)}})
	}
	return p
}

// BenchmarkPoolCodec compares the codec with the SDK's on a pool of 1,000
// addresses:
//
//	go test -run '^$' -bench BenchmarkPoolCodec -benchmem ./internal/azure/
func BenchmarkPoolCodec(b *testing.B) {
	p := benchPool(1000)
	body, err := json.Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decode/sdk", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		cpu := cputime.Start()
		for b.Loop() {
			var out armnetwork.BackendAddressPool
			if err := json.Unmarshal(body, &out); err != nil {
				b.Fatal(err)
			}
		}
		cpu.Report(b)
	})
	b.Run("decode/azlb", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		cpu := cputime.Start()
		for b.Loop() {
			if _, err := decodePool(body); err != nil {
				b.Fatal(err)
			}
		}
		cpu.Report(b)
	})
	b.Run("encode/sdk", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		cpu := cputime.Start()
		for b.Loop() {
			if _, err := json.Marshal(p); err != nil {
				b.Fatal(err)
			}
		}
		cpu.Report(b)
	})
	b.Run("encode/azlb", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		cpu := cputime.Start()
		for b.Loop() {
			if _, err := encodePool(&p); err != nil {
				b.Fatal(err)
			}
		}
		cpu.Report(b)
	})
}

// TestEmulatorPoolCodecMatchesSDKClient writes a pool with the client (which
// encodes with the pool codec) and reads it back with the client and with
// the SDK's own generated client: both must see the same pool, whether ARM
// answers the write synchronously or through an asynchronous operation.
func TestEmulatorPoolCodecMatchesSDKClient(t *testing.T) {
	for _, opDuration := range []time.Duration{0, time.Millisecond} {
		t.Run(fmt.Sprintf("operation=%v", opDuration), func(t *testing.T) {
			env := newEmuEnv(t, emulator.Options{OperationDuration: opDuration}, "test-pool-codec", nil)
			lb := env.seed(t)
			ctx := context.Background()
			vnet := env.vnet(t)
			body := armnetwork.BackendAddressPool{Properties: &armnetwork.BackendAddressPoolPropertiesFormat{}}
			for i := range 50 {
				st := armnetwork.LoadBalancerBackendAddressAdminStateNone
				if i%7 == 0 {
					st = armnetwork.LoadBalancerBackendAddressAdminStateDown
				}
				body.Properties.LoadBalancerBackendAddresses = append(body.Properties.LoadBalancerBackendAddresses,
					&armnetwork.LoadBalancerBackendAddress{Name: to.Ptr(fmt.Sprintf("n%d", i)),
						Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
							IPAddress: to.Ptr(fmt.Sprintf("10.1.0.%d", i+4)), VirtualNetwork: &armnetwork.SubResource{ID: &vnet}, AdminState: &st}})
			}
			written, err := env.c.BackendPool.CreateOrUpdate(ctx, emuRG, emuLB, "pool", body, ptr.Deref(lb.Etag, ""))
			if err != nil {
				t.Fatal(err)
			}
			ours, err := env.c.BackendPool.Get(ctx, emuRG, emuLB, "pool")
			if err != nil {
				t.Fatal(err)
			}
			sdk, err := armnetwork.NewLoadBalancerBackendAddressPoolsClient(emuSub, env.c.Credential(), env.c.ARMClientOptions(ClientBackendPool))
			if err != nil {
				t.Fatal(err)
			}
			theirs, err := sdk.Get(ctx, emuRG, emuLB, "pool", nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*ours, theirs.BackendAddressPool) {
				t.Fatalf("the client and the SDK read different pools:\nours   %+v\ntheirs %+v", ours, theirs.BackendAddressPool)
			}
			if !reflect.DeepEqual(*written, *ours) {
				t.Errorf("the write's result differs from a fresh read")
			}
			got := ours.Properties.LoadBalancerBackendAddresses
			if len(got) != 50 || ptr.Deref(got[7].Properties.IPAddress, "") != "10.1.0.11" ||
				*got[7].Properties.AdminState != armnetwork.LoadBalancerBackendAddressAdminStateDown ||
				ptr.Deref(got[7].Properties.VirtualNetwork.ID, "") != vnet {
				t.Errorf("pool read back: %d entries, entry 7 = %+v", len(got), got[7].Properties)
			}
		})
	}
}

// vnet creates the virtual network 10.1.0.0/16 that IP-based pool members
// name, and returns its id.
func (env *emuEnv) vnet(t *testing.T) string {
	t.Helper()
	vnets, err := armnetwork.NewVirtualNetworksClient(emuSub, env.c.Credential(), env.c.ARMClientOptions("virtualNetwork"))
	if err != nil {
		t.Fatal(err)
	}
	vp, err := vnets.BeginCreateOrUpdate(context.Background(), emuRG, "vnet", armnetwork.VirtualNetwork{Location: to.Ptr(emuLoc),
		Properties: &armnetwork.VirtualNetworkPropertiesFormat{AddressSpace: &armnetwork.AddressSpace{
			AddressPrefixes: []*string{to.Ptr("10.1.0.0/16")}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	created, err := vp.PollUntilDone(context.Background(), &runtime.PollUntilDoneOptions{Frequency: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(created.ID, "")
}
