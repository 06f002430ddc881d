package azure

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// fuzzStatuses are the answers FuzzARMResponse gives (5xx are retried
// by the SDK, 429 is left to the throttle tests: its gate waits).
var fuzzStatuses = []int{http.StatusOK, http.StatusOK, http.StatusOK, http.StatusCreated, http.StatusNotFound,
	http.StatusConflict, http.StatusPreconditionFailed, http.StatusBadRequest, http.StatusInternalServerError}

// FuzzARMResponse: whatever ARM (or a broken emulator) answers, the
// clients' reads and writes of load balancers, backend pools and public
// IPs never panic; they return either a value or a non-empty error; and a
// 200 read returns exactly what the SDK's own decoding gives, or an error
// when the SDK refuses the body (malformed, truncated, wrong types): nothing
// is lost or made up. Unknown fields are ignored as the SDK ignores them.
func FuzzARMResponse(f *testing.F) {
	lb := `{"name":"kubernetes","id":"/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/kubernetes","etag":"W/\"1\"",` +
		`"location":"eastus","properties":{"provisioningState":"Succeeded","frontendIPConfigurations":[{"name":"a","properties":{"privateIPAddress":"10.0.0.4"}}],` +
		`"backendAddressPools":[{"name":"kubernetes","properties":{"loadBalancerBackendAddresses":[{"name":"n1","properties":{"ipAddress":"10.240.0.4","adminState":"Down"}}]}}]}}`
	pool := `{"name":"kubernetes","etag":"W/\"2\"","properties":{"loadBalancerBackendAddresses":[{"name":"n1","properties":{"ipAddress":"10.240.0.4","virtualNetwork":{"id":"/v"}}}]}}`
	pip := `{"name":"kubernetes-a","etag":"W/\"3\"","sku":{"name":"Standard"},"properties":{"ipAddress":"20.40.0.1","publicIPAllocationMethod":"Static","ipTags":[]}}`
	for op := range uint8(9) {
		for _, body := range []string{lb, pool, pip, `{"value":[` + lb + `]}`, `{"value":[` + pool + `],"nextLink":null}`,
			`{"properties":{"frontendIPConfigurations":"oops"}}`, lb[:len(lb)/2], `{"error":{"code":"Conflict","message":"x"}}`, `null`, `{"unknown":{"deep":[1,2]}}`} {
			f.Add(op, uint8(0), []byte(body))
		}
	}
	f.Add(uint8(1), uint8(4), []byte(`{"error":{"code":"NotFound"}}`))
	f.Fuzz(fuzzARMResponse)
}

// fuzzARMResponse is one FuzzARMResponse case: operation op, status
// fuzzStatuses[status], the body.
func fuzzARMResponse(t *testing.T, op, status uint8, body []byte) {
	code := fuzzStatuses[int(status)%len(fuzzStatuses)]
	tr := policyTransport(func(req *http.Request) *http.Response { return respond(req, code, nil, string(body)) })
	c, err := NewClients(context.Background(), fakeConfig("https://arm.test"), ClientOptions{
		Transport: tr, Credential: staticCredential{}, RetryDelay: time.Millisecond, PollFrequency: time.Millisecond, Source: "fuzz"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A write whose body says it is still in progress polls until the
	// deadline: that ends in an error too.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var got any
	var sdk any
	switch op % 9 {
	case 0:
		got, err = c.LoadBalancer.Get(ctx, "rg", "kubernetes")
		sdk = &armnetwork.LoadBalancer{}
	case 1:
		got, err = c.BackendPool.Get(ctx, "rg", "kubernetes", "kubernetes")
		sdk = &armnetwork.BackendAddressPool{}
	case 2:
		got, err = c.PublicIP.Get(ctx, "rg", "kubernetes-a")
		sdk = &armnetwork.PublicIPAddress{}
	case 3:
		got, err = c.LoadBalancer.List(ctx, "rg")
	case 4:
		got, err = c.BackendPool.List(ctx, "rg", "kubernetes")
	case 5:
		got, err = c.PublicIP.List(ctx, "rg")
	case 6:
		got, err = c.LoadBalancer.CreateOrUpdate(ctx, "rg", "kubernetes", armnetwork.LoadBalancer{}, `W/"1"`)
	case 7:
		got, err = c.BackendPool.CreateOrUpdate(ctx, "rg", "kubernetes", "kubernetes", armnetwork.BackendAddressPool{}, "")
	default:
		err = c.PublicIP.Delete(ctx, "rg", "kubernetes-a")
		got = struct{}{}
	}
	if err != nil {
		if err.Error() == "" {
			t.Fatal("an error without a message")
		}
		return
	}
	if v := reflect.ValueOf(got); !v.IsValid() || v.Kind() == reflect.Pointer && v.IsNil() {
		t.Fatalf("op %d: no error and no value (status %d, body %q)", op%9, code, body)
	}
	if sdk == nil || code != http.StatusOK {
		return
	}
	if json.Unmarshal(body, sdk) != nil {
		t.Fatalf("op %d: a body the SDK refuses was accepted: %q", op%9, body)
	}
	if !reflect.DeepEqual(got, sdk) {
		t.Fatalf("op %d: decoded %+v, the SDK decodes %+v (body %q)", op%9, got, sdk, body)
	}
}
