package emulator

import (
	"net/http"
	"strings"
)

func init() {
	registerKind(&kindSpec{
		typ: "natGateways", fullType: "Microsoft.Network/natGateways",
		normalize:   normalizeNatGateway,
		checkDelete: checkDeleteNatGateway,
		onDelete:    onDeleteNatGateway,
	})
}

func normalizeNatGateway(wc *writeCtx, in obj, name string, old *version) (obj, *armError) {
	doc, props, ae := baseDoc(wc, kinds["natgateways"], in, name, old, true)
	if ae != nil {
		return nil, ae
	}
	sku, ae := normSku(in, []string{"Standard", "StandardV2"}, "Standard")
	if ae != nil {
		return nil, ae
	}
	doc["sku"] = sku
	id := doc["id"].(string)
	loc := doc["location"].(string)
	pips, has, err := getRefList(props, "publicIpAddresses", "properties")
	if err != nil {
		return nil, errBadShape(err)
	}
	var canon []string
	if has {
		for _, p := range pips {
			_, v := wc.lookupKind(p, "publicIPAddresses")
			if v == nil || stringOf(v.doc["location"]) != loc {
				return nil, errInvalidReference(p, id)
			}
			pp := propsOf(v.doc)
			if r, ok := pp["ipConfiguration"].(obj); ok {
				return nil, nrpError(http.StatusBadRequest, "PublicIPAddressInUse",
					"Resource %s is already in use by %s and cannot be referenced by %s.", stringOf(v.doc["id"]), stringOf(r["id"]), id)
			}
			if r, ok := pp["natGateway"].(obj); ok && !strings.EqualFold(stringOf(r["id"]), id) {
				return nil, nrpError(http.StatusBadRequest, "PublicIPAddressInUse",
					"Resource %s is already in use by %s and cannot be referenced by %s.", stringOf(v.doc["id"]), stringOf(r["id"]), id)
			}
			canon = append(canon, stringOf(v.doc["id"]))
		}
		props["publicIpAddresses"] = refList(canon)
	}
	if prefixes, has, err := getRefList(props, "publicIpPrefixes", "properties"); err != nil {
		return nil, errBadShape(err)
	} else if has {
		for _, p := range prefixes {
			if _, v := wc.lookupKind(p, "publicIPPrefixes"); v == nil {
				return nil, errInvalidReference(p, id)
			}
		}
		props["publicIpPrefixes"] = refList(prefixes)
	}
	if _, _, err := getInt(props, "idleTimeoutInMinutes", "properties"); err != nil {
		return nil, errBadShape(err)
	}
	if ae := normNatServiceGateway(wc, props, old, id, loc, stringOf(sku["name"]), canon); ae != nil {
		return nil, ae
	}
	setDefault(props, "idleTimeoutInMinutes", 4)
	setDefault(props, "type", "Public")
	delete(props, "subnets")
	keepGUID(wc, props, old)
	doc["properties"] = props

	var oldPIPs []string
	if old != nil {
		for _, r := range asList(propsOf(old.doc)["publicIpAddresses"]) {
			oldPIPs = append(oldPIPs, stringOf(r.(obj)["id"]))
		}
	}
	wc.after(func() {
		for _, p := range oldPIPs {
			if !containsFold(canon, p) {
				wc.setPublicIPMember(p, "natGateway", "")
			}
		}
		for _, p := range canon {
			wc.setPublicIPMember(p, "natGateway", id)
		}
	})
	return doc, nil
}

// normNatServiceGateway handles properties.serviceGateway, the NAT
// gateway's attachment to a service gateway (egress of pod-based load
// balancing). No recording shows it, so the strictest reading holds:
//
//   - omitted: unchanged (an attached NAT gateway stays attached; only an
//     explicit JSON null detaches it);
//   - attaching: the gateway exists in the NAT gateway's location, the NAT
//     gateway is StandardV2 with at least one public IP, every one of them
//     StandardV2; a NAT gateway attached to one gateway cannot be moved to
//     another without being detached first;
//   - detaching (null): refused while an address of the gateway is still
//     mapped to an Outbound service that uses this NAT gateway.
func normNatServiceGateway(wc *writeCtx, props obj, old *version, id, loc, sku string, pips []string) *armError {
	oldGW := ""
	if old != nil {
		if r, ok := propsOf(old.doc)["serviceGateway"].(obj); ok {
			oldGW = stringOf(r["id"])
		}
	}
	raw, present := props["serviceGateway"]
	if present && raw == nil {
		delete(props, "serviceGateway")
		if oldGW != "" {
			if en, v := wc.lookupKind(oldGW, "serviceGateways"); v != nil {
				if st, _ := en.ext.(*sgwState); st != nil {
					if svc := st.mappedNatUser(id); svc != "" {
						return sgwBadRequest(codeNatGatewayInUse,
							"NAT gateway %s cannot be detached from service gateway %s: addresses are still mapped to its service '%s'. Remove them first.", id, oldGW, svc)
					}
				}
			}
		}
		return nil
	}
	gwID, has, err := getRef(props, "serviceGateway", "properties")
	if err != nil {
		return errBadShape(err)
	}
	if !has {
		if oldGW != "" {
			props["serviceGateway"] = ref(oldGW)
			return checkNatAttachable(wc, id, sku, pips, oldGW)
		}
		return nil
	}
	_, v := wc.lookupKind(gwID, "serviceGateways")
	if v == nil || stringOf(v.doc["location"]) != loc {
		return errInvalidReference(gwID, id)
	}
	canon := stringOf(v.doc["id"])
	if oldGW != "" && !strings.EqualFold(oldGW, canon) {
		return sgwBadRequest(codeNatGatewayAttached,
			"NAT gateway %s is attached to service gateway %s; detach it (serviceGateway: null) before attaching it to %s.", id, oldGW, canon)
	}
	props["serviceGateway"] = ref(canon)
	return checkNatAttachable(wc, id, sku, pips, canon)
}

// checkNatAttachable: a NAT gateway on a service gateway is StandardV2 with
// at least one public IP, all StandardV2.
func checkNatAttachable(wc *writeCtx, id, sku string, pips []string, gwID string) *armError {
	if sku != "StandardV2" {
		return sgwBadRequest(codeNatGatewaySku, "NAT gateway %s has sku %s; a NAT gateway attached to service gateway %s must be StandardV2.", id, sku, gwID)
	}
	if len(pips) == 0 {
		return sgwBadRequest(codeNatGatewaySku, "NAT gateway %s attached to service gateway %s needs at least one public IP address.", id, gwID)
	}
	for _, p := range pips {
		_, v := wc.lookupKind(p, "publicIPAddresses")
		if v == nil {
			return errInvalidReference(p, id)
		}
		if s, _ := v.doc["sku"].(obj); stringOf(s["name"]) != "StandardV2" {
			return sgwBadRequest(codeNatGatewaySku, "Public IP address %s has sku %s; a NAT gateway attached to service gateway %s takes StandardV2 public IP addresses only.", p, stringOf(s["name"]), gwID)
		}
	}
	return nil
}

// checkDeleteNatGateway refuses deleting a NAT gateway still attached to a
// service gateway, or still named by a service gateway's service.
func checkDeleteNatGateway(wc *writeCtx, v *version) *armError {
	id := stringOf(v.doc["id"])
	if r, ok := propsOf(v.doc)["serviceGateway"].(obj); ok {
		return sgwBadRequest(codeNatGatewayAttached,
			"NAT gateway %s is attached to service gateway %s; detach it (serviceGateway: null) before deleting it.", id, stringOf(r["id"]))
	}
	if gw, svc, used := wc.natUsers(id); used {
		return sgwBadRequest(codeNatGatewayInUse,
			"NAT gateway %s is used by service '%s' of service gateway %s; remove the service first.", id, svc, gw)
	}
	return nil
}

func onDeleteNatGateway(wc *writeCtx, v *version) {
	for _, r := range asList(propsOf(v.doc)["publicIpAddresses"]) {
		wc.setPublicIPMember(stringOf(r.(obj)["id"]), "natGateway", "")
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// setPublicIPMember sets (id != "") or clears a back-reference member such
// as natGateway on a public IP.
func (wc *writeCtx) setPublicIPMember(pipID, member, id string) {
	if member == "ipConfiguration" {
		wc.setPublicIPConfig(pipID, id)
		return
	}
	en, v := wc.lookupKind(pipID, "publicIPAddresses")
	if v == nil {
		return
	}
	p := propsOf(v.doc)
	cur := ""
	if r, ok := p[member].(obj); ok {
		cur = stringOf(r["id"])
	}
	if strings.EqualFold(cur, id) {
		return
	}
	np := shallowCopy(p)
	if id == "" {
		delete(np, member)
	} else {
		np[member] = ref(id)
	}
	doc := shallowCopy(v.doc)
	doc["properties"] = np
	wc.replace(en, doc)
}
