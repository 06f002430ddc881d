package privatelink

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azlb/azlb/internal/annotations"
)

const (
	subA = "11111111-2222-3333-4444-555555555555"
	subB = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
)

var defs = Defaults{ResourceGroup: "cfg-rg", Subnet: "cfg-subnet"}

func TestParseDefaults(t *testing.T) {
	s, err := Parse(map[string]string{KeyCreate: " TRUE "}, defs)
	if err != nil {
		t.Fatal(err)
	}
	want := Spec{Create: true, ResourceGroup: "cfg-rg", Subnet: "cfg-subnet", IPCount: 1}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("got %+v, want %+v", s, want)
	}
	if n := s.NameFor("/subscriptions/x/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/lb/frontendIPConfigurations/abc"); n != "pls-abc" {
		t.Errorf("default name %q", n)
	}
	s, err = Parse(nil, defs)
	if err != nil || s.Create {
		t.Fatalf("no annotations: %+v %v", s, err)
	}
}

func TestParseEveryAnnotation(t *testing.T) {
	s, err := Parse(map[string]string{
		KeyCreate:        "true",
		KeyName:          "my-pls",
		KeyResourceGroup: "pls-rg",
		KeySubnet:        "nat",
		KeyIPCount:       "3",
		KeyIPAddresses:   "10.0.1.10  10.0.1.11",
		KeyFQDNs:         "a.example.com *.b.example.com",
		KeyProxyProtocol: "True",
		KeyVisibility:    subA + " " + strings.ToUpper(subB),
		KeyAutoApproval:  subB,
	}, defs)
	if err != nil {
		t.Fatal(err)
	}
	want := Spec{
		Create: true, Name: "my-pls", ResourceGroup: "pls-rg", Subnet: "nat", IPCount: 3,
		StaticIPs:     []netip.Addr{netip.MustParseAddr("10.0.1.10"), netip.MustParseAddr("10.0.1.11")},
		FQDNs:         []string{"a.example.com", "*.b.example.com"},
		ProxyProtocol: true,
		Visibility:    []string{subA, subB}, AutoApproval: []string{subB},
		Configured: []string{KeyName, KeySubnet, KeyIPCount, KeyIPAddresses, KeyFQDNs, KeyProxyProtocol, KeyVisibility, KeyAutoApproval},
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("got  %+v\nwant %+v", s, want)
	}
	s, err = Parse(map[string]string{KeyCreate: "true", KeyVisibility: "*", KeyAutoApproval: subA}, defs)
	if err != nil || !reflect.DeepEqual(s.Visibility, []string{"*"}) || !reflect.DeepEqual(s.AutoApproval, []string{subA}) {
		t.Fatalf("visibility *: %+v %v", s, err)
	}
}

// Each annotation's bad values: an error naming that annotation.
func TestParseBadValues(t *testing.T) {
	cases := []struct {
		key, value string
		extra      map[string]string
	}{
		{KeyCreate, "yes", nil},
		{KeyCreate, "1", nil},
		{KeyName, "-starts-with-dash", nil},
		{KeyName, "ends-with-dot.", nil},
		{KeyName, strings.Repeat("a", 81), nil},
		{KeyName, "has space", nil},
		{KeyResourceGroup, "ends.", nil},
		{KeyResourceGroup, "bad/rg", nil},
		{KeyResourceGroup, strings.Repeat("r", 91), nil},
		{KeySubnet, "sub/net", nil},
		{KeySubnet, "-x", nil},
		{KeyIPCount, "two", nil},
		{KeyIPCount, "0", nil},
		{KeyIPCount, "9", nil},
		{KeyIPCount, "-1", nil},
		{KeyIPAddresses, "10.0.0.300", nil},
		{KeyIPAddresses, "10.0.0.4,10.0.0.5", nil},
		{KeyIPAddresses, "fd00::4", nil},
		{KeyIPAddresses, "10.0.0.4 10.0.0.4", map[string]string{KeyIPCount: "2"}},
		{KeyIPAddresses, "10.0.0.4 10.0.0.5", nil}, // more than the count (1)
		{KeyFQDNs, "a..example.com", nil},
		{KeyFQDNs, "a,b.example.com", nil},
		{KeyFQDNs, "-a.example.com", nil},
		{KeyProxyProtocol, "on", nil},
		{KeyVisibility, "not-a-guid", nil},
		{KeyVisibility, "* " + subA, nil},
		{KeyVisibility, subA + " " + subA, nil},
		{KeyAutoApproval, "*", map[string]string{KeyVisibility: "*"}},
		{KeyAutoApproval, subB, map[string]string{KeyVisibility: subA}},
		{KeyAutoApproval, subB, nil}, // without visibility
		{KeyAutoApproval, "nope", map[string]string{KeyVisibility: "*"}},
	}
	for _, tc := range cases {
		t.Run(tc.key[len(annotations.Prefix):]+"="+tc.value, func(t *testing.T) {
			ann := map[string]string{KeyCreate: "true", tc.key: tc.value}
			for k, v := range tc.extra {
				ann[k] = v
			}
			_, err := Parse(ann, defs)
			if err == nil {
				t.Fatal("accepted")
			}
			var ae *annotations.Error
			if !errors.As(err, &ae) || ae.Key != tc.key {
				t.Fatalf("error %v does not name %s", err, tc.key)
			}
			if !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("message %q does not name %s", err, tc.key)
			}
		})
	}
}

func TestParseEmptyMeansUnset(t *testing.T) {
	ann := map[string]string{KeyCreate: "true"}
	for _, k := range Keys[1:] {
		ann[k] = "  "
	}
	s, err := Parse(ann, defs)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Configured) != 0 || s.IPCount != 1 || s.ResourceGroup != "cfg-rg" || s.Subnet != "cfg-subnet" {
		t.Fatalf("%+v", s)
	}
}

func TestIPConfigNamesAreCut(t *testing.T) {
	n := IPConfigName(strings.Repeat("s", 60), strings.Repeat("p", 60), "static-10.0.0.1")
	if len(n) != 80 {
		t.Fatalf("len %d", len(n))
	}
	s, _ := Parse(map[string]string{KeyCreate: "true", KeyIPCount: "3", KeyIPAddresses: "10.0.1.9"}, defs)
	d := Desired(s, Target{FrontendID: "/x/frontendIPConfigurations/fe", SubnetID: "/x/subnets/nat", Location: "eastus", ClusterName: "c", Owner: "ns/svc"}, "pls-fe")
	var names []string
	for _, c := range d.Properties.IPConfigurations {
		names = append(names, *c.Name)
	}
	want := []string{"nat-pls-fe-static-10.0.1.9", "nat-pls-fe-dynamic-1", "nat-pls-fe-dynamic-2"}
	if !reflect.DeepEqual(names, want) || !*d.Properties.IPConfigurations[0].Properties.Primary || *d.Properties.IPConfigurations[1].Properties.Primary {
		t.Fatalf("names %v", names)
	}
}

// The load balancer annotations parser leaves the azure-pls-* keys to this
// package: none is reported as unsupported.
func TestPLSKeysAreNotUnsupported(t *testing.T) {
	ann := map[string]string{}
	for _, k := range Keys {
		ann[k] = "x"
	}
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", Annotations: ann}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer}}
	spec, err := annotations.Parse(svc)
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Unsupported) != 0 {
		t.Fatalf("reported as unsupported: %v", spec.Unsupported)
	}
}
