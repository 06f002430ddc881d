package privatelink

import (
	"reflect"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestDriftNamesWhatDiffers(t *testing.T) {
	spec, err := Parse(map[string]string{KeyCreate: "true", KeyIPCount: "2", KeyVisibility: subA, KeyFQDNs: "a.example.com"}, defs)
	if err != nil {
		t.Fatal(err)
	}
	tgt := Target{FrontendID: "/x/frontendIPConfigurations/fe", SubnetID: "/x/subnets/nat", Location: "eastus", ClusterName: "c", Owner: "ns/svc"}
	want := Desired(spec, tgt, "pls-fe")
	cur := Desired(spec, tgt, "pls-fe")
	if d := Drift(&cur, want); len(d) != 0 {
		t.Fatalf("the desired PLS drifts from itself: %v", d)
	}
	cur.Properties.EnableProxyProtocol = ptr.To(true)
	cur.Properties.Visibility = &armnetwork.PrivateLinkServicePropertiesVisibility{Subscriptions: []*string{ptr.To("*")}}
	cur.Properties.IPConfigurations = cur.Properties.IPConfigurations[:1]
	if d := Drift(&cur, want); !reflect.DeepEqual(d, []string{"NAT ip configurations", "proxy protocol", "visibility"}) {
		t.Fatalf("drift %v", d)
	}
	if d := Drift(nil, want); len(d) == 0 {
		t.Fatal("no PLS does not drift")
	}
}

func TestResourceGroupsOnceEach(t *testing.T) {
	svc := func(rg string) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{KeyResourceGroup: rg}}}
	}
	got := ResourceGroups("rg", []*v1.Service{svc(" other "), svc("RG"), svc(""), svc("Other")})
	if !reflect.DeepEqual(got, []string{"rg", "other"}) {
		t.Fatalf("%v", got)
	}
}
