package azure

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// The backend pool codec encodes and decodes armnetwork.BackendAddressPool
// with the same JSON the SDK reads and writes, several times faster.
//
// Why: the SDK's generated (un)marshalers go through a map of raw messages
// at every level of nesting, so each byte of a pool entry is scanned about a
// dozen times. A pool of 1,000 addresses costs ~17 ms to decode and ~8 ms to
// encode that way, and every pool write reads and writes the whole pool: on
// a 2-core controller that CPU, not Azure, dominated an admin-state cutover.
//
// How: mirror types with json tags for the hot part (the pool, its
// properties, its address entries and the references of its
// backendIPConfigurations, which a NIC-based pool of 1,000 members carries
// 1,000 of) are encoded and decoded with encoding/json, without per-level
// maps; the rarely filled, deeply nested fields (an ip configuration's
// properties, tunnelInterfaces) stay raw and are handed to the SDK's own
// codec. The
// semantics are the SDK's: absent or null fields are nil, unknown fields are
// ignored, nil pointers are omitted, nil slices are omitted and empty ones
// written as []. Two differences, neither of which ARM produces: object keys
// match case-insensitively (encoding/json's rule; the SDK matches exactly),
// and a key repeated in one object merges rather than replaces. A pool
// holding azcore.NullValue sentinels is encoded by the SDK.
//
// The mirror types must carry every field of the SDK's models:
// TestPoolCodecCoversEverySDKField fails when an SDK upgrade adds one, which
// would otherwise be dropped from every pool written.

type poolWire struct {
	Etag       *string        `json:"etag,omitempty"`
	ID         *string        `json:"id,omitempty"`
	Name       *string        `json:"name,omitempty"`
	Properties *poolPropsWire `json:"properties,omitempty"`
	Type       *string        `json:"type,omitempty"`
}

type poolPropsWire struct {
	BackendIPConfigurations      []*ipConfigWire               `json:"backendIPConfigurations,omitzero"`
	DrainPeriodInSeconds         *int32                        `json:"drainPeriodInSeconds,omitempty"`
	InboundNatRules              []*subWire                    `json:"inboundNatRules,omitzero"`
	LoadBalancerBackendAddresses []*addressWire                `json:"loadBalancerBackendAddresses,omitzero"`
	LoadBalancingRules           []*subWire                    `json:"loadBalancingRules,omitzero"`
	Location                     *string                       `json:"location,omitempty"`
	OutboundRule                 *subWire                      `json:"outboundRule,omitempty"`
	OutboundRules                []*subWire                    `json:"outboundRules,omitzero"`
	ProvisioningState            *armnetwork.ProvisioningState `json:"provisioningState,omitempty"`
	SyncMode                     *armnetwork.SyncMode          `json:"syncMode,omitempty"`
	TunnelInterfaces             json.RawMessage               `json:"tunnelInterfaces,omitempty"`
	VirtualNetwork               *subWire                      `json:"virtualNetwork,omitempty"`
}

type addressWire struct {
	Name       *string           `json:"name,omitempty"`
	Properties *addressPropsWire `json:"properties,omitempty"`
}

type addressPropsWire struct {
	AdminState                          *armnetwork.LoadBalancerBackendAddressAdminState `json:"adminState,omitempty"`
	IPAddress                           *string                                          `json:"ipAddress,omitempty"`
	InboundNatRulesPortMapping          []*natPortWire                                   `json:"inboundNatRulesPortMapping,omitzero"`
	LoadBalancerFrontendIPConfiguration *subWire                                         `json:"loadBalancerFrontendIPConfiguration,omitempty"`
	NetworkInterfaceIPConfiguration     *subWire                                         `json:"networkInterfaceIPConfiguration,omitempty"`
	Subnet                              *subWire                                         `json:"subnet,omitempty"`
	VirtualNetwork                      *subWire                                         `json:"virtualNetwork,omitempty"`
}

// ipConfigWire is one of a pool's backendIPConfigurations: ARM returns only
// the id; properties, when present, go through the SDK's codec.
type ipConfigWire struct {
	Etag       *string         `json:"etag,omitempty"`
	ID         *string         `json:"id,omitempty"`
	Name       *string         `json:"name,omitempty"`
	Properties json.RawMessage `json:"properties,omitempty"`
	Type       *string         `json:"type,omitempty"`
}

type subWire struct {
	ID *string `json:"id,omitempty"`
}

type natPortWire struct {
	BackendPort        *int32  `json:"backendPort,omitempty"`
	FrontendPort       *int32  `json:"frontendPort,omitempty"`
	InboundNatRuleName *string `json:"inboundNatRuleName,omitempty"`
}

// decodeWire decodes into the mirror types.
func decodeWire(data []byte) (w poolWire, err error) {
	err = json.Unmarshal(data, &w)
	return w, err
}

// decodePool decodes a backend pool as the SDK would.
func decodePool(data []byte) (armnetwork.BackendAddressPool, error) {
	w, err := decodeWire(data)
	if err != nil {
		return armnetwork.BackendAddressPool{}, fmt.Errorf("unmarshalling type %T: %w", &armnetwork.BackendAddressPool{}, err)
	}
	out := armnetwork.BackendAddressPool{Etag: w.Etag, ID: w.ID, Name: w.Name, Type: w.Type}
	if w.Properties == nil {
		return out, nil
	}
	wp := w.Properties
	p := &armnetwork.BackendAddressPoolPropertiesFormat{
		DrainPeriodInSeconds: wp.DrainPeriodInSeconds,
		InboundNatRules:      subsOf(wp.InboundNatRules),
		LoadBalancingRules:   subsOf(wp.LoadBalancingRules),
		Location:             wp.Location,
		OutboundRule:         subOf(wp.OutboundRule),
		OutboundRules:        subsOf(wp.OutboundRules),
		ProvisioningState:    wp.ProvisioningState,
		SyncMode:             wp.SyncMode,
		VirtualNetwork:       subOf(wp.VirtualNetwork),
	}
	if err := decodeIPConfigs(wp.BackendIPConfigurations, p); err != nil {
		return armnetwork.BackendAddressPool{}, err
	}
	if err := sdkField(wp.TunnelInterfaces, "TunnelInterfaces", &p.TunnelInterfaces); err != nil {
		return armnetwork.BackendAddressPool{}, err
	}
	if wp.LoadBalancerBackendAddresses != nil {
		p.LoadBalancerBackendAddresses = make([]*armnetwork.LoadBalancerBackendAddress, len(wp.LoadBalancerBackendAddresses))
		// One allocation for all entries and one for all their properties.
		addrs := make([]armnetwork.LoadBalancerBackendAddress, len(wp.LoadBalancerBackendAddresses))
		props := make([]armnetwork.LoadBalancerBackendAddressPropertiesFormat, len(wp.LoadBalancerBackendAddresses))
		for i, wa := range wp.LoadBalancerBackendAddresses {
			if wa == nil {
				continue
			}
			a := &addrs[i]
			a.Name = wa.Name
			if pa := wa.Properties; pa != nil {
				ap := &props[i]
				*ap = armnetwork.LoadBalancerBackendAddressPropertiesFormat{
					AdminState:                          pa.AdminState,
					IPAddress:                           pa.IPAddress,
					LoadBalancerFrontendIPConfiguration: subOf(pa.LoadBalancerFrontendIPConfiguration),
					NetworkInterfaceIPConfiguration:     subOf(pa.NetworkInterfaceIPConfiguration),
					Subnet:                              subOf(pa.Subnet),
					VirtualNetwork:                      subOf(pa.VirtualNetwork),
				}
				if pa.InboundNatRulesPortMapping != nil {
					ap.InboundNatRulesPortMapping = make([]*armnetwork.NatRulePortMapping, len(pa.InboundNatRulesPortMapping))
					for j, m := range pa.InboundNatRulesPortMapping {
						if m != nil {
							ap.InboundNatRulesPortMapping[j] = &armnetwork.NatRulePortMapping{
								BackendPort: m.BackendPort, FrontendPort: m.FrontendPort, InboundNatRuleName: m.InboundNatRuleName}
						}
					}
				}
				a.Properties = ap
			}
			p.LoadBalancerBackendAddresses[i] = a
		}
	}
	out.Properties = p
	return out, nil
}

// sdkField decodes one raw field with the SDK's codec (absent and null
// leave it nil, as the SDK does).
func sdkField(raw json.RawMessage, name string, v any) error {
	if raw == nil || string(raw) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("unmarshalling type %T: struct field %s: %w", &armnetwork.BackendAddressPoolPropertiesFormat{}, name, err)
	}
	return nil
}

// decodeIPConfigs fills p.BackendIPConfigurations from their mirrors.
func decodeIPConfigs(ws []*ipConfigWire, p *armnetwork.BackendAddressPoolPropertiesFormat) error {
	if ws == nil {
		return nil
	}
	p.BackendIPConfigurations = make([]*armnetwork.InterfaceIPConfiguration, len(ws))
	cfgs := make([]armnetwork.InterfaceIPConfiguration, len(ws))
	for i, w := range ws {
		if w == nil {
			continue
		}
		c := &cfgs[i]
		*c = armnetwork.InterfaceIPConfiguration{Etag: w.Etag, ID: w.ID, Name: w.Name, Type: w.Type}
		if w.Properties != nil && string(w.Properties) != "null" {
			c.Properties = &armnetwork.InterfaceIPConfigurationPropertiesFormat{}
			if err := json.Unmarshal(w.Properties, c.Properties); err != nil {
				return fmt.Errorf("unmarshalling type %T: struct field BackendIPConfigurations: %w", p, err)
			}
		}
		p.BackendIPConfigurations[i] = c
	}
	return nil
}

// wireIPConfigs mirrors a pool's backendIPConfigurations for encoding.
func wireIPConfigs(cs []*armnetwork.InterfaceIPConfiguration) ([]*ipConfigWire, error) {
	if cs == nil {
		return nil, nil
	}
	out := make([]*ipConfigWire, len(cs))
	ws := make([]ipConfigWire, len(cs))
	for i, c := range cs {
		if c == nil {
			continue
		}
		w := &ws[i]
		*w = ipConfigWire{Etag: c.Etag, ID: c.ID, Name: c.Name, Type: c.Type}
		if c.Properties != nil {
			var err error
			if w.Properties, err = json.Marshal(c.Properties); err != nil {
				return nil, err
			}
		}
		out[i] = w
	}
	return out, nil
}

func subOf(w *subWire) *armnetwork.SubResource {
	if w == nil {
		return nil
	}
	return &armnetwork.SubResource{ID: w.ID}
}

func subsOf(ws []*subWire) []*armnetwork.SubResource {
	if ws == nil {
		return nil
	}
	out := make([]*armnetwork.SubResource, len(ws))
	for i, w := range ws {
		out[i] = subOf(w)
	}
	return out
}

func wireSub(s *armnetwork.SubResource) *subWire {
	if s == nil {
		return nil
	}
	return &subWire{ID: s.ID}
}

func wireSubs(ss []*armnetwork.SubResource) []*subWire {
	if ss == nil {
		return nil
	}
	out := make([]*subWire, len(ss))
	for i, s := range ss {
		out[i] = wireSub(s)
	}
	return out
}

// encodePool encodes a backend pool as the SDK would.
func encodePool(p *armnetwork.BackendAddressPool) ([]byte, error) {
	if hasNullSentinel(p) {
		return json.Marshal(p)
	}
	w := poolWire{Etag: p.Etag, ID: p.ID, Name: p.Name, Type: p.Type}
	if pp := p.Properties; pp != nil {
		wp := &poolPropsWire{
			DrainPeriodInSeconds: pp.DrainPeriodInSeconds,
			InboundNatRules:      wireSubs(pp.InboundNatRules),
			LoadBalancingRules:   wireSubs(pp.LoadBalancingRules),
			Location:             pp.Location,
			OutboundRule:         wireSub(pp.OutboundRule),
			OutboundRules:        wireSubs(pp.OutboundRules),
			ProvisioningState:    pp.ProvisioningState,
			SyncMode:             pp.SyncMode,
			VirtualNetwork:       wireSub(pp.VirtualNetwork),
		}
		var err error
		if wp.BackendIPConfigurations, err = wireIPConfigs(pp.BackendIPConfigurations); err != nil {
			return nil, err
		}
		if pp.TunnelInterfaces != nil {
			if wp.TunnelInterfaces, err = json.Marshal(pp.TunnelInterfaces); err != nil {
				return nil, err
			}
		}
		if pp.LoadBalancerBackendAddresses != nil {
			wp.LoadBalancerBackendAddresses = make([]*addressWire, len(pp.LoadBalancerBackendAddresses))
			addrs := make([]addressWire, len(pp.LoadBalancerBackendAddresses))
			props := make([]addressPropsWire, len(pp.LoadBalancerBackendAddresses))
			for i, a := range pp.LoadBalancerBackendAddresses {
				if a == nil {
					continue
				}
				wa := &addrs[i]
				wa.Name = a.Name
				if ap := a.Properties; ap != nil {
					wap := &props[i]
					*wap = addressPropsWire{
						AdminState:                          ap.AdminState,
						IPAddress:                           ap.IPAddress,
						LoadBalancerFrontendIPConfiguration: wireSub(ap.LoadBalancerFrontendIPConfiguration),
						NetworkInterfaceIPConfiguration:     wireSub(ap.NetworkInterfaceIPConfiguration),
						Subnet:                              wireSub(ap.Subnet),
						VirtualNetwork:                      wireSub(ap.VirtualNetwork),
					}
					if ap.InboundNatRulesPortMapping != nil {
						wap.InboundNatRulesPortMapping = make([]*natPortWire, len(ap.InboundNatRulesPortMapping))
						for j, m := range ap.InboundNatRulesPortMapping {
							if m != nil {
								wap.InboundNatRulesPortMapping[j] = &natPortWire{
									BackendPort: m.BackendPort, FrontendPort: m.FrontendPort, InboundNatRuleName: m.InboundNatRuleName}
							}
						}
					}
					wa.Properties = wap
				}
				wp.LoadBalancerBackendAddresses[i] = wa
			}
		}
		w.Properties = wp
	}
	return json.Marshal(w)
}

// ipConfigHasNull reports whether a backendIPConfigurations element holds
// a NullValue sentinel where the mirror carries a pointer.
func ipConfigHasNull(c *armnetwork.InterfaceIPConfiguration) bool {
	return c != nil && (c.Etag == nullString || c.ID == nullString || c.Name == nullString || c.Type == nullString ||
		c.Properties == nullCfgProps)
}

// NullValue sentinels of every pointer type the mirror types carry.
var (
	nullString    = azcore.NullValue[*string]()
	nullInt32     = azcore.NullValue[*int32]()
	nullSub       = azcore.NullValue[*armnetwork.SubResource]()
	nullAdmin     = azcore.NullValue[*armnetwork.LoadBalancerBackendAddressAdminState]()
	nullProvState = azcore.NullValue[*armnetwork.ProvisioningState]()
	nullSyncMode  = azcore.NullValue[*armnetwork.SyncMode]()
	nullPoolProps = azcore.NullValue[*armnetwork.BackendAddressPoolPropertiesFormat]()
	nullAddrProps = azcore.NullValue[*armnetwork.LoadBalancerBackendAddressPropertiesFormat]()
	nullCfgProps  = azcore.NullValue[*armnetwork.InterfaceIPConfigurationPropertiesFormat]()
)

// hasNullSentinel reports whether any field the mirror types encode holds
// an azcore.NullValue sentinel (which the SDK writes as an explicit null).
// Slices are not checked: a NullValue slice (an empty sentinel) is written
// as [] instead of null, which ARM reads the same way; azlb never builds
// one.
func hasNullSentinel(p *armnetwork.BackendAddressPool) bool {
	if p.Etag == nullString || p.ID == nullString || p.Name == nullString || p.Type == nullString || p.Properties == nullPoolProps {
		return true
	}
	pp := p.Properties
	if pp == nil {
		return false
	}
	if pp.DrainPeriodInSeconds == nullInt32 || pp.Location == nullString || pp.OutboundRule == nullSub ||
		pp.ProvisioningState == nullProvState || pp.SyncMode == nullSyncMode || pp.VirtualNetwork == nullSub {
		return true
	}
	if slices.ContainsFunc(pp.BackendIPConfigurations, ipConfigHasNull) {
		return true
	}
	for _, a := range pp.LoadBalancerBackendAddresses {
		if a == nil {
			continue
		}
		if a.Name == nullString || a.Properties == nullAddrProps {
			return true
		}
		if ap := a.Properties; ap != nil && (ap.AdminState == nullAdmin || ap.IPAddress == nullString ||
			ap.LoadBalancerFrontendIPConfiguration == nullSub || ap.NetworkInterfaceIPConfiguration == nullSub ||
			ap.Subnet == nullSub || ap.VirtualNetwork == nullSub) {
			return true
		}
	}
	return false
}
