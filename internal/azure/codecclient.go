package azure

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
)

// codecClient sends the GETs and PUTs of load balancers and their pools
// through an SDK pipeline (credential, retry, throttle, write fence and
// metrics policies: the same as the generated client's) with azlb's codecs
// in place of the SDK's JSON. It builds the requests the generated clients
// build: same URL, api-version, Accept header and API name.
type codecClient struct {
	raw          *arm.Client
	subscription string
	sdkClient    string // the generated client's name, e.g. "LoadBalancersClient"
}

func newCodecClient(raw *arm.Client, subscription, sdkClient string) *codecClient {
	return &codecClient{raw: raw, subscription: subscription, sdkClient: sdkClient}
}

// request builds a request on a load balancer's URL, or on one of its
// pools' for the pool client.
func (c *codecClient) request(ctx context.Context, method, apiName, rg, lb, pool string) (*policy.Request, error) {
	isPool := c.sdkClient == sdkPoolClient
	params := []struct{ name, v string }{{"subscriptionID", c.subscription}, {"resourceGroupName", rg}, {"loadBalancerName", lb}}
	if isPool {
		params = append(params, struct{ name, v string }{"backendAddressPoolName", pool})
	}
	for _, p := range params {
		if p.v == "" {
			return nil, fmt.Errorf("parameter %s cannot be empty", p.name)
		}
	}
	path := "/subscriptions/" + url.PathEscape(c.subscription) + "/resourceGroups/" + url.PathEscape(rg) +
		"/providers/Microsoft.Network/loadBalancers/" + url.PathEscape(lb)
	if isPool {
		path += "/backendAddressPools/" + url.PathEscape(pool)
	}
	ctx = context.WithValue(ctx, runtime.CtxAPINameKey{}, c.sdkClient+"."+apiName)
	req, err := runtime.NewRequest(ctx, method, runtime.JoinPaths(c.raw.Endpoint(), path))
	if err != nil {
		return nil, err
	}
	q := req.Raw().URL.Query()
	q.Set("api-version", NetworkAPIVersion)
	req.Raw().URL.RawQuery = q.Encode()
	req.Raw().Header["Accept"] = []string{"application/json"}
	return req, nil
}

// The generated clients whose requests a codecClient builds.
const (
	sdkLBClient   = "LoadBalancersClient"
	sdkPoolClient = "LoadBalancerBackendAddressPoolsClient"
)

// codecGet GETs a load balancer or a pool and decodes the 200 answer with
// decode (which also returns the provisioningState, unused here).
func codecGet[R any](ctx context.Context, c *codecClient, rg, lb, pool string, decode func([]byte) (R, string, error)) (R, error) {
	var zero R
	req, err := c.request(ctx, http.MethodGet, "Get", rg, lb, pool)
	if err != nil {
		return zero, err
	}
	resp, err := c.raw.Pipeline().Do(req)
	if err != nil {
		return zero, err
	}
	if !runtime.HasStatusCode(resp, http.StatusOK) {
		return zero, runtime.NewResponseError(resp)
	}
	body, err := runtime.Payload(resp)
	if err != nil {
		return zero, err
	}
	out, _, err := decode(body)
	return out, err
}

// codecPut PUTs the body encode returns. A write ARM completed
// synchronously (as updates of load balancers and pools are) is returned
// decoded from its answer (synchronousResult): the SDK's poller would find
// the same after decoding the whole body into generic maps to read its
// provisioningState, which for a load balancer with large pools costs
// milliseconds and megabytes. Anything else gets a poller (R decodes the
// final resource with the codec).
func codecPut[R any](ctx context.Context, c *codecClient, rg, lb, pool string, encode func() ([]byte, error),
	decode func([]byte) (R, string, error)) (*R, *runtime.Poller[R], error) {
	req, err := c.request(ctx, http.MethodPut, "BeginCreateOrUpdate", rg, lb, pool)
	if err != nil {
		return nil, nil, err
	}
	body, err := encode()
	if err != nil {
		return nil, nil, err
	}
	if err := req.SetBody(streaming.NopCloser(bytes.NewReader(body)), "application/json"); err != nil {
		return nil, nil, err
	}
	resp, err := c.raw.Pipeline().Do(req)
	if err != nil {
		return nil, nil, err
	}
	if !runtime.HasStatusCode(resp, http.StatusOK, http.StatusCreated) {
		return nil, nil, runtime.NewResponseError(resp)
	}
	if out, ok := synchronousResult(resp, decode); ok {
		return &out, nil, nil
	}
	poller, err := runtime.NewPoller(resp, c.raw.Pipeline(), &runtime.NewPollerOptions[R]{
		FinalStateVia: runtime.FinalStateViaAzureAsyncOp,
	})
	return nil, poller, err
}
