package azure

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// The load balancer codec encodes and decodes armnetwork.LoadBalancer with
// the same JSON the SDK reads and writes; its backend pools go through the
// pool codec (poolcodec.go), everything else through the SDK's own codec.
//
// Why: a load balancer's pools are most of its bytes (a pool of 1,250
// IP-based members is ~250 KB of JSON), and every write of the load
// balancer (a Service's rule added or removed) sends and reads all of them.
// With the SDK's codec, a 5,000-node cluster's controller spent 78% of all
// its allocations encoding and decoding pools inside load balancer writes;
// that garbage, not live state, set its peak memory (docs/reliability.md).
//
// How: encoding marshals the load balancer without its pools and the
// properties without their pools with the SDK, then appends the pools,
// each encoded by the pool codec, to the properties object. Decoding splits
// the top-level object and the properties object into raw members, decodes
// the pools with the pool codec and hands everything else, re-assembled, to
// the SDK. The semantics are the SDK's: members are matched exactly, a
// repeated member's last value wins, null and absent leave a field nil,
// unknown members are ignored.

// lbResult is a load balancer decoded with this codec; the poller of a load
// balancer write decodes into it.
type lbResult struct{ armnetwork.LoadBalancer }

func (r *lbResult) UnmarshalJSON(b []byte) error {
	lb, err := decodeLB(b)
	r.LoadBalancer = lb
	return err
}

var nullLBProps = azcore.NullValue[*armnetwork.LoadBalancerPropertiesFormat]()

// encodeLB encodes a load balancer as the SDK would.
func encodeLB(lb *armnetwork.LoadBalancer) ([]byte, error) {
	if lb.Properties == nil || lb.Properties == nullLBProps || lb.Properties.BackendAddressPools == nil {
		return json.Marshal(lb)
	}
	props := *lb.Properties
	pools := props.BackendAddressPools
	props.BackendAddressPools = nil
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
	encoded := make([][]byte, len(pools))
	size := len(top) + len(propsJSON) + 64
	for i, p := range pools {
		if p == nil {
			encoded[i] = []byte("null")
		} else if encoded[i], err = encodePool(p); err != nil {
			return nil, err
		}
		size += len(encoded[i]) + 1
	}
	// top + "properties": propsJSON + "backendAddressPools": [pools], in one
	// buffer.
	out := make([]byte, 0, size)
	if out, err = openMember(out, top, "properties"); err != nil {
		return nil, err
	}
	if out, err = openMember(out, propsJSON, "backendAddressPools"); err != nil {
		return nil, err
	}
	out = append(out, '[')
	for i, b := range encoded {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, b...)
	}
	return append(out, "]}}"...), nil
}

// openMember appends an encoded JSON object to out without its closing
// brace, followed by the key of one more member: `{...,"key":`.
func openMember(out, object []byte, key string) ([]byte, error) {
	object = bytes.TrimSpace(object)
	if len(object) < 2 || object[0] != '{' || object[len(object)-1] != '}' {
		return nil, fmt.Errorf("encoding %s: the SDK wrote %.20q, not a JSON object", key, object)
	}
	out = append(out, object[:len(object)-1]...)
	if len(bytes.TrimSpace(object[1:len(object)-1])) > 0 {
		out = append(out, ',')
	}
	out = append(out, '"')
	out = append(out, key...)
	return append(out, `":`...), nil
}

// decodeLB decodes a load balancer as the SDK would.
func decodeLB(data []byte) (armnetwork.LoadBalancer, error) {
	var lb armnetwork.LoadBalancer
	fail := func(err error) (armnetwork.LoadBalancer, error) {
		return armnetwork.LoadBalancer{}, fmt.Errorf("unmarshalling type %T: %w", &lb, err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
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
	var members map[string]json.RawMessage
	if err := json.Unmarshal(propsRaw, &members); err != nil {
		return fail(fmt.Errorf("struct field Properties: %w", err))
	}
	poolsRaw := members["backendAddressPools"]
	delete(members, "backendAddressPools")
	props := &armnetwork.LoadBalancerPropertiesFormat{}
	if err := sdkDecodeMembers(members, props); err != nil {
		return fail(fmt.Errorf("struct field Properties: %w", err))
	}
	if poolsRaw != nil && !isNull(poolsRaw) {
		var pools []*poolResult
		if err := json.Unmarshal(poolsRaw, &pools); err != nil {
			return fail(fmt.Errorf("struct field Properties: struct field BackendAddressPools: %w", err))
		}
		props.BackendAddressPools = make([]*armnetwork.BackendAddressPool, len(pools))
		for i, p := range pools {
			if p != nil {
				props.BackendAddressPools[i] = &p.BackendAddressPool
			}
		}
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
