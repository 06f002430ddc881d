package azure

import (
	"encoding/json"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// Mirror types of a load balancer's rules and probes for the load balancer
// codec (lbcodec.go): after the pools, a Service's rule and probe are most
// of a load balancer's bytes (250 of each on a load balancer of 250
// Services). Same rules as the pool codec's mirrors: every field of the
// SDK's model (TestLBCodecCoversEverySDKField), nil pointers and nil slices
// omitted, empty slices written as [], an element holding a NullValue
// sentinel encoded by the SDK.

type ruleWire struct {
	Etag       *string        `json:"etag,omitempty"`
	ID         *string        `json:"id,omitempty"`
	Name       *string        `json:"name,omitempty"`
	Properties *rulePropsWire `json:"properties,omitempty"`
	Type       *string        `json:"type,omitempty"`
}

type rulePropsWire struct {
	BackendAddressPool       *subWire                      `json:"backendAddressPool,omitempty"`
	BackendAddressPools      []*subWire                    `json:"backendAddressPools,omitzero"`
	BackendPort              *int32                        `json:"backendPort,omitempty"`
	DisableOutboundSnat      *bool                         `json:"disableOutboundSnat,omitempty"`
	EnableConnectionTracking *bool                         `json:"enableConnectionTracking,omitempty"`
	EnableFloatingIP         *bool                         `json:"enableFloatingIP,omitempty"`
	EnableTCPReset           *bool                         `json:"enableTcpReset,omitempty"`
	FrontendIPConfiguration  *subWire                      `json:"frontendIPConfiguration,omitempty"`
	FrontendPort             *int32                        `json:"frontendPort,omitempty"`
	IdleTimeoutInMinutes     *int32                        `json:"idleTimeoutInMinutes,omitempty"`
	LoadDistribution         *armnetwork.LoadDistribution  `json:"loadDistribution,omitempty"`
	Probe                    *subWire                      `json:"probe,omitempty"`
	Protocol                 *armnetwork.TransportProtocol `json:"protocol,omitempty"`
	ProvisioningState        *armnetwork.ProvisioningState `json:"provisioningState,omitempty"`
}

type probeWire struct {
	Etag       *string         `json:"etag,omitempty"`
	ID         *string         `json:"id,omitempty"`
	Name       *string         `json:"name,omitempty"`
	Properties *probePropsWire `json:"properties,omitempty"`
	Type       *string         `json:"type,omitempty"`
}

type probePropsWire struct {
	IntervalInSeconds         *int32                                     `json:"intervalInSeconds,omitempty"`
	LoadBalancingRules        []*subWire                                 `json:"loadBalancingRules,omitzero"`
	NoHealthyBackendsBehavior *armnetwork.ProbeNoHealthyBackendsBehavior `json:"noHealthyBackendsBehavior,omitempty"`
	NumberOfProbes            *int32                                     `json:"numberOfProbes,omitempty"`
	Port                      *int32                                     `json:"port,omitempty"`
	ProbeThreshold            *int32                                     `json:"probeThreshold,omitempty"`
	Protocol                  *armnetwork.ProbeProtocol                  `json:"protocol,omitempty"`
	ProvisioningState         *armnetwork.ProvisioningState              `json:"provisioningState,omitempty"`
	RequestPath               *string                                    `json:"requestPath,omitempty"`
}

func ruleOf(w *ruleWire) *armnetwork.LoadBalancingRule {
	out := &armnetwork.LoadBalancingRule{Etag: w.Etag, ID: w.ID, Name: w.Name, Type: w.Type}
	if p := w.Properties; p != nil {
		out.Properties = &armnetwork.LoadBalancingRulePropertiesFormat{
			BackendAddressPool: subOf(p.BackendAddressPool), BackendAddressPools: subsOf(p.BackendAddressPools),
			BackendPort: p.BackendPort, DisableOutboundSnat: p.DisableOutboundSnat, EnableConnectionTracking: p.EnableConnectionTracking,
			EnableFloatingIP: p.EnableFloatingIP, EnableTCPReset: p.EnableTCPReset, FrontendIPConfiguration: subOf(p.FrontendIPConfiguration),
			FrontendPort: p.FrontendPort, IdleTimeoutInMinutes: p.IdleTimeoutInMinutes, LoadDistribution: p.LoadDistribution,
			Probe: subOf(p.Probe), Protocol: p.Protocol, ProvisioningState: p.ProvisioningState,
		}
	}
	return out
}

func wireRule(r *armnetwork.LoadBalancingRule) *ruleWire {
	out := &ruleWire{Etag: r.Etag, ID: r.ID, Name: r.Name, Type: r.Type}
	if p := r.Properties; p != nil {
		out.Properties = &rulePropsWire{
			BackendAddressPool: wireSub(p.BackendAddressPool), BackendAddressPools: wireSubs(p.BackendAddressPools),
			BackendPort: p.BackendPort, DisableOutboundSnat: p.DisableOutboundSnat, EnableConnectionTracking: p.EnableConnectionTracking,
			EnableFloatingIP: p.EnableFloatingIP, EnableTCPReset: p.EnableTCPReset, FrontendIPConfiguration: wireSub(p.FrontendIPConfiguration),
			FrontendPort: p.FrontendPort, IdleTimeoutInMinutes: p.IdleTimeoutInMinutes, LoadDistribution: p.LoadDistribution,
			Probe: wireSub(p.Probe), Protocol: p.Protocol, ProvisioningState: p.ProvisioningState,
		}
	}
	return out
}

func probeOf(w *probeWire) *armnetwork.Probe {
	out := &armnetwork.Probe{Etag: w.Etag, ID: w.ID, Name: w.Name, Type: w.Type}
	if p := w.Properties; p != nil {
		out.Properties = &armnetwork.ProbePropertiesFormat{
			IntervalInSeconds: p.IntervalInSeconds, LoadBalancingRules: subsOf(p.LoadBalancingRules),
			NoHealthyBackendsBehavior: p.NoHealthyBackendsBehavior, NumberOfProbes: p.NumberOfProbes, Port: p.Port,
			ProbeThreshold: p.ProbeThreshold, Protocol: p.Protocol, ProvisioningState: p.ProvisioningState, RequestPath: p.RequestPath,
		}
	}
	return out
}

func wireProbe(r *armnetwork.Probe) *probeWire {
	out := &probeWire{Etag: r.Etag, ID: r.ID, Name: r.Name, Type: r.Type}
	if p := r.Properties; p != nil {
		out.Properties = &probePropsWire{
			IntervalInSeconds: p.IntervalInSeconds, LoadBalancingRules: wireSubs(p.LoadBalancingRules),
			NoHealthyBackendsBehavior: p.NoHealthyBackendsBehavior, NumberOfProbes: p.NumberOfProbes, Port: p.Port,
			ProbeThreshold: p.ProbeThreshold, Protocol: p.Protocol, ProvisioningState: p.ProvisioningState, RequestPath: p.RequestPath,
		}
	}
	return out
}

// NullValue sentinels of the pointer types only rules and probes carry.
var (
	nullBool       = azcore.NullValue[*bool]()
	nullDist       = azcore.NullValue[*armnetwork.LoadDistribution]()
	nullTransport  = azcore.NullValue[*armnetwork.TransportProtocol]()
	nullProbeProto = azcore.NullValue[*armnetwork.ProbeProtocol]()
	nullNoHealthy  = azcore.NullValue[*armnetwork.ProbeNoHealthyBackendsBehavior]()
	nullRuleProps  = azcore.NullValue[*armnetwork.LoadBalancingRulePropertiesFormat]()
	nullProbeProps = azcore.NullValue[*armnetwork.ProbePropertiesFormat]()
)

// ruleHasNull reports whether a rule holds a NullValue sentinel where the
// mirror carries a pointer.
func ruleHasNull(r *armnetwork.LoadBalancingRule) bool {
	if r.Etag == nullString || r.ID == nullString || r.Name == nullString || r.Type == nullString || r.Properties == nullRuleProps {
		return true
	}
	p := r.Properties
	return p != nil && (p.BackendAddressPool == nullSub || p.BackendPort == nullInt32 || p.DisableOutboundSnat == nullBool ||
		p.EnableConnectionTracking == nullBool || p.EnableFloatingIP == nullBool || p.EnableTCPReset == nullBool ||
		p.FrontendIPConfiguration == nullSub || p.FrontendPort == nullInt32 || p.IdleTimeoutInMinutes == nullInt32 ||
		p.LoadDistribution == nullDist || p.Probe == nullSub || p.Protocol == nullTransport || p.ProvisioningState == nullProvState)
}

// probeHasNull is ruleHasNull for a probe.
func probeHasNull(r *armnetwork.Probe) bool {
	if r.Etag == nullString || r.ID == nullString || r.Name == nullString || r.Type == nullString || r.Properties == nullProbeProps {
		return true
	}
	p := r.Properties
	return p != nil && (p.IntervalInSeconds == nullInt32 || p.NoHealthyBackendsBehavior == nullNoHealthy ||
		p.NumberOfProbes == nullInt32 || p.Port == nullInt32 || p.ProbeThreshold == nullInt32 || p.Protocol == nullProbeProto ||
		p.ProvisioningState == nullProvState || p.RequestPath == nullString)
}

// encodeRule encodes a rule as the SDK would: through the mirror, or
// through the SDK when it holds a NullValue sentinel.
func encodeRule(r *armnetwork.LoadBalancingRule) ([]byte, error) {
	if ruleHasNull(r) {
		return json.Marshal(r)
	}
	return json.Marshal(wireRule(r))
}

// encodeProbe is encodeRule for a probe.
func encodeProbe(p *armnetwork.Probe) ([]byte, error) {
	if probeHasNull(p) {
		return json.Marshal(p)
	}
	return json.Marshal(wireProbe(p))
}

// encodeList encodes a list as the SDK would: nil elements as null, the
// others with one.
func encodeList[T any](items []*T, one func(*T) ([]byte, error)) ([]byte, error) {
	out := []byte{'['}
	for i, it := range items {
		if i > 0 {
			out = append(out, ',')
		}
		if it == nil {
			out = append(out, "null"...)
			continue
		}
		b, err := one(it)
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return append(out, ']'), nil
}

// decodeList decodes a list member (null: nil) through its mirror; field
// names the SDK's field in errors.
func decodeList[T, W any](raw json.RawMessage, field string, conv func(*W) *T) ([]*T, error) {
	if raw == nil || isNull(raw) {
		return nil, nil
	}
	var ws []*W
	if err := json.Unmarshal(raw, &ws); err != nil {
		return nil, fmt.Errorf("struct field %s: %w", field, err)
	}
	out := make([]*T, len(ws))
	for i, w := range ws {
		if w != nil {
			out[i] = conv(w)
		}
	}
	return out, nil
}
