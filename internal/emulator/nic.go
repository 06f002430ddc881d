package emulator

import (
	"net/http"
	"net/netip"
	"strings"
)

func init() {
	registerKind(&kindSpec{
		typ: "networkInterfaces", fullType: "Microsoft.Network/networkInterfaces",
		// NRP creates NICs synchronously: 201 Succeeded without
		// Azure-AsyncOperation; deletes answer 200 (see interfaceclient.yaml).
		createSucceeded: true, noAsyncOnPut: true, deleteStatus: http.StatusOK,
		collections: []*collSpec{{key: "ipConfigurations", fullType: "Microsoft.Network/networkInterfaces/ipConfigurations"}},
		normalize:   normalizeNIC,
		onDelete:    onDeleteNIC,
	})
}

func normalizeNIC(wc *writeCtx, in obj, name string, old *version) (obj, *armError) {
	doc, props, ae := baseDoc(wc, kinds["networkinterfaces"], in, name, old, true)
	if ae != nil {
		return nil, ae
	}
	id := doc["id"].(string)
	loc := doc["location"].(string)
	if k, ok, err := getStr(in, "kind", ""); err != nil {
		return nil, errBadShape(err)
	} else if ok && k != "" {
		doc["kind"] = k
	} else {
		doc["kind"] = "Regular"
	}
	var oldConfigs obj
	if old != nil {
		oldConfigs = obj{"ipConfigurations": propsOf(old.doc)["ipConfigurations"]}
	}
	pipUse := map[string]string{}
	taken := map[netip.Addr]bool{}
	cfgs, ae := normChildren(props, "ipConfigurations", id, "Microsoft.Network/networkInterfaces/ipConfigurations", "properties", nil,
		func(cname, cid string, cp obj, path string) *armError {
			keep := ""
			if oldConfigs != nil {
				if oc := findChild(oldConfigs, "ipConfigurations", cname); oc != nil {
					keep = stringOf(propsOf(oc)["privateIPAddress"])
				}
			}
			subnetID, has, err := getRef(cp, "subnet", path)
			if err != nil {
				return errBadShape(err)
			}
			if !has {
				return nrpError(http.StatusBadRequest, "IpConfigurationSubnetRequired",
					"IP configuration %s must reference a subnet.", cid)
			}
			vv, sub := wc.lookupChild(subnetID, "virtualNetworks", "subnets")
			if sub == nil || stringOf(vv.doc["location"]) != loc {
				return errInvalidReference(subnetID, cid)
			}
			canon := stringOf(sub["id"])
			cp["subnet"] = ref(canon)
			if ae := wc.assignPrivateIP(cp, canon, propsOf(sub), cid, keep, path, taken); ae != nil {
				return ae
			}
			if pip, has, err := getRef(cp, "publicIPAddress", path); err != nil {
				return errBadShape(err)
			} else if has {
				_, v := wc.lookupKind(pip, "publicIPAddresses")
				if v == nil || stringOf(v.doc["location"]) != loc {
					return errInvalidReference(pip, cid)
				}
				if r, ok := propsOf(v.doc)["ipConfiguration"].(obj); ok && !strings.EqualFold(stringOf(r["id"]), cid) {
					return nrpError(http.StatusBadRequest, "PublicIPAddressInUse",
						"Resource %s is already in use by %s and cannot be referenced by %s.", stringOf(v.doc["id"]), stringOf(r["id"]), cid)
				}
				pipUse[strings.ToLower(stringOf(v.doc["id"]))] = cid
				cp["publicIPAddress"] = ref(stringOf(v.doc["id"]))
			}
			for _, key := range []string{"loadBalancerBackendAddressPools", "loadBalancerInboundNatRules"} {
				ids, has, err := getRefList(cp, key, path)
				if err != nil {
					return errBadShape(err)
				}
				if !has {
					continue
				}
				child := "backendAddressPools"
				if key == "loadBalancerInboundNatRules" {
					child = "inboundNatRules"
				}
				var out []string
				for _, rid := range ids {
					_, c := wc.lookupChild(rid, "loadBalancers", child)
					if c == nil {
						return errInvalidReference(rid, cid)
					}
					out = append(out, stringOf(c["id"]))
				}
				cp[key] = refList(out)
			}
			return nil
		})
	if ae != nil {
		return nil, ae
	}
	if len(cfgs) == 0 {
		return nil, nrpError(http.StatusBadRequest, "NetworkInterfaceMustHaveIpConfiguration",
			"Network interface %s must have one or more IP configurations.", id)
	}
	primaries := 0
	for _, c := range cfgs {
		if b, _ := propsOf(c.(obj))["primary"].(bool); b {
			primaries++
		}
	}
	if primaries == 0 {
		propsOf(cfgs[0].(obj))["primary"] = true
	}
	props["ipConfigurations"] = cfgs
	if nsg, ok, err := getRef(props, "networkSecurityGroup", "properties"); err != nil {
		return nil, errBadShape(err)
	} else if ok {
		if _, v := wc.lookupKind(nsg, "networkSecurityGroups"); v == nil {
			return nil, errInvalidReference(nsg, id)
		}
		props["networkSecurityGroup"] = ref(nsg)
	}
	suffix := ""
	if old != nil {
		if d, ok := propsOf(old.doc)["dnsSettings"].(obj); ok {
			suffix = stringOf(d["internalDomainNameSuffix"])
		}
	}
	if suffix == "" {
		suffix = strings.ReplaceAll(wc.e.ids.uuid(), "-", "")[:26] + ".bx.internal.cloudapp.net"
	}
	dns, err := getObj(props, "dnsSettings", "properties")
	if err != nil {
		return nil, errBadShape(err)
	}
	if dns == nil {
		dns = obj{}
	}
	dns = shallowCopy(dns)
	setDefault(dns, "dnsServers", []any{})
	setDefault(dns, "appliedDnsServers", []any{})
	dns["internalDomainNameSuffix"] = suffix
	props["dnsSettings"] = dns
	for k, v := range map[string]any{
		"enableAcceleratedNetworking": false, "vnetEncryptionSupported": false, "enableIPForwarding": false,
		"disableTcpStateTracking": false, "hostedWorkloads": []any{}, "tapConfigurations": []any{},
		"nicType": "Standard", "allowPort25Out": true, "defaultOutboundConnectivityEnabled": false,
		"auxiliaryMode": "None", "auxiliarySku": "None",
	} {
		setDefault(props, k, v)
	}
	delete(props, "macAddress")
	delete(props, "virtualMachine")
	keepGUID(wc, props, old)
	doc["properties"] = props

	oldUse := map[string]string{}
	if old != nil {
		for _, c := range asList(propsOf(old.doc)["ipConfigurations"]) {
			co := c.(obj)
			if r, ok := propsOf(co)["publicIPAddress"].(obj); ok {
				oldUse[strings.ToLower(stringOf(r["id"]))] = stringOf(co["id"])
			}
		}
	}
	wc.after(func() {
		for p := range oldUse {
			if _, still := pipUse[p]; !still {
				wc.setPublicIPConfig(p, "")
			}
		}
		for p, cid := range pipUse {
			wc.setPublicIPConfig(p, cid)
		}
	})
	return doc, nil
}

func onDeleteNIC(wc *writeCtx, v *version) {
	for _, c := range asList(propsOf(v.doc)["ipConfigurations"]) {
		if r, ok := propsOf(c.(obj))["publicIPAddress"].(obj); ok {
			wc.setPublicIPConfig(stringOf(r["id"]), "")
		}
	}
}
