package privatelink

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
)

// Drift names the members of cur that differ from desired, compared as
// Merge compares them: "frontend", "NAT ip configurations", "proxy
// protocol", "fqdns", "visibility", "auto-approval". Tags are not compared
// (ownership is the caller's question). None: cur matches.
func Drift(cur *armnetwork.PrivateLinkService, desired armnetwork.PrivateLinkService) []string {
	var props armnetwork.PrivateLinkServiceProperties
	if cur != nil && cur.Properties != nil {
		props = *cur.Properties
	}
	d := desired.Properties
	if d == nil {
		d = &armnetwork.PrivateLinkServiceProperties{}
	}
	var out []string
	if !sameFrontends(props.LoadBalancerFrontendIPConfigurations, d.LoadBalancerFrontendIPConfigurations) {
		out = append(out, "frontend")
	}
	if !sameIPConfigs(props.IPConfigurations, d.IPConfigurations) {
		out = append(out, "NAT ip configurations")
	}
	if ptr.Deref(props.EnableProxyProtocol, false) != ptr.Deref(d.EnableProxyProtocol, false) {
		out = append(out, "proxy protocol")
	}
	if !sameSet(fromPtrs(props.Fqdns), fromPtrs(d.Fqdns), false) {
		out = append(out, "fqdns")
	}
	if !sameSet(Visibility(&armnetwork.PrivateLinkService{Properties: &props}), Visibility(&armnetwork.PrivateLinkService{Properties: d}), true) {
		out = append(out, "visibility")
	}
	if !sameSet(AutoApproval(&armnetwork.PrivateLinkService{Properties: &props}), AutoApproval(&armnetwork.PrivateLinkService{Properties: d}), true) {
		out = append(out, "auto-approval")
	}
	return out
}

// Visibility is the subscriptions a PLS is visible to (none: only its
// own).
func Visibility(p *armnetwork.PrivateLinkService) []string {
	if p == nil || p.Properties == nil || p.Properties.Visibility == nil {
		return nil
	}
	return fromPtrs(p.Properties.Visibility.Subscriptions)
}

// AutoApproval is the subscriptions whose connections a PLS approves at
// once.
func AutoApproval(p *armnetwork.PrivateLinkService) []string {
	if p == nil || p.Properties == nil || p.Properties.AutoApproval == nil {
		return nil
	}
	return fromPtrs(p.Properties.AutoApproval.Subscriptions)
}

// Owner is the owning Service (<namespace>/<name>) a PLS's tag names (""
// when absent).
func Owner(p *armnetwork.PrivateLinkService) string {
	if p == nil {
		return ""
	}
	return ptr.Deref(tagValue(p.Tags, TagOwnerService), "")
}

// Cluster is the value of a PLS's cluster tag ("" when absent).
func Cluster(p *armnetwork.PrivateLinkService) string {
	if p == nil {
		return ""
	}
	return ptr.Deref(tagValue(p.Tags, TagClusterName), "")
}

// ResourceGroups is where a cluster's PLSs may be: def
// (privateLinkServiceResourceGroup) and every Service's
// azure-pls-resource-group, each once (ignoring case), def first.
func ResourceGroups(def string, svcs []*v1.Service) []string {
	out := []string{def}
	for _, svc := range svcs {
		rg := strings.TrimSpace(svc.Annotations[KeyResourceGroup])
		if rg != "" && !slices.ContainsFunc(out, func(s string) bool { return strings.EqualFold(s, rg) }) {
			out = append(out, rg)
		}
	}
	return out
}

// ListAll lists the PLSs of every resource group in rgs; a resource group
// that does not exist holds none.
func ListAll(ctx context.Context, c Client, rgs []string) ([]*armnetwork.PrivateLinkService, error) {
	var out []*armnetwork.PrivateLinkService
	for _, rg := range rgs {
		l, err := c.List(ctx, rg)
		if azure.Classify(err) == azure.ClassStale {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list private link services in %s: %w", rg, err)
		}
		out = append(out, l...)
	}
	return out, nil
}

// ConnectionState is one private endpoint connection of a PLS.
type ConnectionState struct {
	// Name is the connection's name; Endpoint the private endpoint's id.
	Name, Endpoint string
	// Status is Pending, Approved, Rejected, Removed or Disconnected;
	// Description Azure's (or the approver's) text.
	Status, Description string
}

// Connections lists a PLS's private endpoint connections.
func Connections(p *armnetwork.PrivateLinkService) []ConnectionState {
	if p == nil || p.Properties == nil {
		return nil
	}
	var out []ConnectionState
	for _, c := range p.Properties.PrivateEndpointConnections {
		if c == nil {
			continue
		}
		cs := ConnectionState{Name: ptr.Deref(c.Name, "")}
		if pr := c.Properties; pr != nil {
			if pr.PrivateEndpoint != nil {
				cs.Endpoint = ptr.Deref(pr.PrivateEndpoint.ID, "")
			}
			if st := pr.PrivateLinkServiceConnectionState; st != nil {
				cs.Status, cs.Description = ptr.Deref(st.Status, ""), ptr.Deref(st.Description, "")
			}
		}
		out = append(out, cs)
	}
	return out
}
