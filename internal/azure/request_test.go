package azure

import (
	"context"
	"net/http"
	"testing"

	"github.com/azlb/azlb/internal/metrics"
)

func TestLabelsForRequest(t *testing.T) {
	l := labels{subscriptionID: "sub", source: "src", metricPrefix: "natGateway"}
	tests := []struct {
		name   string
		ctx    context.Context
		method string
		path   string
		want   metrics.APIRequest
	}{
		{"with request info", withRequestInfo(context.Background(), "loadbalancer_get", "RG1"), http.MethodGet,
			"/subscriptions/sub/resourceGroups/other/providers/x", metrics.APIRequest{Request: "loadbalancer_get", ResourceGroup: "RG1", SubscriptionID: "sub", Source: "src"}},
		{"fallback from method and path", context.Background(), http.MethodPut,
			"/subscriptions/sub/resourcegroups/rg2/providers/Microsoft.Network/natGateways/n", metrics.APIRequest{Request: "natGateway_put", ResourceGroup: "rg2", SubscriptionID: "sub", Source: "src"}},
		{"no resource group", context.Background(), "PROPFIND", "/subscriptions/sub/providers/x",
			metrics.APIRequest{Request: "natGateway_other", SubscriptionID: "sub", Source: "src"}},
		{"resource group segment last", context.Background(), http.MethodDelete, "/subscriptions/sub/resourceGroups",
			metrics.APIRequest{Request: "natGateway_delete", SubscriptionID: "sub", Source: "src"}},
	}
	for _, tc := range tests {
		req, err := http.NewRequestWithContext(tc.ctx, tc.method, "https://arm.test"+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.forRequest(req); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestIsRead(t *testing.T) {
	for m, want := range map[string]bool{"GET": true, "HEAD": true, "PUT": false, "PATCH": false, "POST": false, "DELETE": false} {
		if isRead(m) != want {
			t.Errorf("isRead(%s) = %v", m, !want)
		}
	}
}
