package azure

import (
	"encoding/json"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// The load balancer codec encodes and decodes armnetwork.LoadBalancer with
// the same JSON the SDK reads and writes: its backend pools through the pool
// codec (poolcodec.go), its rules and probes through mirror types
// (rulecodec.go), everything else through the SDK's own codec.
//
// Why: every write of a load balancer (a Service's rule added or removed)
// sends and reads the whole load balancer, and its pools, rules and probes
// are nearly all of its bytes (a pool of 1,250 IP-based members is ~250 KB
// of JSON; 250 Services bring 250 rules and probes). With the SDK's codec, a
// 5,000-node cluster's controller spent 78% of all its allocations there,
// and that garbage, not live state, set its peak memory
// (docs/reliability.md).
//
// How: encoding marshals the load balancer without its properties and the
// properties without those three lists with the SDK, then appends the lists
// to the properties object. Decoding splits the top-level object and the
// properties object into raw members (slices of the answer, not copies:
// jsonsplit.go), decodes the three lists with the
// codec and hands everything else, re-assembled, to the SDK. The semantics
// are the SDK's: a repeated member's last value wins, null and absent leave
// a field nil, unknown members are ignored, an element holding a NullValue
// sentinel is encoded by the SDK. One difference, which ARM never
// produces: inside pools, rules and probes, member names match
// case-insensitively (encoding/json's rule; the SDK matches exactly).

// lbResult is a load balancer decoded with this codec; the poller of a load
// balancer write decodes into it.
type lbResult struct{ armnetwork.LoadBalancer }

func (r *lbResult) UnmarshalJSON(b []byte) error {
	lb, err := decodeLB(b)
	r.LoadBalancer = lb
	return err
}

// decodeLBResult decodes a load balancer and reads its provisioningState.
func decodeLBResult(b []byte) (lbResult, string, error) {
	lb, err := decodeLB(b)
	state := ""
	if lb.Properties != nil && lb.Properties.ProvisioningState != nil {
		state = string(*lb.Properties.ProvisioningState)
	}
	return lbResult{lb}, state, err
}

var nullLBProps = azcore.NullValue[*armnetwork.LoadBalancerPropertiesFormat]()

// encodeLB encodes a load balancer as the SDK would.
func encodeLB(lb *armnetwork.LoadBalancer) ([]byte, error) {
	if lb.Properties == nil || lb.Properties == nullLBProps {
		return json.Marshal(lb)
	}
	// The lists the codec encodes itself; nil ones are omitted.
	type member struct {
		key  string
		json []byte
	}
	var lists []member
	if ps := lb.Properties.BackendAddressPools; ps != nil {
		b, err := encodeList(ps, encodePool)
		if err != nil {
			return nil, err
		}
		lists = append(lists, member{"backendAddressPools", b})
	}
	if rs := lb.Properties.LoadBalancingRules; rs != nil {
		b, err := encodeList(rs, encodeRule)
		if err != nil {
			return nil, err
		}
		lists = append(lists, member{"loadBalancingRules", b})
	}
	if ps := lb.Properties.Probes; ps != nil {
		b, err := encodeList(ps, encodeProbe)
		if err != nil {
			return nil, err
		}
		lists = append(lists, member{"probes", b})
	}
	props := *lb.Properties
	props.BackendAddressPools, props.LoadBalancingRules, props.Probes = nil, nil, nil
	propsJSON, err := json.Marshal(&props)
	if err != nil {
		return nil, err
	}
	shell := *lb
	shell.Properties = nil
	top, err := json.Marshal(&shell)
	if err != nil {
		return nil, err
	}
	size := len(top) + len(propsJSON) + 64
	for _, m := range lists {
		size += len(m.key) + len(m.json) + 4
	}
	// {top..., "properties": {props..., "key": [list], ...}}, in one buffer
	out, err := openObject(make([]byte, 0, size), top, "top-level")
	if err != nil {
		return nil, err
	}
	out = appendKey(out, len(top) > 2, "properties")
	if out, err = openObject(out, propsJSON, "properties"); err != nil {
		return nil, err
	}
	for i, m := range lists {
		out = append(appendKey(out, i > 0 || len(propsJSON) > 2, m.key), m.json...)
	}
	return append(out, "}}"...), nil
}

// openObject appends an encoded JSON object without its closing brace.
func openObject(out, object []byte, what string) ([]byte, error) {
	if len(object) < 2 || object[0] != '{' || object[len(object)-1] != '}' {
		return nil, fmt.Errorf("encoding the %s object: the SDK wrote %.20q, not a JSON object", what, object)
	}
	return append(out, object[:len(object)-1]...), nil
}

// appendKey appends `"key":` to an open object, after a comma when it has
// members already.
func appendKey(out []byte, more bool, key string) []byte {
	if more {
		out = append(out, ',')
	}
	out = append(out, '"')
	out = append(out, key...)
	return append(out, `":`...)
}

// decodeLB decodes a load balancer as the SDK would.
func decodeLB(data []byte) (armnetwork.LoadBalancer, error) {
	var lb armnetwork.LoadBalancer
	fail := func(err error) (armnetwork.LoadBalancer, error) {
		return armnetwork.LoadBalancer{}, fmt.Errorf("unmarshalling type %T: %w", &lb, err)
	}
	top, err := splitObject(data)
	if err != nil {
		return fail(err)
	}
	propsRaw, hasProps := top["properties"]
	delete(top, "properties")
	if err := sdkDecodeMembers(top, &lb); err != nil {
		return armnetwork.LoadBalancer{}, err
	}
	if !hasProps || isNull(propsRaw) {
		return lb, nil
	}
	members, err := splitValid(propsRaw) // a member of data, which splitObject validated
	if err != nil {
		return fail(fmt.Errorf("struct field Properties: %w", err))
	}
	poolsRaw, rulesRaw, probesRaw := members["backendAddressPools"], members["loadBalancingRules"], members["probes"]
	delete(members, "backendAddressPools")
	delete(members, "loadBalancingRules")
	delete(members, "probes")
	props := &armnetwork.LoadBalancerPropertiesFormat{}
	if err := sdkDecodeMembers(members, props); err != nil {
		return fail(fmt.Errorf("struct field Properties: %w", err))
	}
	if props.BackendAddressPools, err = decodeList(poolsRaw, "BackendAddressPools", func(p *poolResult) *armnetwork.BackendAddressPool {
		return &p.BackendAddressPool
	}); err != nil {
		return fail(fmt.Errorf("struct field Properties: %w", err))
	}
	if props.LoadBalancingRules, err = decodeList(rulesRaw, "LoadBalancingRules", ruleOf); err != nil {
		return fail(fmt.Errorf("struct field Properties: %w", err))
	}
	if props.Probes, err = decodeList(probesRaw, "Probes", probeOf); err != nil {
		return fail(fmt.Errorf("struct field Properties: %w", err))
	}
	lb.Properties = props
	return lb, nil
}

// sdkDecodeMembers decodes the members of an object with the SDK's codec
// of v (members already split off are not in the map).
func sdkDecodeMembers(members map[string]json.RawMessage, v json.Unmarshaler) error {
	b, err := json.Marshal(members)
	if err != nil {
		return err
	}
	return v.UnmarshalJSON(b)
}

// isNull: the SDK's test for a null member (a raw member carries no
// surrounding space).
func isNull(raw json.RawMessage) bool { return string(raw) == "null" }
