package privatelink

import (
	"context"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// Client is the narrow ARM surface of Private Link Services the Store
// needs. Errors are the SDK's (*azcore.ResponseError), so azure.Classify
// applies.
type Client interface {
	// List returns every PLS of a resource group.
	List(ctx context.Context, resourceGroup string) ([]*armnetwork.PrivateLinkService, error)
	Get(ctx context.Context, resourceGroup, name string) (*armnetwork.PrivateLinkService, error)
	// CreateOrUpdate PUTs pls with If-Match: etag, or If-None-Match: *
	// when etag is "" (a create), waits until it is done and returns the
	// result.
	CreateOrUpdate(ctx context.Context, resourceGroup, name string, pls armnetwork.PrivateLinkService, etag string) (*armnetwork.PrivateLinkService, error)
	// Delete deletes a PLS and waits until it is gone.
	Delete(ctx context.Context, resourceGroup, name string) error
	// DeleteConnection deletes one private endpoint connection of a PLS
	// and waits until it is gone.
	DeleteConnection(ctx context.Context, resourceGroup, name, connection string) error
}

// SubnetClient reads and writes the NAT subnet (only its
// privateLinkServiceNetworkPolicies is ever changed).
type SubnetClient interface {
	Get(ctx context.Context, resourceGroup, vnet, subnet string) (*armnetwork.Subnet, error)
	// CreateOrUpdate PUTs the subnet with If-Match: etag and waits.
	CreateOrUpdate(ctx context.Context, resourceGroup, vnet, subnet string, s armnetwork.Subnet, etag string) error
}

// DefaultPollFrequency is how often writes poll their long-running
// operation (as internal/azure's clients do).
const DefaultPollFrequency = time.Second

// NewClients builds the SDK-backed Client and SubnetClient; writes poll
// their operations every pollFrequency (0: DefaultPollFrequency).
func NewClients(subscriptionID string, cred azcore.TokenCredential, opts *arm.ClientOptions, pollFrequency time.Duration) (Client, SubnetClient, error) {
	if pollFrequency <= 0 {
		pollFrequency = DefaultPollFrequency
	}
	po := &runtime.PollUntilDoneOptions{Frequency: pollFrequency}
	pls, err := armnetwork.NewPrivateLinkServicesClient(subscriptionID, cred, opts)
	if err != nil {
		return nil, nil, err
	}
	sn, err := armnetwork.NewSubnetsClient(subscriptionID, cred, opts)
	if err != nil {
		return nil, nil, err
	}
	return &sdkClient{c: pls, po: po}, &sdkSubnets{c: sn, po: po}, nil
}

type sdkClient struct {
	c  *armnetwork.PrivateLinkServicesClient
	po *runtime.PollUntilDoneOptions
}

func (s *sdkClient) List(ctx context.Context, rg string) ([]*armnetwork.PrivateLinkService, error) {
	var out []*armnetwork.PrivateLinkService
	p := s.c.NewListPager(rg, nil)
	for p.More() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Value...)
	}
	return out, nil
}

func (s *sdkClient) Get(ctx context.Context, rg, name string) (*armnetwork.PrivateLinkService, error) {
	r, err := s.c.Get(ctx, rg, name, nil)
	if err != nil {
		return nil, err
	}
	return &r.PrivateLinkService, nil
}

// conditional sets If-Match (or If-None-Match: * for "") on the requests
// issued with the returned context: only the initial PUT uses it.
func conditional(ctx context.Context, etag string) context.Context {
	h := http.Header{}
	if etag == "" {
		h.Set("If-None-Match", "*")
	} else {
		h.Set("If-Match", etag)
	}
	return policy.WithHTTPHeader(ctx, h)
}

func (s *sdkClient) CreateOrUpdate(ctx context.Context, rg, name string, pls armnetwork.PrivateLinkService, etag string) (*armnetwork.PrivateLinkService, error) {
	pls.Etag = nil
	poller, err := s.c.BeginCreateOrUpdate(conditional(ctx, etag), rg, name, pls, nil)
	if err != nil {
		return nil, err
	}
	r, err := poller.PollUntilDone(ctx, s.po)
	if err != nil {
		return nil, err
	}
	return &r.PrivateLinkService, nil
}

func (s *sdkClient) Delete(ctx context.Context, rg, name string) error {
	poller, err := s.c.BeginDelete(ctx, rg, name, nil)
	if err != nil {
		return err
	}
	_, err = poller.PollUntilDone(ctx, s.po)
	return err
}

func (s *sdkClient) DeleteConnection(ctx context.Context, rg, name, conn string) error {
	poller, err := s.c.BeginDeletePrivateEndpointConnection(ctx, rg, name, conn, nil)
	if err != nil {
		return err
	}
	_, err = poller.PollUntilDone(ctx, s.po)
	return err
}

type sdkSubnets struct {
	c  *armnetwork.SubnetsClient
	po *runtime.PollUntilDoneOptions
}

func (s *sdkSubnets) Get(ctx context.Context, rg, vnet, subnet string) (*armnetwork.Subnet, error) {
	r, err := s.c.Get(ctx, rg, vnet, subnet, nil)
	if err != nil {
		return nil, err
	}
	return &r.Subnet, nil
}

func (s *sdkSubnets) CreateOrUpdate(ctx context.Context, rg, vnet, subnet string, sn armnetwork.Subnet, etag string) error {
	sn.Etag = nil
	poller, err := s.c.BeginCreateOrUpdate(conditional(ctx, etag), rg, vnet, subnet, sn, nil)
	if err != nil {
		return err
	}
	_, err = poller.PollUntilDone(ctx, s.po)
	return err
}
