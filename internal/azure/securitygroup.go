package azure

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// SecurityGroupClient reads and writes the network security group azlb
// writes the inbound rules of LoadBalancer Services into
// (docs/security-groups.md). It never creates the group on its own account
// nor deletes it: CreateOrUpdate PUTs the whole group as read.
type SecurityGroupClient interface {
	Get(ctx context.Context, resourceGroup, name string) (*armnetwork.SecurityGroup, error)
	// CreateOrUpdate PUTs sg, with If-Match: etag when etag is non-empty,
	// waits for the long-running operation and returns the resulting
	// resource.
	CreateOrUpdate(ctx context.Context, resourceGroup, name string, sg armnetwork.SecurityGroup, etag string) (*armnetwork.SecurityGroup, error)
}

type securityGroupClient struct {
	*base
	c *armnetwork.SecurityGroupsClient
}

var _ SecurityGroupClient = (*securityGroupClient)(nil)

func (s *securityGroupClient) Get(ctx context.Context, rg, name string) (*armnetwork.SecurityGroup, error) {
	return get(ctx, s.base, rg, rg+"/"+name,
		func(ctx context.Context) (armnetwork.SecurityGroupsClientGetResponse, error) {
			return s.c.Get(ctx, rg, name, nil)
		},
		func(r *armnetwork.SecurityGroupsClientGetResponse) *armnetwork.SecurityGroup { return &r.SecurityGroup })
}

func (s *securityGroupClient) CreateOrUpdate(ctx context.Context, rg, name string, sg armnetwork.SecurityGroup, etag string) (*armnetwork.SecurityGroup, error) {
	resp, err := write(ctx, s.base, opCreateOrUpdate, rg, rg+"/"+name, etag,
		func(ctx context.Context) (*runtime.Poller[armnetwork.SecurityGroupsClientCreateOrUpdateResponse], error) {
			return s.c.BeginCreateOrUpdate(ctx, rg, name, sg, nil)
		})
	if err != nil {
		return nil, err
	}
	return &resp.SecurityGroup, nil
}
