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
		// A NIC a VM used answers 202 (as recorded after the VM was deleted).
		createSucceeded: true, noAsyncOnPut: true, deleteStatus: http.StatusOK,
		deleteStatusOf: func(v *version) int {
			if st, ok := v.ext.(*nicState); ok && st.attachedOnce {
				return http.StatusAccepted
			}
			return http.StatusOK
		},
		collections: []*collSpec{{key: "ipConfigurations", fullType: "Microsoft.Network/networkInterfaces/ipConfigurations"}},
		normalize:   normalizeNIC,
		checkDelete: checkDeleteNIC,
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
	scope := wc.nicScope(id, old)
	members := newPoolRefs()
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
				if ae := scope.use(stringOf(v.doc["id"]), docSku(v.doc), cid); ae != nil {
					return ae
				}
				pipUse[strings.ToLower(stringOf(v.doc["id"]))] = cid
				cp["publicIPAddress"] = ref(stringOf(v.doc["id"]))
			}
			ids, has, err := getRefList(cp, "loadBalancerBackendAddressPools", path)
			if err != nil {
				return errBadShape(err)
			}
			if has {
				pools, ae := wc.checkPoolRefs(ids, cid, scope)
				if ae != nil {
					return ae
				}
				cp["loadBalancerBackendAddressPools"] = refList(pools)
				members.add(cid, wc.g.name+"_"+stringOf(doc["name"])+cname, pools)
			}
			ids, has, err = getRefList(cp, "loadBalancerInboundNatRules", path)
			if err != nil {
				return errBadShape(err)
			}
			if has {
				var out []string
				for _, rid := range ids {
					_, c := wc.lookupChild(rid, "loadBalancers", "inboundNatRules")
					if c == nil {
						return errInvalidReference(rid, cid)
					}
					out = append(out, stringOf(c["id"]))
				}
				cp["loadBalancerInboundNatRules"] = refList(out)
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
	if old != nil {
		if vm, ok := propsOf(old.doc)["virtualMachine"]; ok {
			props["virtualMachine"] = vm // server-owned: set by the VM that uses the NIC
		}
	}
	keepGUID(wc, props, old)
	doc["properties"] = props
	oldMembers := newPoolRefs()
	if old != nil {
		oldMembers = nicPoolRefs(old.doc)
	}
	wc.membershipDiff(oldMembers, members)

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

// nicPoolRefs is the pool membership of a stored NIC document.
func nicPoolRefs(doc obj) poolRefs {
	r := newPoolRefs()
	rg := resourceGroupOf(stringOf(doc["id"]))
	for _, c := range asList(propsOf(doc)["ipConfigurations"]) {
		co := c.(obj)
		var pools []string
		for _, p := range asList(propsOf(co)["loadBalancerBackendAddressPools"]) {
			pools = append(pools, stringOf(p.(obj)["id"]))
		}
		r.add(stringOf(co["id"]), rg+"_"+stringOf(doc["name"])+stringOf(co["name"]), pools)
	}
	return r
}

// checkDeleteNIC rejects deleting a NIC a VM still uses.
func checkDeleteNIC(_ *writeCtx, v *version) *armError {
	if r, ok := propsOf(v.doc)["virtualMachine"].(obj); ok {
		return nrpError(http.StatusBadRequest, "NicInUse",
			"Network Interface %s is used by existing resource %s. In order to delete the network interface, it must be dissociated from the resource.",
			stringOf(v.doc["id"]), stringOf(r["id"]))
	}
	return nil
}

func onDeleteNIC(wc *writeCtx, v *version) {
	wc.membershipDiff(nicPoolRefs(v.doc), newPoolRefs())
	for _, c := range asList(propsOf(v.doc)["ipConfigurations"]) {
		if r, ok := propsOf(c.(obj))["publicIPAddress"].(obj); ok {
			wc.setPublicIPConfig(stringOf(r["id"]), "")
		}
	}
}
