package imds

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const scaleSetVM = `{"compute":{"name":"pool1_1","location":"EastUS","zone":"2","platformFaultDomain":"0",
"resourceId":"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/pool1/virtualMachines/1",
"vmSize":"Standard_D2s_v3","vmScaleSetName":"pool1","osProfile":{"computerName":"AKS-Pool1-000001"}},
"network":{"interface":[{"ipv4":{"ipAddress":[{"privateIpAddress":"10.0.0.5","publicIpAddress":""}],"subnet":[{"address":"10.0.0.0","prefix":"24"}]},
"ipv6":{"ipAddress":[{"privateIpAddress":"fd00::5"}]},"macAddress":"000D3A000001"},
{"ipv4":{"ipAddress":[{"privateIpAddress":"10.1.0.5"}]},"ipv6":{"ipAddress":[]}}]}}`

// fakeIMDS serves body to requests that follow IMDS's rules.
func fakeIMDS(t *testing.T, body string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Metadata") != "true":
			http.Error(w, `{"error":"Bad request. Required metadata header not specified"}`, http.StatusBadRequest)
		case r.URL.Path != "/metadata/instance" || r.URL.Query().Get("api-version") != APIVersion:
			http.Error(w, `{"error":"Not found"}`, http.StatusNotFound)
		default:
			_, _ = w.Write([]byte(body))
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func node(name string) *v1.Node { return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }

func TestInstanceMetadataFromIMDS(t *testing.T) {
	s := fakeIMDS(t, scaleSetVM)
	in := &Instances{NodeName: "aks-pool1-000001", Client: &Client{Endpoint: s.URL, HTTP: s.Client()}}
	md, err := in.InstanceMetadata(context.Background(), node("aks-pool1-000001"))
	if err != nil {
		t.Fatal(err)
	}
	if md.ProviderID != "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/pool1/virtualMachines/1" ||
		md.InstanceType != "Standard_D2s_v3" || md.Zone != "eastus-2" || md.Region != "eastus" {
		t.Fatalf("metadata %+v", md)
	}
	want := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.5"}, {Type: v1.NodeInternalIP, Address: "fd00::5"},
		{Type: v1.NodeInternalIP, Address: "10.1.0.5"}, {Type: v1.NodeHostName, Address: "aks-pool1-000001"}}
	if !reflect.DeepEqual(md.NodeAddresses, want) {
		t.Fatalf("addresses %v, want %v", md.NodeAddresses, want)
	}
	if ok, err := in.InstanceExists(context.Background(), node("aks-pool1-000001")); !ok || err != nil {
		t.Fatalf("exists %v %v", ok, err)
	}
	if down, err := in.InstanceShutdown(context.Background(), node("aks-pool1-000001")); down || err != nil {
		t.Fatalf("shutdown %v %v", down, err)
	}
}

func TestInstancesRefuseOtherNodes(t *testing.T) {
	s := fakeIMDS(t, scaleSetVM)
	in := &Instances{NodeName: "aks-pool1-000001", Client: &Client{Endpoint: s.URL, HTTP: s.Client()}}
	ctx := context.Background()
	if _, err := in.InstanceMetadata(ctx, node("other")); err == nil {
		t.Fatal("metadata for another node")
	}
	if _, err := in.InstanceExists(ctx, node("other")); err == nil {
		t.Fatal("exists for another node")
	}
	if _, err := in.InstanceShutdown(ctx, nil); err == nil {
		t.Fatal("shutdown for no node")
	}
}

func TestFaultDomainWithoutZone(t *testing.T) {
	inst := &Instance{Compute: Compute{ResourceID: "/x", Location: "westeurope", PlatformFaultDomain: "1"}}
	md, err := inst.NodeMetadata()
	if err != nil || md.Zone != "1" || md.Region != "westeurope" {
		t.Fatalf("%+v %v", md, err)
	}
	if _, err := (&Instance{}).NodeMetadata(); err == nil {
		t.Fatal("metadata without a resource id")
	}
}

func TestIMDSErrors(t *testing.T) {
	s := fakeIMDS(t, scaleSetVM)
	c := &Client{Endpoint: s.URL + "/wrong", HTTP: s.Client()}
	_, err := c.Instance(context.Background())
	var ie *Error
	if !errors.As(err, &ie) || ie.Status != http.StatusNotFound || ie.Message != "Not found" {
		t.Fatalf("error %v", err)
	}
	bad := fakeIMDS(t, "{")
	if _, err := (&Client{Endpoint: bad.URL, HTTP: bad.Client()}).Instance(context.Background()); err == nil {
		t.Fatal("a body that is not JSON")
	}
}
