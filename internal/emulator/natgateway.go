package emulator

import (
	"net/http"
	"strings"
)

func init() {
	registerKind(&kindSpec{
		typ: "natGateways", fullType: "Microsoft.Network/natGateways",
		normalize: normalizeNatGateway,
		onDelete:  onDeleteNatGateway,
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
