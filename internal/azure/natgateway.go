package azure

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// NatGatewayClient reads and writes NAT gateways (egress identities of
// pod-based load balancing; one writer: internal/servicegateway).
type NatGatewayClient interface {
	Get(ctx context.Context, resourceGroup, name string) (*armnetwork.NatGateway, error)
	List(ctx context.Context, resourceGroup string) ([]*armnetwork.NatGateway, error)
	// CreateOrUpdate PUTs the NAT gateway. A properties.serviceGateway set
	// to azcore.NullValue is sent as an explicit JSON null (detaching it).
	CreateOrUpdate(ctx context.Context, resourceGroup, name string, nat armnetwork.NatGateway) (*armnetwork.NatGateway, error)
	Delete(ctx context.Context, resourceGroup, name string) error
}

type natGatewayClient struct {
	*base
	c *armnetwork.NatGatewaysClient
}

var _ NatGatewayClient = (*natGatewayClient)(nil)

func (n *natGatewayClient) Get(ctx context.Context, rg, name string) (*armnetwork.NatGateway, error) {
	return get(ctx, n.base, rg, rg+"/"+name,
		func(ctx context.Context) (armnetwork.NatGatewaysClientGetResponse, error) {
			return n.c.Get(ctx, rg, name, nil)
		},
		func(r *armnetwork.NatGatewaysClientGetResponse) *armnetwork.NatGateway { return &r.NatGateway })
}

func (n *natGatewayClient) List(ctx context.Context, rg string) ([]*armnetwork.NatGateway, error) {
	return list(ctx, n.base, rg, rg,
		func() *runtime.Pager[armnetwork.NatGatewaysClientListResponse] { return n.c.NewListPager(rg, nil) },
		func(r armnetwork.NatGatewaysClientListResponse) []*armnetwork.NatGateway { return r.Value })
}

func (n *natGatewayClient) CreateOrUpdate(ctx context.Context, rg, name string, nat armnetwork.NatGateway) (*armnetwork.NatGateway, error) {
	resp, err := write(ctx, n.base, opCreateOrUpdate, rg, rg+"/"+name, "",
		func(ctx context.Context) (*runtime.Poller[armnetwork.NatGatewaysClientCreateOrUpdateResponse], error) {
			return n.c.BeginCreateOrUpdate(ctx, rg, name, nat, nil)
		})
	if err != nil {
		return nil, err
	}
	return &resp.NatGateway, nil
}

func (n *natGatewayClient) Delete(ctx context.Context, rg, name string) error {
	_, err := write(ctx, n.base, opDelete, rg, rg+"/"+name, "",
		func(ctx context.Context) (*runtime.Poller[armnetwork.NatGatewaysClientDeleteResponse], error) {
			return n.c.BeginDelete(ctx, rg, name, nil)
		})
	return err
}
