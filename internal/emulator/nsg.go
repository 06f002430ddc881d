package emulator

import (
	"net/http"
	"strings"
)

func init() {
	registerKind(&kindSpec{
		typ: "networkSecurityGroups", fullType: "Microsoft.Network/networkSecurityGroups",
		collections: []*collSpec{securityRuleColl,
			{key: "defaultSecurityRules", fullType: "Microsoft.Network/networkSecurityGroups/defaultSecurityRules"}},
		normalize:   normalizeNSG,
		checkDelete: checkDeleteNSG,
	})
}

const securityRuleType = "Microsoft.Network/networkSecurityGroups/securityRules"

var securityRuleColl = &collSpec{
	key: "securityRules", fullType: securityRuleType, routable: true,
	putChild: putSecurityRule,
}

var defaultSecurityRules = []struct {
	name, desc, src, dst, access, dir string
	prio                              int
}{
	{"AllowVnetInBound", "Allow inbound traffic from all VMs in VNET", "VirtualNetwork", "VirtualNetwork", "Allow", "Inbound", 65000},
	{"AllowAzureLoadBalancerInBound", "Allow inbound traffic from azure load balancer", "AzureLoadBalancer", "*", "Allow", "Inbound", 65001},
	{"DenyAllInBound", "Deny all inbound traffic", "*", "*", "Deny", "Inbound", 65500},
	{"AllowVnetOutBound", "Allow outbound traffic from all VMs to all VMs in VNET", "VirtualNetwork", "VirtualNetwork", "Allow", "Outbound", 65000},
	{"AllowInternetOutBound", "Allow outbound traffic from all VMs to Internet", "*", "Internet", "Allow", "Outbound", 65001},
	{"DenyAllOutBound", "Deny all outbound traffic", "*", "*", "Deny", "Outbound", 65500},
}

func normSecurityRule(id string, cp obj, path string) *armError {
	if _, err := enumProp(cp, "protocol", path, "", "Tcp", "Udp", "Icmp", "Esp", "Ah", "*"); err != nil {
		return err
	}
	if _, err := enumProp(cp, "access", path, "", "Allow", "Deny"); err != nil {
		return err
	}
	if _, err := enumProp(cp, "direction", path, "", "Inbound", "Outbound"); err != nil {
		return err
	}
	for _, k := range []string{"protocol", "access", "direction"} {
		if s, _ := cp[k].(string); s == "" {
			return nrpError(http.StatusBadRequest, "SecurityRuleParameterRequired", "Security rule %s is missing the required property %s.", id, k)
		}
	}
	prio, has, err := getInt(cp, "priority", path)
	if err != nil {
		return errBadShape(err)
	}
	if !has || prio < 100 || prio > 4096 {
		return nrpError(http.StatusBadRequest, "SecurityRuleInvalidPriority",
			"Security rule %s has invalid Priority. Value provided: %d. Allowed range 100-4096.", id, prio)
	}
	cp["priority"] = prio
	for _, k := range []string{"sourcePortRanges", "destinationPortRanges", "sourceAddressPrefixes", "destinationAddressPrefixes"} {
		if _, _, err := getArr(cp, k, path); err != nil {
			return errBadShape(err)
		}
		setDefault(cp, k, []any{})
	}
	return nil
}

// checkRulePriorities rejects two rules with the same priority and direction.
func checkRulePriorities(rules []any) *armError {
	seen := map[string]string{}
	for _, r := range rules {
		ro := r.(obj)
		cp := propsOf(ro)
		key := stringOf(cp["direction"]) + "/" + strings.TrimSpace(jsonString(cp["priority"]))
		if prev, dup := seen[key]; dup {
			return nrpError(http.StatusBadRequest, "SecurityRuleConflict",
				"Security rule %s conflicts with rule %s. Rules cannot have the same Priority and Direction.", stringOf(ro["name"]), prev)
		}
		seen[key] = stringOf(ro["name"])
	}
	return nil
}

func jsonString(v any) string { return string(mustMarshal(v)) }

func normalizeNSG(wc *writeCtx, in obj, name string, old *version) (obj, *armError) {
	doc, props, ae := baseDoc(wc, kinds["networksecuritygroups"], in, name, old, true)
	if ae != nil {
		return nil, ae
	}
	id := doc["id"].(string)
	rules, ae := normChildren(props, "securityRules", id, securityRuleColl.fullType, "properties", nil,
		func(_, rid string, cp obj, path string) *armError { return normSecurityRule(rid, cp, path) })
	if ae != nil {
		return nil, ae
	}
	if ae := checkRulePriorities(rules); ae != nil {
		return nil, ae
	}
	props["securityRules"] = rules
	defs := make([]any, 0, len(defaultSecurityRules))
	for _, d := range defaultSecurityRules {
		defs = append(defs, obj{
			"name": d.name, "id": id + "/defaultSecurityRules/" + d.name,
			"type": "Microsoft.Network/networkSecurityGroups/defaultSecurityRules",
			"properties": obj{
				"description": d.desc, "protocol": "*", "sourcePortRange": "*", "destinationPortRange": "*",
				"sourceAddressPrefix": d.src, "destinationAddressPrefix": d.dst, "access": d.access,
				"priority": d.prio, "direction": d.dir,
				"sourcePortRanges": []any{}, "destinationPortRanges": []any{}, "sourceAddressPrefixes": []any{}, "destinationAddressPrefixes": []any{},
			},
		})
	}
	props["defaultSecurityRules"] = defs
	delete(props, "subnets")
	delete(props, "networkInterfaces")
	keepGUID(wc, props, old)
	doc["properties"] = props
	return doc, nil
}

func putSecurityRule(wc *writeCtx, parent obj, name string, in obj, existing obj) (obj, *armError) {
	rid, name, cp, ae := childIn(parent, "securityRules", name, in, existing)
	if ae != nil {
		return nil, ae
	}
	cp = shallowCopy(cp)
	delete(cp, "provisioningState")
	if ae := normSecurityRule(rid, cp, "properties"); ae != nil {
		return nil, ae
	}
	child := obj{"name": name, "id": rid, "type": securityRuleType, "properties": cp}
	var rules []any
	arr, _ := propsOf(parent)["securityRules"].([]any)
	for _, r := range arr {
		if !strings.EqualFold(stringOf(r.(obj)["name"]), name) {
			rules = append(rules, r)
		}
	}
	if ae := checkRulePriorities(append(rules, child)); ae != nil {
		return nil, ae
	}
	return child, nil
}

func checkDeleteNSG(wc *writeCtx, v *version) *armError {
	id := stringOf(v.doc["id"])
	for _, s := range wc.e.subs {
		for _, g := range s.groups {
			for key, en := range g.resources {
				if !strings.HasPrefix(key, "virtualnetworks/") || en.cur == nil || en.cur.phaseAt(wc.now) == phaseGone {
					continue
				}
				arr, _ := propsOf(en.cur.doc)["subnets"].([]any)
				for _, sn := range arr {
					if r, ok := propsOf(sn.(obj))["networkSecurityGroup"].(obj); ok && strings.EqualFold(stringOf(r["id"]), id) {
						return nrpError(http.StatusBadRequest, "InUseNetworkSecurityGroupCannotBeDeleted",
							"Network security group %s cannot be deleted because it is in use by the following resources: %s.", id, stringOf(sn.(obj)["id"]))
					}
				}
			}
		}
	}
	return nil
}
