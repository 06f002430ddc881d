package azure

import (
	"context"
	"net/http"
	"strings"

	"github.com/azlb/azlb/internal/metrics"
)

// Client names. They name the per-client throttle gates and rate limiters in
// errors and logs, and select the azure.json rate-limit stanza.
const (
	ClientLoadBalancer    = "loadBalancer"
	ClientBackendPool     = "backendPool"
	ClientPublicIPAddress = "publicIPAddress"
	ClientSubnet          = "subnet"
	ClientScaleSet        = "virtualMachineScaleSet"
	ClientScaleSetVM      = "virtualMachineScaleSetVM"
	ClientVM              = "virtualMachine"
	ClientInterface       = "interface"
	ClientServiceGateway  = "serviceGateway"
	ClientSecurityGroup   = "securityGroup"
	ClientNatGateway      = "natGateway"
)

// requestInfo travels in the request context from a client method to the
// pipeline policies, which label metrics and logs with it.
type requestInfo struct {
	// request is the metric request label, e.g. "loadbalancer_get".
	request       string
	resourceGroup string
}

type requestInfoKey struct{}

func withRequestInfo(ctx context.Context, request, resourceGroup string) context.Context {
	return context.WithValue(ctx, requestInfoKey{}, requestInfo{request: request, resourceGroup: resourceGroup})
}

func requestInfoFrom(ctx context.Context) (requestInfo, bool) {
	ri, ok := ctx.Value(requestInfoKey{}).(requestInfo)
	return ri, ok
}

// labels are the per-pipeline constant metric label values.
type labels struct {
	subscriptionID string
	source         string
	// client is the fallback request label prefix for requests issued
	// without requestInfo (e.g. through ARMClientOptions).
	metricPrefix string
}

func (l labels) forRequest(req *http.Request) metrics.APIRequest {
	r := metrics.APIRequest{SubscriptionID: l.subscriptionID, Source: l.source}
	if ri, ok := requestInfoFrom(req.Context()); ok {
		r.Request, r.ResourceGroup = ri.request, ri.resourceGroup
		return r
	}
	r.Request = l.metricPrefix + "_" + lowerMethod(req.Method)
	r.ResourceGroup = resourceGroupFromPath(req.URL.Path)
	return r
}

// resourceGroupFromPath extracts the resource group of an ARM URL path
// (/subscriptions/{id}/resourceGroups/{rg}/...), or "".
func resourceGroupFromPath(path string) string {
	parts := strings.Split(path, "/")
	for i := 0; i+1 < len(parts); i++ {
		if strings.EqualFold(parts[i], "resourceGroups") {
			return parts[i+1]
		}
	}
	return ""
}

func lowerMethod(m string) string {
	switch m {
	case http.MethodGet:
		return "get"
	case http.MethodPut:
		return "put"
	case http.MethodPatch:
		return "patch"
	case http.MethodPost:
		return "post"
	case http.MethodDelete:
		return "delete"
	case http.MethodHead:
		return "head"
	default:
		return "other"
	}
}

// isRead reports whether a request is a read for the throttle gates: GET and
// HEAD are reads, everything else is a write.
func isRead(method string) bool {
	return method == http.MethodGet || method == http.MethodHead
}
