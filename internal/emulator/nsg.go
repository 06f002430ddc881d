package emulator

import (
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"
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

// Limits of one network security group (Azure's documented limits).
const (
	maxSecurityRules    = 1000
	maxPrefixesPerSide  = 4000
	maxRuleDescription  = 140
	maxSecurityRuleName = 80
)

// ruleNameRE is the name rule of security rules: up to 80 characters,
// starting with a word character, ending with a word character or '_',
// with word characters, '.', '-' and '_' in between.
var ruleNameRE = regexp.MustCompile(`^[0-9A-Za-z_]([0-9A-Za-z_.-]*[0-9A-Za-z_])?$`)

// ruleSide names the members of one side of a security rule.
type ruleSide struct {
	prefix, prefixes, asgs string // JSON members
	label                  string // the side in messages: Source or Destination
}

var (
	sourceSide      = ruleSide{"sourceAddressPrefix", "sourceAddressPrefixes", "sourceApplicationSecurityGroups", "Source"}
	destinationSide = ruleSide{"destinationAddressPrefix", "destinationAddressPrefixes", "destinationApplicationSecurityGroups", "Destination"}
)

func normSecurityRule(e *Emulator, name, id string, cp obj, path string) *armError {
	if len(name) > maxSecurityRuleName || !ruleNameRE.MatchString(name) {
		return nrpError(http.StatusBadRequest, "InvalidResourceName",
			"Resource name %s is invalid. The name can be up to 80 characters long. It must begin with a word character, and it must end with a word character or with '_'. The name may contain word characters or '.', '-', '_'.", name)
	}
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
	desc, _, err := getStr(cp, "description", path)
	if err != nil {
		return errBadShape(err)
	}
	if n := utf8.RuneCountInString(desc); n > maxRuleDescription {
		return nrpError(http.StatusBadRequest, "SecurityRuleDescriptionTooLong",
			"Security rule %s has a description of %d characters; at most %d are allowed.", id, n, maxRuleDescription)
	}
	for _, side := range []ruleSide{sourceSide, destinationSide} {
		if ae := e.checkRuleAddresses(cp, id, path, side); ae != nil {
			return ae
		}
	}
	for _, k := range [][2]string{{"sourcePortRange", "sourcePortRanges"}, {"destinationPortRange", "destinationPortRanges"}} {
		if ae := checkRulePorts(cp, id, path, k[0], k[1]); ae != nil {
			return ae
		}
	}
	for _, k := range []string{"sourcePortRanges", "destinationPortRanges", "sourceAddressPrefixes", "destinationAddressPrefixes"} {
		setDefault(cp, k, []any{})
	}
	return nil
}

// stringList reads an array of strings.
func stringList(m obj, key, path string) ([]string, *armError) {
	arr, _, err := getArr(m, key, path)
	if err != nil {
		return nil, errBadShape(err)
	}
	out := make([]string, 0, len(arr))
	for i, v := range arr {
		s, ok := v.(string)
		if !ok {
			return nil, errBadShape(&fieldError{indexPath(joinPath(path, key), i), "expected a string, got " + jsonKind(v)})
		}
		out = append(out, s)
	}
	return out, nil
}

// upperFirst is a JSON member name as NRP's messages spell it.
func upperFirst(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// checkRuleAddresses validates one side's address prefix(es): one of the
// singular prefix, the plural prefixes or application security groups;
// the singular a CIDR, an IP, "*" or a known service tag; the plural CIDRs
// and IPs only.
func (e *Emulator) checkRuleAddresses(cp obj, id, path string, side ruleSide) *armError {
	single, _, err := getStr(cp, side.prefix, path)
	if err != nil {
		return errBadShape(err)
	}
	plural, ae := stringList(cp, side.prefixes, path)
	if ae != nil {
		return ae
	}
	asgs, _, err := getRefList(cp, side.asgs, path)
	if err != nil {
		return errBadShape(err)
	}
	switch {
	case single != "" && len(plural) > 0:
		return nrpError(http.StatusBadRequest, "SecurityRuleInvalidAddressPrefix",
			"Security rule %s specifies both %s and %s; only one of them may be given.", id, upperFirst(side.prefix), upperFirst(side.prefixes))
	case single == "" && len(plural) == 0 && len(asgs) == 0:
		return nrpError(http.StatusBadRequest, "SecurityRuleParameterRequired",
			"Security rule %s must specify %s, %s or %s.", id, upperFirst(side.prefix), upperFirst(side.prefixes), upperFirst(side.asgs))
	}
	if single != "" {
		if _, ok := parseNSGPrefix(single); !ok && single != "*" && !e.knownTag(single) {
			return errInvalidAddressPrefix(id, single)
		}
	}
	for _, p := range plural {
		if _, ok := parseNSGPrefix(p); ok {
			continue
		}
		if p == "*" || e.knownTag(p) {
			return nrpError(http.StatusBadRequest, "SecurityRuleParameterContainsUnsupportedValue",
				"Security rule parameter %s for rule with Id %s cannot specify existing VIRTUALNETWORK, INTERNET, AZURELOADBALANCER, '*' or system tags. Unsupported value used: %s.",
				upperFirst(side.prefixes), id, p)
		}
		return errInvalidAddressPrefix(id, p)
	}
	return nil
}

func errInvalidAddressPrefix(id, v string) *armError {
	return nrpError(http.StatusBadRequest, "SecurityRuleInvalidAddressPrefix",
		"Security rule %s has invalid Address prefix. Value provided: %s.", id, v)
}

// checkRulePorts validates one side's port range(s): one of the singular
// range ("*", "N" or "A-B") or the plural ranges ("N" or "A-B").
func checkRulePorts(cp obj, id, path, singleKey, pluralKey string) *armError {
	single, _, err := getStr(cp, singleKey, path)
	if err != nil {
		return errBadShape(err)
	}
	plural, ae := stringList(cp, pluralKey, path)
	if ae != nil {
		return ae
	}
	switch {
	case single != "" && len(plural) > 0:
		return nrpError(http.StatusBadRequest, "SecurityRuleInvalidPortRange",
			"Security rule %s specifies both %s and %s; only one of them may be given.", id, upperFirst(singleKey), upperFirst(pluralKey))
	case single == "" && len(plural) == 0:
		return nrpError(http.StatusBadRequest, "SecurityRuleParameterRequired",
			"Security rule %s must specify %s or %s.", id, upperFirst(singleKey), upperFirst(pluralKey))
	}
	if single != "" {
		if _, ok := parsePortRange(single); !ok {
			return errInvalidPortRange(single)
		}
	}
	for _, p := range plural {
		if p == "*" {
			return nrpError(http.StatusBadRequest, "SecurityRuleParameterContainsUnsupportedValue",
				"Security rule parameter %s for rule with Id %s cannot specify '*'. Unsupported value used: *.", upperFirst(pluralKey), id)
		}
		if _, ok := parsePortRange(p); !ok {
			return errInvalidPortRange(p)
		}
	}
	return nil
}

func errInvalidPortRange(v string) *armError {
	return nrpError(http.StatusBadRequest, "SecurityRuleInvalidPortRange",
		"Security rule has invalid Port range. Value provided: %s. Value should be an integer OR integer range with '-' delimiter. Valid range 0-65535.", v)
}

// checkNSGRules applies the group-wide rules to the security rules an NSG
// would hold after a write: at most 1,000 rules, no two with the same
// priority and direction, at most 4,000 source and 4,000 destination
// address prefixes summed over the rules (a singular prefix counts 1).
func checkNSGRules(nsgID string, rules []any) *armError {
	if len(rules) > maxSecurityRules {
		return nrpError(http.StatusBadRequest, "SecurityRuleCountLimitReached",
			"A security group cannot have more than %d security rules.", maxSecurityRules)
	}
	if ae := checkRulePriorities(rules); ae != nil {
		return ae
	}
	for _, side := range []ruleSide{sourceSide, destinationSide} {
		n := 0
		for _, r := range rules {
			cp := propsOf(r.(obj))
			if s, _ := cp[side.prefix].(string); s != "" {
				n++
			}
			arr, _ := cp[side.prefixes].([]any)
			n += len(arr)
		}
		if n > maxPrefixesPerSide {
			return nrpError(http.StatusBadRequest, "SecurityRuleAddressesOrPortsPerSecurityGroupLimitReached",
				"Network security group %s has %d %sAddressPrefixes. A security group cannot have more than %d %sAddressPrefixes as per the limit MaxSecurityRuleAddressesOrPortsPerSecurityGroup.",
				nsgID, n, side.label, maxPrefixesPerSide, side.label)
		}
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
		func(name, rid string, cp obj, path string) *armError {
			return normSecurityRule(wc.e, name, rid, cp, path)
		})
	if ae != nil {
		return nil, ae
	}
	if ae := checkNSGRules(id, rules); ae != nil {
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
	if ae := normSecurityRule(wc.e, name, rid, cp, "properties"); ae != nil {
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
	if ae := checkNSGRules(stringOf(parent["id"]), append(rules, child)); ae != nil {
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
