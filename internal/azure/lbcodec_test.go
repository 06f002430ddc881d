package azure

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/testutil/cputime"
)

// randomLB builds a load balancer whose pools exercise the pool codec
// (randomPool) and whose other members go through the SDK: nil, empty and
// filled lists, nil pools, null-free top-level fields.
func randomLB(r *rand.Rand) armnetwork.LoadBalancer {
	lb := armnetwork.LoadBalancer{Name: to.Ptr("lb"), ID: to.Ptr("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/lb"),
		Etag: to.Ptr(fmt.Sprintf(`W/"%d"`, r.IntN(1e6))), Location: to.Ptr("eastus"), Type: to.Ptr("Microsoft.Network/loadBalancers")}
	if r.IntN(2) == 0 {
		lb.SKU = &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)}
		lb.Tags = map[string]*string{"k": to.Ptr("v \u00e9"), "nil": nil}
	}
	if r.IntN(8) == 0 {
		return lb // no properties
	}
	props := &armnetwork.LoadBalancerPropertiesFormat{}
	if r.IntN(2) == 0 {
		props.ProvisioningState = to.Ptr(armnetwork.ProvisioningStateSucceeded)
		props.ResourceGUID = to.Ptr("guid")
	}
	for i := range r.IntN(4) {
		props.FrontendIPConfigurations = append(props.FrontendIPConfigurations, &armnetwork.FrontendIPConfiguration{
			Name: to.Ptr(fmt.Sprintf("fe%d", i)), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{
				PublicIPAddress: &armnetwork.PublicIPAddress{ID: to.Ptr(fmt.Sprintf("/pip/%d", i))}}})
	}
	props.LoadBalancingRules = randomList(r, func() *armnetwork.LoadBalancingRule { return randomRule(r) })
	props.Probes = randomList(r, func() *armnetwork.Probe { return randomProbe(r) })
	switch r.IntN(5) {
	case 0: // nil: omitted
	case 1:
		props.BackendAddressPools = []*armnetwork.BackendAddressPool{}
	default:
		for range 1 + r.IntN(4) {
			if r.IntN(6) == 0 {
				props.BackendAddressPools = append(props.BackendAddressPools, nil)
				continue
			}
			p := randomPool(r, r.IntN(6))
			props.BackendAddressPools = append(props.BackendAddressPools, &p)
		}
	}
	lb.Properties = props
	return lb
}

// randomList is nil, empty, or up to four elements, some of them nil.
func randomList[T any](r *rand.Rand, one func() *T) []*T {
	switch r.IntN(5) {
	case 0:
		return nil
	case 1:
		return []*T{}
	}
	var out []*T
	for range 1 + r.IntN(4) {
		if r.IntN(8) == 0 {
			out = append(out, nil)
			continue
		}
		out = append(out, one())
	}
	return out
}

// randomRule and randomProbe fill every field, each nil a third of the
// time (randomFields).
func randomRule(r *rand.Rand) *armnetwork.LoadBalancingRule {
	var rule armnetwork.LoadBalancingRule
	randomFields(r, &rule)
	return &rule
}

func randomProbe(r *rand.Rand) *armnetwork.Probe {
	var p armnetwork.Probe
	randomFields(r, &p)
	return &p
}

// randomFields sets the pointer, slice and string fields of the struct v
// points to, recursively, each left nil a third of the time.
func randomFields(r *rand.Rand, v any) {
	var fill func(reflect.Value, int)
	fill = func(f reflect.Value, depth int) {
		switch f.Kind() {
		case reflect.Pointer:
			if r.IntN(3) == 0 || depth > 4 {
				return
			}
			f.Set(reflect.New(f.Type().Elem()))
			fill(f.Elem(), depth+1)
		case reflect.Struct:
			for i := range f.NumField() {
				if f.Type().Field(i).IsExported() {
					fill(f.Field(i), depth+1)
				}
			}
		case reflect.Slice:
			switch r.IntN(3) {
			case 0:
			case 1:
				f.Set(reflect.MakeSlice(f.Type(), 0, 0))
			default:
				f.Set(reflect.MakeSlice(f.Type(), 2, 2))
				fill(f.Index(1), depth+1)
			}
		case reflect.String:
			f.SetString([]string{"", "Tcp", "x\"\\ \u00e9", "/subscriptions/s/id"}[r.IntN(4)])
		case reflect.Int32:
			f.SetInt(int64(r.IntN(70000) - 5))
		case reflect.Bool:
			f.SetBool(r.IntN(2) == 0)
		}
	}
	fill(reflect.ValueOf(v).Elem(), 0)
}

func sdkDecodeLB(t testing.TB, b []byte) armnetwork.LoadBalancer {
	t.Helper()
	var lb armnetwork.LoadBalancer
	if err := json.Unmarshal(b, &lb); err != nil {
		t.Fatalf("SDK decode: %v\n%s", err, b)
	}
	return lb
}

// TestLBCodecMatchesSDK: for random load balancers, the codec decodes what
// the SDK writes to what the SDK decodes, and writes the same JSON value the
// SDK writes.
func TestLBCodecMatchesSDK(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 1500 {
		lb := randomLB(r)
		sdkJSON, err := json.Marshal(lb)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeLB(sdkJSON)
		if err != nil {
			t.Fatalf("case %d: decode: %v\n%s", i, err, sdkJSON)
		}
		if want := sdkDecodeLB(t, sdkJSON); !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d: decode differs from the SDK's\ninput %s", i, sdkJSON)
		}
		ours, err := encodeLB(&lb)
		if err != nil {
			t.Fatalf("case %d: encode: %v", i, err)
		}
		if !reflect.DeepEqual(jsonValue(t, ours), jsonValue(t, sdkJSON)) {
			t.Fatalf("case %d: encoding differs from the SDK's\nours %s\nsdk  %s", i, ours, sdkJSON)
		}
	}
}

// TestLBCodecNullsAndEmpty pins the members a write depends on: an empty
// pool list is written as [] (it removes every pool), a nil one is omitted,
// explicit nulls decode to nil as the SDK's do.
func TestLBCodecNullsAndEmpty(t *testing.T) {
	for _, tc := range []struct {
		lb   armnetwork.LoadBalancer
		want string
	}{
		{armnetwork.LoadBalancer{Name: to.Ptr("a"), Properties: &armnetwork.LoadBalancerPropertiesFormat{
			BackendAddressPools: []*armnetwork.BackendAddressPool{}}}, `{"name":"a","properties":{"backendAddressPools":[]}}`},
		{armnetwork.LoadBalancer{Name: to.Ptr("a"), Properties: &armnetwork.LoadBalancerPropertiesFormat{}}, `{"name":"a","properties":{}}`},
		{armnetwork.LoadBalancer{Properties: &armnetwork.LoadBalancerPropertiesFormat{
			BackendAddressPools: []*armnetwork.BackendAddressPool{nil, {Name: to.Ptr("p")}}}}, `{"properties":{"backendAddressPools":[null,{"name":"p"}]}}`},
		{armnetwork.LoadBalancer{Name: to.Ptr("a"), Properties: azcore.NullValue[*armnetwork.LoadBalancerPropertiesFormat]()}, `{"name":"a","properties":null}`},
	} {
		b, err := encodeLB(&tc.lb)
		if err != nil || !reflect.DeepEqual(jsonValue(t, b), jsonValue(t, []byte(tc.want))) {
			t.Errorf("encode = %s, %v; want %s", b, err, tc.want)
		}
	}
	for _, in := range []string{`{}`, `{"properties":null}`, `{"properties":{}}`, `{"properties":{"backendAddressPools":null}}`,
		`{"properties":{"backendAddressPools":[null]}}`, `{"name":"a","name":"b","properties":{"backendAddressPools":[],"backendAddressPools":[{}]}}`} {
		got, err := decodeLB([]byte(in))
		if err != nil {
			t.Errorf("decode %s: %v", in, err)
			continue
		}
		if want := sdkDecodeLB(t, []byte(in)); !reflect.DeepEqual(got, want) {
			t.Errorf("decode %s = %+v; the SDK decodes %+v", in, got, want)
		}
	}
}

// TestLBCodecErrors: malformed bodies fail with an error naming the type,
// as the SDK's do.
func TestLBCodecErrors(t *testing.T) {
	for _, in := range []string{
		``, `{`, `[]`, `{"name":5}`, `{"properties":"x"}`, `{"properties":{"backendAddressPools":{}}}`,
		`{"properties":{"backendAddressPools":[{"properties":{"loadBalancerBackendAddresses":[{"properties":{"ipAddress":1}}]}}]}}`,
		`{"properties":{"loadBalancingRules":[1]}}`, `{"sku":"x"}`, `{} x`, `{"properties":{"backendAddressPools":[1]}}`,
	} {
		_, err := decodeLB([]byte(in))
		if err == nil || !strings.Contains(err.Error(), "LoadBalancer") {
			t.Errorf("decode %q: err = %v; want an error naming LoadBalancer", in, err)
		}
		var lb armnetwork.LoadBalancer
		if json.Unmarshal([]byte(in), &lb) == nil {
			t.Errorf("decode %q: the SDK accepts it; the case does not test an error", in)
		}
	}
}

// FuzzLBCodec: arbitrary bodies never panic, and whatever decodes
// re-encodes to a body the SDK decodes to the same load balancer.
func FuzzLBCodec(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 8 {
		lb := randomLB(r)
		b, _ := json.Marshal(lb)
		f.Add(b)
	}
	f.Add([]byte(`{"properties":{"backendAddressPools":[null,{"properties":null}],"probes":null},"tags":{"a":null}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		lb, err := decodeLB(data)
		if err != nil {
			return
		}
		b, err := encodeLB(&lb)
		if err != nil {
			t.Fatalf("encode of a decoded load balancer: %v", err)
		}
		if back := sdkDecodeLB(t, b); !reflect.DeepEqual(back, lb) {
			t.Fatalf("re-encoded load balancer decodes differently\ninput %q\nencoded %s", data, b)
		}
	})
}

// benchLB is a load balancer of the scale benchmark's shape: 250 rules and
// probes, one pool of n IP-based members.
func benchLB(n int) armnetwork.LoadBalancer {
	r := rand.New(rand.NewPCG(1, 1))
	lb := randomLB(r)
	lb.Properties = &armnetwork.LoadBalancerPropertiesFormat{}
	for i := range 250 {
		lb.Properties.FrontendIPConfigurations = append(lb.Properties.FrontendIPConfigurations, &armnetwork.FrontendIPConfiguration{
			Name: to.Ptr(fmt.Sprintf("fe%d", i)), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{
				PublicIPAddress: &armnetwork.PublicIPAddress{ID: to.Ptr(fmt.Sprintf("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/pip-%d", i))}}})
		lb.Properties.LoadBalancingRules = append(lb.Properties.LoadBalancingRules, &armnetwork.LoadBalancingRule{
			Name: to.Ptr(fmt.Sprintf("rule%d", i)), Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
				Protocol: to.Ptr(armnetwork.TransportProtocolTCP), FrontendPort: to.Ptr(int32(80)), BackendPort: to.Ptr(int32(80)),
				EnableFloatingIP: to.Ptr(true), FrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr("fe")},
				BackendAddressPool: &armnetwork.SubResource{ID: to.Ptr("pool")}, Probe: &armnetwork.SubResource{ID: to.Ptr("probe")}}})
		lb.Properties.Probes = append(lb.Properties.Probes, &armnetwork.Probe{Name: to.Ptr(fmt.Sprintf("probe%d", i)),
			Properties: &armnetwork.ProbePropertiesFormat{Port: to.Ptr(int32(30000 + i)), Protocol: to.Ptr(armnetwork.ProbeProtocolTCP)}})
	}
	p := benchPool(n)
	lb.Properties.BackendAddressPools = []*armnetwork.BackendAddressPool{&p}
	return lb
}

// BenchmarkLBCodec compares the codec with the SDK's on a load balancer of
// the scale benchmark's shape (250 rules, 1,250 pool members):
//
//	go test -run '^$' -bench BenchmarkLBCodec -benchmem ./internal/azure/
func BenchmarkLBCodec(b *testing.B) {
	lb := benchLB(1250)
	body, err := json.Marshal(lb)
	if err != nil {
		b.Fatal(err)
	}
	run := func(name string, f func() error) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			cpu := cputime.Start()
			for b.Loop() {
				if err := f(); err != nil {
					b.Fatal(err)
				}
			}
			cpu.Report(b)
		})
	}
	run("decode/sdk", func() error { var out armnetwork.LoadBalancer; return json.Unmarshal(body, &out) })
	run("decode/azlb", func() error { _, err := decodeLB(body); return err })
	run("encode/sdk", func() error { _, err := json.Marshal(lb); return err })
	run("encode/azlb", func() error { _, err := encodeLB(&lb); return err })
}

// TestEmulatorLBCodecMatchesSDKClient writes a load balancer with a pool
// of IP-based members through the client (which encodes with the codec),
// then reads it back with the client and with the SDK's generated client:
// both see the same load balancer, and the write's result is the fresh
// read.
func TestEmulatorLBCodecMatchesSDKClient(t *testing.T) {
	env := newEmuEnv(t, emulator.Options{}, "test-lb-codec", nil)
	lb := env.seed(t)
	ctx := context.Background()
	vnet := env.vnet(t)
	pool := armnetwork.BackendAddressPool{Name: to.Ptr("ips"), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{}}
	for i := range 40 {
		st := armnetwork.LoadBalancerBackendAddressAdminStateNone
		if i%5 == 0 {
			st = armnetwork.LoadBalancerBackendAddressAdminStateDown
		}
		pool.Properties.LoadBalancerBackendAddresses = append(pool.Properties.LoadBalancerBackendAddresses,
			&armnetwork.LoadBalancerBackendAddress{Name: to.Ptr(fmt.Sprintf("n%d", i)),
				Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
					IPAddress: to.Ptr(fmt.Sprintf("10.1.0.%d", i+4)), VirtualNetwork: &armnetwork.SubResource{ID: &vnet}, AdminState: &st}})
	}
	lb.Properties.BackendAddressPools = append(lb.Properties.BackendAddressPools, &pool)
	written, err := env.c.LoadBalancer.CreateOrUpdate(ctx, emuRG, emuLB, *lb, ptr.Deref(lb.Etag, ""))
	if err != nil {
		t.Fatal(err)
	}
	ours, err := env.c.LoadBalancer.Get(ctx, emuRG, emuLB)
	if err != nil {
		t.Fatal(err)
	}
	sdk, err := armnetwork.NewLoadBalancersClient(emuSub, env.c.Credential(), env.c.ARMClientOptions(ClientLoadBalancer))
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := sdk.Get(ctx, emuRG, emuLB, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*ours, theirs.LoadBalancer) {
		t.Fatalf("the client and the SDK read different load balancers:\nours   %+v\ntheirs %+v", ours, theirs.LoadBalancer)
	}
	if !reflect.DeepEqual(*written, *ours) {
		t.Errorf("the write's result differs from a fresh read")
	}
	got := findPoolIn(ours, "ips")
	if got == nil || len(got.Properties.LoadBalancerBackendAddresses) != 40 ||
		*got.Properties.LoadBalancerBackendAddresses[5].Properties.AdminState != armnetwork.LoadBalancerBackendAddressAdminStateDown {
		t.Errorf("pool read back: %+v", got)
	}
}

func findPoolIn(lb *armnetwork.LoadBalancer, name string) *armnetwork.BackendAddressPool {
	for _, p := range lb.Properties.BackendAddressPools {
		if p != nil && ptr.Deref(p.Name, "") == name {
			return p
		}
	}
	return nil
}

// TestLBCodecCoversEverySDKField: as TestPoolCodecCoversEverySDKField, for
// the rule and probe mirrors.
func TestLBCodecCoversEverySDKField(t *testing.T) {
	for _, p := range []struct{ sdk, mirror any }{
		{armnetwork.LoadBalancingRule{}, ruleWire{}},
		{armnetwork.LoadBalancingRulePropertiesFormat{}, rulePropsWire{}},
		{armnetwork.Probe{}, probeWire{}},
		{armnetwork.ProbePropertiesFormat{}, probePropsWire{}},
	} {
		st, mt := reflect.TypeOf(p.sdk), reflect.TypeOf(p.mirror)
		if want, got := fieldNames(st), fieldNames(mt); !reflect.DeepEqual(want, got) {
			t.Errorf("%s has fields %v; the codec's %s has %v: carry the new field (rulecodec.go)", st, want, mt, got)
		}
	}
}

// TestLBCodecNullValue: rules and probes holding a NullValue sentinel are
// written with an explicit null, as the SDK writes them.
func TestLBCodecNullValue(t *testing.T) {
	lb := armnetwork.LoadBalancer{Properties: &armnetwork.LoadBalancerPropertiesFormat{
		LoadBalancingRules: []*armnetwork.LoadBalancingRule{{Name: to.Ptr("r"), Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
			IdleTimeoutInMinutes: azcore.NullValue[*int32](), FrontendPort: to.Ptr(int32(80))}}},
		Probes: []*armnetwork.Probe{{Name: to.Ptr("p"), Properties: &armnetwork.ProbePropertiesFormat{
			RequestPath: azcore.NullValue[*string]()}}},
	}}
	b, err := encodeLB(&lb)
	if err != nil {
		t.Fatal(err)
	}
	sdk, _ := json.Marshal(lb)
	if !strings.Contains(string(b), `"idleTimeoutInMinutes":null`) || !strings.Contains(string(b), `"requestPath":null`) ||
		!reflect.DeepEqual(jsonValue(t, b), jsonValue(t, sdk)) {
		t.Errorf("encode = %s; the SDK writes %s", b, sdk)
	}
}
