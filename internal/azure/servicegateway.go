package azure

import (
	"context"
	"errors"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// ServiceGatewayClient reads and updates the services and address
// locations of a ServiceGateway (pod-based backend pools). It never creates
// or deletes the gateway itself.
type ServiceGatewayClient interface {
	// GetServices lists the gateway's services (every page).
	GetServices(ctx context.Context, resourceGroup, gateway string) ([]*armnetwork.ServiceGatewayService, error)
	// GetAddressLocations lists the gateway's address locations (every page).
	GetAddressLocations(ctx context.Context, resourceGroup, gateway string) ([]*armnetwork.ServiceGatewayAddressLocationResponse, error)
	// UpdateServices POSTs updateServices and waits until it is done.
	UpdateServices(ctx context.Context, resourceGroup, gateway string, req armnetwork.ServiceGatewayUpdateServicesRequest) error
	// UpdateAddressLocations POSTs updateAddressLocations and waits until it
	// is done.
	UpdateAddressLocations(ctx context.Context, resourceGroup, gateway string, req armnetwork.ServiceGatewayUpdateAddressLocationsRequest) error
}

// Operation names of the service gateway client (request labels
// servicegateway_<op>).
const (
	opGetServices            = "get_services"
	opGetAddressLocations    = "get_address_locations"
	opUpdateServices         = "update_services"
	opUpdateAddressLocations = "update_address_locations"
)

type serviceGatewayClient struct {
	*base
	c *armnetwork.ServiceGatewaysClient
}

var _ ServiceGatewayClient = (*serviceGatewayClient)(nil)

func (s *serviceGatewayClient) GetServices(ctx context.Context, rg, gw string) ([]*armnetwork.ServiceGatewayService, error) {
	return listOp(ctx, s.base, opGetServices, rg, rg+"/"+gw,
		func() *runtime.Pager[armnetwork.ServiceGatewaysClientGetServicesResponse] {
			return s.c.NewGetServicesPager(rg, gw, nil)
		},
		func(p armnetwork.ServiceGatewaysClientGetServicesResponse) []*armnetwork.ServiceGatewayService {
			return p.Value
		})
}

func (s *serviceGatewayClient) GetAddressLocations(ctx context.Context, rg, gw string) ([]*armnetwork.ServiceGatewayAddressLocationResponse, error) {
	return listOp(ctx, s.base, opGetAddressLocations, rg, rg+"/"+gw,
		func() *runtime.Pager[armnetwork.ServiceGatewaysClientGetAddressLocationsResponse] {
			return s.c.NewGetAddressLocationsPager(rg, gw, nil)
		},
		func(p armnetwork.ServiceGatewaysClientGetAddressLocationsResponse) []*armnetwork.ServiceGatewayAddressLocationResponse {
			return p.Value
		})
}

func (s *serviceGatewayClient) UpdateServices(ctx context.Context, rg, gw string, req armnetwork.ServiceGatewayUpdateServicesRequest) error {
	_, err := writeOrDone(ctx, s.base, opUpdateServices, rg, rg+"/"+gw, "",
		func(ctx context.Context) (*armnetwork.ServiceGatewaysClientUpdateServicesResponse, *runtime.Poller[armnetwork.ServiceGatewaysClientUpdateServicesResponse], error) {
			p, err := s.c.BeginUpdateServices(ctx, rg, gw, req, nil)
			if CompletedSynchronously(err) {
				return &armnetwork.ServiceGatewaysClientUpdateServicesResponse{}, nil, nil
			}
			return nil, p, err
		})
	return err
}

func (s *serviceGatewayClient) UpdateAddressLocations(ctx context.Context, rg, gw string, req armnetwork.ServiceGatewayUpdateAddressLocationsRequest) error {
	_, err := writeOrDone(ctx, s.base, opUpdateAddressLocations, rg, rg+"/"+gw, "",
		func(ctx context.Context) (*armnetwork.ServiceGatewaysClientUpdateAddressLocationsResponse, *runtime.Poller[armnetwork.ServiceGatewaysClientUpdateAddressLocationsResponse], error) {
			p, err := s.c.BeginUpdateAddressLocations(ctx, rg, gw, req, nil)
			if CompletedSynchronously(err) {
				return &armnetwork.ServiceGatewaysClientUpdateAddressLocationsResponse{}, nil, nil
			}
			return nil, p, err
		})
	return err
}

// CompletedSynchronously reports whether err is the armnetwork v9 SDK's
// rejection of NRP's synchronous answer to a service gateway POST: status
// 200 on the initial POST, with no error code. NRP completes
// updateServices and updateAddressLocations at once and answers 200, where
// the SDK accepts only 202 and 204; such a 200 is a success. A 200 with an
// error code, or one that ended polling (an operation that failed), is not.
func CompletedSynchronously(err error) bool {
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re == nil {
		return false
	}
	return re.StatusCode == http.StatusOK && re.ErrorCode == "" && re.RawResponse != nil &&
		re.RawResponse.Request != nil && re.RawResponse.Request.Method == http.MethodPost
}
