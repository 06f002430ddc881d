package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azlb/azlb/internal/azure"
)

// New Standard public IPs and new internal frontends are zone-redundant
// where the region has availability zones, as the Azure cloud provider
// makes them: they get every zone of the region (["1","2","3"]). Which
// regions have zones ARM tells: the zone mappings of the Microsoft.Compute
// resource provider's virtualMachines type (what the Azure cloud
// provider's zone client reads). Existing public IPs and frontends keep
// the zones they have: Azure cannot change them.

// providersAPIVersion is the Microsoft.Resources api-version of the
// resource provider read.
const providersAPIVersion = "2021-04-01"

// armReader reads what the narrow clients of internal/azure do not: the
// region's zones (once) and public IP prefixes. It is built on first use
// with the clients' options (cloud, transport, retries, throttle gates,
// metrics).
type armReader struct {
	mu       sync.Mutex
	raw      *arm.Client
	prefixes map[string]*armnetwork.PublicIPPrefixesClient // by subscription
	zones    []*string
	zonesOK  bool
}

func (r *armReader) client(c *azure.Clients) (*arm.Client, error) {
	if r.raw == nil {
		raw, err := arm.NewClient("azlb", "v1.0.0", c.NetworkCredential(), c.ARMClientOptions("zones"))
		if err != nil {
			return nil, err
		}
		r.raw = raw
	}
	return r.raw, nil
}

// regionZones are the availability zones of the cluster's region, sorted
// (nil: it has none). A failure is not remembered: the next call asks
// again.
func (p *Provider) regionZones(ctx context.Context) ([]*string, error) {
	r := &p.arm
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.zonesOK {
		return r.zones, nil
	}
	c, err := r.client(p.clients)
	if err != nil {
		return nil, fmt.Errorf("availability zones: %w", err)
	}
	zones, err := readRegionZones(ctx, c, p.cfg.NetworkSubscriptionID(), p.cfg.Location)
	if err != nil {
		return nil, fmt.Errorf("read the availability zones of region %s: %w", p.cfg.Location, err)
	}
	r.zones, r.zonesOK = zones, true
	logger(ctx).Info("Availability zones of the region", "location", p.cfg.Location, "zones", derefAll(zones))
	return zones, nil
}

// providerDoc is the part of ARM's resource provider document read here.
type providerDoc struct {
	ResourceTypes []struct {
		ResourceType string `json:"resourceType"`
		ZoneMappings []struct {
			Location string   `json:"location"`
			Zones    []string `json:"zones"`
		} `json:"zoneMappings"`
	} `json:"resourceTypes"`
}

func readRegionZones(ctx context.Context, c *arm.Client, subscription, location string) ([]*string, error) {
	req, err := runtime.NewRequest(ctx, http.MethodGet,
		runtime.JoinPaths(c.Endpoint(), "/subscriptions/"+subscription+"/providers/Microsoft.Compute"))
	if err != nil {
		return nil, err
	}
	q := req.Raw().URL.Query()
	q.Set("api-version", providersAPIVersion)
	req.Raw().URL.RawQuery = q.Encode()
	req.Raw().Header.Set("Accept", "application/json")
	resp, err := c.Pipeline().Do(req)
	if err != nil {
		return nil, err
	}
	if !runtime.HasStatusCode(resp, http.StatusOK) {
		return nil, runtime.NewResponseError(resp)
	}
	body, err := runtime.Payload(resp)
	if err != nil {
		return nil, err
	}
	var doc providerDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("decode the Microsoft.Compute resource provider: %w", err)
	}
	want := normRegion(location)
	for _, rt := range doc.ResourceTypes {
		if !strings.EqualFold(rt.ResourceType, "virtualMachines") {
			continue
		}
		for _, zm := range rt.ZoneMappings {
			if normRegion(zm.Location) == want {
				zones := slices.Sorted(slices.Values(zm.Zones))
				out := make([]*string, len(zones))
				for i := range zones {
					out[i] = &zones[i]
				}
				return out, nil
			}
		}
	}
	return nil, nil
}

// normRegion lower-cases a region and drops its spaces ("East US" ->
// "eastus"): zone mappings carry display names.
func normRegion(l string) string { return strings.ToLower(strings.ReplaceAll(l, " ", "")) }

// publicIPPrefix reads a public IP prefix by id.
func (p *Provider) publicIPPrefix(ctx context.Context, id string) (*armnetwork.PublicIPPrefix, error) {
	rid, err := arm.ParseResourceID(id)
	if err != nil {
		return nil, err
	}
	r := &p.arm
	r.mu.Lock()
	c := r.prefixes[strings.ToLower(rid.SubscriptionID)]
	if c == nil {
		c, err = armnetwork.NewPublicIPPrefixesClient(rid.SubscriptionID, p.clients.NetworkCredential(), p.clients.ARMClientOptions("publicipprefix"))
		if err != nil {
			r.mu.Unlock()
			return nil, err
		}
		if r.prefixes == nil {
			r.prefixes = map[string]*armnetwork.PublicIPPrefixesClient{}
		}
		r.prefixes[strings.ToLower(rid.SubscriptionID)] = c
	}
	r.mu.Unlock()
	resp, err := c.Get(ctx, rid.ResourceGroupName, rid.Name, nil)
	if err != nil {
		return nil, err
	}
	return &resp.PublicIPPrefix, nil
}

func derefAll(s []*string) []string {
	out := make([]string, 0, len(s))
	for _, v := range s {
		if v != nil {
			out = append(out, *v)
		}
	}
	return out
}
