package azure

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

type loadBalancerClient struct {
	*base
	c *armnetwork.LoadBalancersClient
	// codec carries Get and CreateOrUpdate with the load balancer codec
	// (lbcodec.go).
	codec *codecClient
}

var _ LoadBalancerClient = (*loadBalancerClient)(nil)

func (l *loadBalancerClient) Get(ctx context.Context, rg, name string) (*armnetwork.LoadBalancer, error) {
	return get(ctx, l.base, rg, rg+"/"+name,
		func(ctx context.Context) (lbResult, error) {
			return codecGet(ctx, l.codec, rg, name, "", decodeLBResult)
		},
		func(r *lbResult) *armnetwork.LoadBalancer { return &r.LoadBalancer })
}

func (l *loadBalancerClient) List(ctx context.Context, rg string) ([]*armnetwork.LoadBalancer, error) {
	return list(ctx, l.base, rg, rg,
		func() *runtime.Pager[armnetwork.LoadBalancersClientListResponse] { return l.c.NewListPager(rg, nil) },
		func(p armnetwork.LoadBalancersClientListResponse) []*armnetwork.LoadBalancer { return p.Value })
}

func (l *loadBalancerClient) CreateOrUpdate(ctx context.Context, rg, name string, lb armnetwork.LoadBalancer, etag string) (*armnetwork.LoadBalancer, error) {
	resp, err := writeOrDone(ctx, l.base, opCreateOrUpdate, rg, rg+"/"+name, etag,
		func(ctx context.Context) (*lbResult, *runtime.Poller[lbResult], error) {
			return codecPut(ctx, l.codec, rg, name, "", func() ([]byte, error) { return encodeLB(&lb) }, decodeLBResult)
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
	// codec carries Get and CreateOrUpdate with the pool codec
	// (poolcodec.go).
	codec *codecClient
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

// decodePoolResult decodes a pool and reads its provisioningState.
func decodePoolResult(b []byte) (poolResult, string, error) {
	p, err := decodePool(b)
	state := ""
	if p.Properties != nil && p.Properties.ProvisioningState != nil {
		state = string(*p.Properties.ProvisioningState)
	}
	return poolResult{p}, state, err
}

func (b *backendPoolClient) Get(ctx context.Context, rg, lb, pool string) (*armnetwork.BackendAddressPool, error) {
	return get(ctx, b.base, rg, rg+"/"+lb+"/"+pool,
		func(ctx context.Context) (poolResult, error) {
			return codecGet(ctx, b.codec, rg, lb, pool, decodePoolResult)
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
			return codecPut(ctx, b.codec, rg, lb, pool, func() ([]byte, error) { return encodePool(&p) }, decodePoolResult)
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
