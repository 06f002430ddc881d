package azure

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

type loadBalancerClient struct {
	*base
	c *armnetwork.LoadBalancersClient
}

var _ LoadBalancerClient = (*loadBalancerClient)(nil)

func (l *loadBalancerClient) Get(ctx context.Context, rg, name string) (*armnetwork.LoadBalancer, error) {
	return get(ctx, l.base, rg, rg+"/"+name,
		func(ctx context.Context) (armnetwork.LoadBalancersClientGetResponse, error) {
			return l.c.Get(ctx, rg, name, nil)
		},
		func(r *armnetwork.LoadBalancersClientGetResponse) *armnetwork.LoadBalancer { return &r.LoadBalancer })
}

func (l *loadBalancerClient) List(ctx context.Context, rg string) ([]*armnetwork.LoadBalancer, error) {
	return list(ctx, l.base, rg, rg,
		func() *runtime.Pager[armnetwork.LoadBalancersClientListResponse] { return l.c.NewListPager(rg, nil) },
		func(p armnetwork.LoadBalancersClientListResponse) []*armnetwork.LoadBalancer { return p.Value })
}

func (l *loadBalancerClient) CreateOrUpdate(ctx context.Context, rg, name string, lb armnetwork.LoadBalancer, etag string) (*armnetwork.LoadBalancer, error) {
	resp, err := write(ctx, l.base, opCreateOrUpdate, rg, rg+"/"+name, etag,
		func(ctx context.Context) (*runtime.Poller[armnetwork.LoadBalancersClientCreateOrUpdateResponse], error) {
			return l.c.BeginCreateOrUpdate(ctx, rg, name, lb, nil)
		})
	if err != nil {
		return nil, err
	}
	return &resp.LoadBalancer, nil
}

func (l *loadBalancerClient) Delete(ctx context.Context, rg, name string) error {
	_, err := write(ctx, l.base, opDelete, rg, rg+"/"+name, "",
		func(ctx context.Context) (*runtime.Poller[armnetwork.LoadBalancersClientDeleteResponse], error) {
			return l.c.BeginDelete(ctx, rg, name, nil)
		})
	return err
}

type backendPoolClient struct {
	*base
	c *armnetwork.LoadBalancerBackendAddressPoolsClient
	// raw carries Get and CreateOrUpdate: the same pipeline (credential,
	// retry, throttle and metrics policies) as c, with the pool codec in
	// place of the SDK's JSON (see poolcodec.go).
	raw          *arm.Client
	subscription string
}

var _ BackendPoolClient = (*backendPoolClient)(nil)

// poolResult is a backend pool decoded with the pool codec; the poller of a
// pool write decodes into it.
type poolResult struct{ armnetwork.BackendAddressPool }

func (r *poolResult) UnmarshalJSON(b []byte) error {
	p, err := decodePool(b)
	r.BackendAddressPool = p
	return err
}

// completedPool returns the pool in the answer to a PUT when ARM completed
// the write synchronously: 200 or 201 with provisioningState Succeeded. The
// SDK's poller would find the same, after decoding the whole body into
// generic maps to read that one field; for a pool of 250 addresses that
// costs milliseconds on the cutover's critical path.
func completedPool(resp *http.Response) (*poolResult, bool) {
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return nil, false
	}
	body, err := runtime.Payload(resp)
	if err != nil || len(body) == 0 {
		return nil, false
	}
	p, err := decodePool(body)
	if err != nil || p.Properties == nil || p.Properties.ProvisioningState == nil ||
		!strings.EqualFold(string(*p.Properties.ProvisioningState), string(armnetwork.ProvisioningStateSucceeded)) {
		return nil, false
	}
	return &poolResult{p}, true
}

// request builds a request on the pool's URL, as the SDK's generated
// client does.
func (b *backendPoolClient) request(ctx context.Context, method, apiName, rg, lb, pool string) (*policy.Request, error) {
	for _, p := range []struct{ name, v string }{{"subscriptionID", b.subscription}, {"resourceGroupName", rg},
		{"loadBalancerName", lb}, {"backendAddressPoolName", pool}} {
		if p.v == "" {
			return nil, fmt.Errorf("parameter %s cannot be empty", p.name)
		}
	}
	ctx = context.WithValue(ctx, runtime.CtxAPINameKey{}, "LoadBalancerBackendAddressPoolsClient."+apiName)
	req, err := runtime.NewRequest(ctx, method, runtime.JoinPaths(b.raw.Endpoint(),
		"/subscriptions/"+url.PathEscape(b.subscription)+"/resourceGroups/"+url.PathEscape(rg)+
			"/providers/Microsoft.Network/loadBalancers/"+url.PathEscape(lb)+"/backendAddressPools/"+url.PathEscape(pool)))
	if err != nil {
		return nil, err
	}
	q := req.Raw().URL.Query()
	q.Set("api-version", NetworkAPIVersion)
	req.Raw().URL.RawQuery = q.Encode()
	req.Raw().Header["Accept"] = []string{"application/json"}
	return req, nil
}

func (b *backendPoolClient) Get(ctx context.Context, rg, lb, pool string) (*armnetwork.BackendAddressPool, error) {
	return get(ctx, b.base, rg, rg+"/"+lb+"/"+pool,
		func(ctx context.Context) (poolResult, error) {
			var out poolResult
			req, err := b.request(ctx, http.MethodGet, "Get", rg, lb, pool)
			if err != nil {
				return out, err
			}
			resp, err := b.raw.Pipeline().Do(req)
			if err != nil {
				return out, err
			}
			if !runtime.HasStatusCode(resp, http.StatusOK) {
				return out, runtime.NewResponseError(resp)
			}
			body, err := runtime.Payload(resp)
			if err != nil {
				return out, err
			}
			out.BackendAddressPool, err = decodePool(body)
			return out, err
		},
		func(r *poolResult) *armnetwork.BackendAddressPool { return &r.BackendAddressPool })
}

func (b *backendPoolClient) List(ctx context.Context, rg, lb string) ([]*armnetwork.BackendAddressPool, error) {
	return list(ctx, b.base, rg, rg+"/"+lb,
		func() *runtime.Pager[armnetwork.LoadBalancerBackendAddressPoolsClientListResponse] {
			return b.c.NewListPager(rg, lb, nil)
		},
		func(p armnetwork.LoadBalancerBackendAddressPoolsClientListResponse) []*armnetwork.BackendAddressPool {
			return p.Value
		})
}

func (b *backendPoolClient) CreateOrUpdate(ctx context.Context, rg, lb, pool string, p armnetwork.BackendAddressPool, etag string) (*armnetwork.BackendAddressPool, error) {
	resp, err := writeOrDone(ctx, b.base, opCreateOrUpdate, rg, rg+"/"+lb+"/"+pool, etag,
		func(ctx context.Context) (*poolResult, *runtime.Poller[poolResult], error) {
			req, err := b.request(ctx, http.MethodPut, "BeginCreateOrUpdate", rg, lb, pool)
			if err != nil {
				return nil, nil, err
			}
			body, err := encodePool(&p)
			if err != nil {
				return nil, nil, err
			}
			if err := req.SetBody(streaming.NopCloser(bytes.NewReader(body)), "application/json"); err != nil {
				return nil, nil, err
			}
			httpResp, err := b.raw.Pipeline().Do(req)
			if err != nil {
				return nil, nil, err
			}
			if !runtime.HasStatusCode(httpResp, http.StatusOK, http.StatusCreated) {
				return nil, nil, runtime.NewResponseError(httpResp)
			}
			if done, ok := completedPool(httpResp); ok {
				return done, nil, nil
			}
			poller, err := runtime.NewPoller(httpResp, b.raw.Pipeline(), &runtime.NewPollerOptions[poolResult]{
				FinalStateVia: runtime.FinalStateViaAzureAsyncOp,
			})
			return nil, poller, err
		})
	if err != nil {
		return nil, err
	}
	return &resp.BackendAddressPool, nil
}

func (b *backendPoolClient) Delete(ctx context.Context, rg, lb, pool string) error {
	_, err := write(ctx, b.base, opDelete, rg, rg+"/"+lb+"/"+pool, "",
		func(ctx context.Context) (*runtime.Poller[armnetwork.LoadBalancerBackendAddressPoolsClientDeleteResponse], error) {
			return b.c.BeginDelete(ctx, rg, lb, pool, nil)
		})
	return err
}

type publicIPClient struct {
	*base
	c *armnetwork.PublicIPAddressesClient
}

var _ PublicIPClient = (*publicIPClient)(nil)

func (p *publicIPClient) Get(ctx context.Context, rg, name string) (*armnetwork.PublicIPAddress, error) {
	return get(ctx, p.base, rg, rg+"/"+name,
		func(ctx context.Context) (armnetwork.PublicIPAddressesClientGetResponse, error) {
			return p.c.Get(ctx, rg, name, nil)
		},
		func(r *armnetwork.PublicIPAddressesClientGetResponse) *armnetwork.PublicIPAddress {
			return &r.PublicIPAddress
		})
}

func (p *publicIPClient) List(ctx context.Context, rg string) ([]*armnetwork.PublicIPAddress, error) {
	return list(ctx, p.base, rg, rg,
		func() *runtime.Pager[armnetwork.PublicIPAddressesClientListResponse] {
			return p.c.NewListPager(rg, nil)
		},
		func(r armnetwork.PublicIPAddressesClientListResponse) []*armnetwork.PublicIPAddress { return r.Value })
}

func (p *publicIPClient) CreateOrUpdate(ctx context.Context, rg, name string, pip armnetwork.PublicIPAddress, etag string) (*armnetwork.PublicIPAddress, error) {
	resp, err := write(ctx, p.base, opCreateOrUpdate, rg, rg+"/"+name, etag,
		func(ctx context.Context) (*runtime.Poller[armnetwork.PublicIPAddressesClientCreateOrUpdateResponse], error) {
			return p.c.BeginCreateOrUpdate(ctx, rg, name, pip, nil)
		})
	if err != nil {
		return nil, err
	}
	return &resp.PublicIPAddress, nil
}

func (p *publicIPClient) Delete(ctx context.Context, rg, name string) error {
	_, err := write(ctx, p.base, opDelete, rg, rg+"/"+name, "",
		func(ctx context.Context) (*runtime.Poller[armnetwork.PublicIPAddressesClientDeleteResponse], error) {
			return p.c.BeginDelete(ctx, rg, name, nil)
		})
	return err
}

type subnetClient struct {
	*base
	c *armnetwork.SubnetsClient
}

var _ SubnetClient = (*subnetClient)(nil)

func (s *subnetClient) Get(ctx context.Context, rg, vnet, subnet string) (*armnetwork.Subnet, error) {
	return get(ctx, s.base, rg, rg+"/"+vnet+"/"+subnet,
		func(ctx context.Context) (armnetwork.SubnetsClientGetResponse, error) {
			return s.c.Get(ctx, rg, vnet, subnet, nil)
		},
		func(r *armnetwork.SubnetsClientGetResponse) *armnetwork.Subnet { return &r.Subnet })
}
