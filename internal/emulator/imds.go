package emulator

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The Instance Metadata Service (IMDS): what a VM reads at
// http://169.254.169.254/metadata/instance, answered from the emulator's
// Compute and Network state. On loopback every VM shares one listener, so
// the caller names the VM it stands for in a path prefix:
//
//	/imds/{subscriptionId}/{resourceGroup}/{vmName}/metadata/instance[/compute|/network[/...]]
//
// {vmName} is the VM's ARM name: a standalone or Flexible scale set VM's
// name, or a Uniform scale set VM's "<scaleSet>_<instanceId>". IMDS calls
// are logged with kind "imds", never "arm".

// IMDSPrefix is the path prefix of the emulated Instance Metadata Service.
const IMDSPrefix = "/imds/"

// imdsVersions are the api-versions the emulated IMDS accepts for the
// instance endpoint, oldest first; the last three are its newest-versions.
var imdsVersions = []string{
	"2017-03-01", "2017-04-02", "2017-08-01", "2017-10-01", "2017-12-01",
	"2018-02-01", "2018-04-02", "2018-10-01", "2019-02-01", "2019-03-11",
	"2019-04-30", "2019-06-01", "2019-06-04", "2019-08-01", "2019-08-15",
	"2019-11-01", "2020-06-01", "2020-07-15", "2020-09-01", "2020-10-01",
	"2020-12-01", "2021-01-01", "2021-02-01", "2021-03-01", "2021-05-01",
	"2021-10-01", "2021-11-01", "2021-11-15", "2021-12-13", "2023-07-01",
}

// IMDSPath is the IMDS base a VM's caller uses on the emulator (append
// "/metadata/instance?api-version=..."), e.g. for the VM a providerID
// names.
func IMDSPath(subscription, resourceGroup, vmName string) string {
	return IMDSPrefix + subscription + "/" + resourceGroup + "/" + vmName
}

func isIMDSPath(path string) bool { return strings.HasPrefix(path, IMDSPrefix) }

// serveIMDS answers one IMDS request and logs it as kind "imds".
func (e *Emulator) serveIMDS(w http.ResponseWriter, r *http.Request) {
	start := e.clock.Now()
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		e.log.add(RequestRecord{Time: start, Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
			Status: sw.status, Duration: e.clock.Since(start), Kind: "imds", UserAgent: r.UserAgent()})
	}()
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, IMDSPrefix), "/", 4)
	if len(parts) < 4 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		imdsError(sw, http.StatusNotFound, "Not found. The emulator's IMDS path is /imds/{subscriptionId}/{resourceGroup}/{vmName}/metadata/...", nil)
		return
	}
	rest := "/" + strings.TrimSuffix(parts[3], "/")
	if ok := imdsCheckRequest(sw, r, rest); !ok {
		return
	}
	now := e.clock.Now()
	doc, running, found := e.imdsDocument(parts[0], parts[1], parts[2], now)
	if !found {
		imdsError(sw, http.StatusNotFound, "Not found. No virtual machine "+parts[2]+" in resource group "+parts[1], nil)
		return
	}
	if !running {
		// A VM that does not run has no guest to ask IMDS anything.
		e.resetConnection(sw)
		return
	}
	node, ok := imdsSelect(doc, strings.TrimPrefix(rest, "/metadata/instance"))
	if !ok {
		imdsError(sw, http.StatusNotFound, "Not found", nil)
		return
	}
	imdsWrite(sw, r, node)
}

// imdsCheckRequest applies IMDS's request rules: no X-Forwarded-For, the
// Metadata: true header, GET only, a known path and api-version. It answers
// and returns false when one fails.
func imdsCheckRequest(w http.ResponseWriter, r *http.Request, rest string) bool {
	q := r.URL.Query()
	switch {
	case r.Header.Get("X-Forwarded-For") != "":
		imdsError(w, http.StatusBadRequest, "Bad request. Requests with the X-Forwarded-For header are not accepted", nil)
	case !strings.EqualFold(r.Header.Get("Metadata"), "true"):
		imdsError(w, http.StatusBadRequest, "Bad request. Required metadata header not specified", nil)
	case rest != "/metadata/instance" && !strings.HasPrefix(rest, "/metadata/instance/"):
		imdsError(w, http.StatusNotFound, "Not found", nil)
	case r.Method != http.MethodGet:
		imdsError(w, http.StatusMethodNotAllowed, "Method not allowed", nil)
	case !q.Has("api-version") || q.Get("api-version") == "":
		imdsError(w, http.StatusBadRequest,
			"Bad request. api-version was not specified in the request. For more information refer to aka.ms/azureimds", newestIMDSVersions())
	case !slices.Contains(imdsVersions, q.Get("api-version")):
		imdsError(w, http.StatusBadRequest,
			"Bad request. api-version is invalid or was not specified in the request. For more information refer to aka.ms/azureimds", newestIMDSVersions())
	case q.Get("format") != "" && q.Get("format") != "json" && q.Get("format") != "text":
		imdsError(w, http.StatusBadRequest, "Bad request. Unsupported format "+q.Get("format"), nil)
	default:
		return true
	}
	return false
}

func newestIMDSVersions() []string {
	n := len(imdsVersions)
	return []string{imdsVersions[n-1], imdsVersions[n-2], imdsVersions[n-3]}
}

// imdsError writes IMDS's error body: {"error": msg} (with
// "newest-versions" for api-version errors).
func imdsError(w http.ResponseWriter, status int, msg string, newest []string) {
	body := map[string]any{"error": msg}
	if newest != nil {
		body["newest-versions"] = newest
	}
	b, _ := json.Marshal(body)
	writeJSON(w, status, b)
}

// imdsSelect walks the document along rest ("", "/compute",
// "/network/interface/0/ipv4"): object members by name, array items by
// index.
func imdsSelect(doc obj, rest string) (any, bool) {
	var node any = doc
	for _, seg := range strings.Split(strings.Trim(rest, "/"), "/") {
		if seg == "" {
			continue
		}
		switch n := node.(type) {
		case obj:
			v, ok := n[seg]
			if !ok {
				return nil, false
			}
			node = v
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(n) {
				return nil, false
			}
			node = n[i]
		default:
			return nil, false
		}
	}
	return node, true
}

// imdsWrite answers node as JSON or, with format=text, a leaf as text.
func imdsWrite(w http.ResponseWriter, r *http.Request, node any) {
	if r.URL.Query().Get("format") != "text" {
		b, _ := json.Marshal(node)
		writeJSON(w, http.StatusOK, b)
		return
	}
	s, ok := node.(string)
	if !ok {
		imdsError(w, http.StatusBadRequest, "Bad request. format=text is supported for leaf nodes only", nil)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(s))
}

// imdsDocument renders the instance metadata of the VM (or Uniform scale
// set VM) named vmName, and whether it runs, under the read lock.
func (e *Emulator) imdsDocument(sub, rg, vmName string, now time.Time) (doc obj, running, found bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	s := e.subs[strings.ToLower(sub)]
	if s == nil {
		return nil, false, false
	}
	g := s.liveGroup(rg, now)
	if g == nil {
		return nil, false, false
	}
	var v *version
	var vmss string
	if set, inst, ok := strings.Cut(vmName, "_"); ok {
		if en := g.resources[vmssVMKey(set, inst)]; en != nil && en.cur != nil && en.cur.phaseAt(now) != phaseGone {
			v, vmss = en.cur, set
		}
	}
	if v == nil {
		if _, v = g.liveEntry(typeVM, vmName, now); v == nil {
			return nil, false, false
		}
		if ref, _ := propsOf(v.doc)["virtualMachineScaleSet"].(obj); ref != nil {
			vmss = lastSegment(stringOf(ref["id"]))
		}
	}
	st, _ := v.ext.(*vmState)
	return obj{"compute": imdsCompute(s.id, g.name, vmss, v.doc), "network": e.imdsNetwork(s, g, v, now)},
		st.powerAt(now) == "running", true
}

// imdsCompute renders the compute section from a VM or scale set VM
// document.
func imdsCompute(sub, rg, vmss string, doc obj) obj {
	props := propsOf(doc)
	osp, _ := props["osProfile"].(obj)
	hw, _ := props["hardwareProfile"].(obj)
	stg, _ := props["storageProfile"].(obj)
	img, _ := stg["imageReference"].(obj)
	osType := "Linux"
	if isWindowsImage(img) {
		osType = "Windows"
	}
	zone := ""
	if z := asList(doc["zones"]); len(z) > 0 {
		zone = stringOf(z[0])
	}
	var tagPairs []string
	tagsList := []any{}
	tags, _ := doc["tags"].(obj)
	for _, k := range sortedKeys(tags) {
		tagPairs = append(tagPairs, k+":"+stringOf(tags[k]))
		tagsList = append(tagsList, obj{"name": k, "value": stringOf(tags[k])})
	}
	return obj{
		"azEnvironment":        "AzurePublicCloud",
		"location":             strings.ToLower(stringOf(doc["location"])),
		"name":                 stringOf(doc["name"]),
		"offer":                stringOf(img["offer"]),
		"publisher":            stringOf(img["publisher"]),
		"sku":                  stringOf(img["sku"]),
		"version":              stringOf(img["exactVersion"]),
		"osType":               osType,
		"osProfile":            obj{"adminUsername": stringOf(osp["adminUsername"]), "computerName": stringOf(osp["computerName"]), "disablePasswordAuthentication": "true"},
		"platformFaultDomain":  "0",
		"platformUpdateDomain": "0",
		"priority":             stringOf(props["priority"]),
		"provider":             "Microsoft.Compute",
		"resourceGroupName":    rg,
		"resourceId":           stringOf(doc["id"]),
		"subscriptionId":       sub,
		"tags":                 strings.Join(tagPairs, ";"),
		"tagsList":             tagsList,
		"vmId":                 stringOf(props["vmId"]),
		"vmScaleSetName":       vmss,
		"vmSize":               stringOf(hw["vmSize"]),
		"zone":                 zone,
	}
}

func sortedKeys(m obj) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// imdsIPConfig is one ip configuration of a NIC as IMDS lists it.
type imdsIPConfig struct {
	addr    string
	subnet  string
	primary bool
}

// imdsNetwork renders the network section: one interface per NIC (the
// primary first), each with its private IPv4 and IPv6 addresses (the
// primary ip configuration first) and their subnets.
func (e *Emulator) imdsNetwork(s *subscription, g *group, v *version, now time.Time) obj {
	type nic struct {
		id      string
		primary bool
		cfgs    []imdsIPConfig
	}
	var nics []nic
	if strings.EqualFold(stringOf(v.doc["type"]), fullVMSSVM) {
		for _, n := range instanceNICs(v) {
			x := nic{id: stringOf(n["id"]), primary: propsOf(n)["primary"] == true}
			x.cfgs = imdsConfigs(asList(propsOf(n)["ipConfigurations"]))
			nics = append(nics, x)
		}
	} else {
		var refs []any
		if np, ok := propsOf(v.doc)["networkProfile"].(obj); ok {
			refs = asList(np["networkInterfaces"])
		}
		for i, ref := range refs {
			ro, _ := ref.(obj)
			id := stringOf(ro["id"])
			x := nic{id: id, primary: propsOf(ro)["primary"] == true || (len(refs) == 1 && i == 0)}
			if _, nv := g.liveEntry("networkInterfaces", lastSegment(id), now); nv != nil {
				x.cfgs = imdsConfigs(asList(propsOf(nv.doc)["ipConfigurations"]))
			}
			nics = append(nics, x)
		}
	}
	sort.SliceStable(nics, func(i, j int) bool { return nics[i].primary && !nics[j].primary })
	ifaces := []any{}
	for _, n := range nics {
		v4, v6 := obj{"ipAddress": []any{}, "subnet": []any{}}, obj{"ipAddress": []any{}}
		for _, c := range n.cfgs {
			a, err := netip.ParseAddr(c.addr)
			if err != nil {
				continue
			}
			fam := v4
			if a.Is6() {
				fam = v6
			}
			ip := obj{"privateIpAddress": c.addr}
			if a.Is4() {
				ip["publicIpAddress"] = ""
			}
			fam["ipAddress"] = append(fam["ipAddress"].([]any), ip)
			if a.Is4() {
				if p, ok := e.subnetPrefix(s, c.subnet, now); ok && !containsSubnet(v4["subnet"].([]any), p) {
					v4["subnet"] = append(v4["subnet"].([]any), obj{"address": p.Masked().Addr().String(), "prefix": strconv.Itoa(p.Bits())})
				}
			}
		}
		ifaces = append(ifaces, obj{"ipv4": v4, "ipv6": v6, "macAddress": imdsMAC(n.id)})
	}
	return obj{"interface": ifaces}
}

// imdsConfigs reads ip configurations (NIC documents or scale set VM NIC
// views), the primary first.
func imdsConfigs(cfgs []any) []imdsIPConfig {
	var out []imdsIPConfig
	for _, c := range cfgs {
		co, _ := c.(obj)
		p := propsOf(co)
		sub, _ := p["subnet"].(obj)
		out = append(out, imdsIPConfig{addr: stringOf(p["privateIPAddress"]), subnet: stringOf(sub["id"]), primary: p["primary"] == true})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].primary && !out[j].primary })
	return out
}

func containsSubnet(list []any, p netip.Prefix) bool {
	for _, x := range list {
		if stringOf(x.(obj)["address"]) == p.Masked().Addr().String() {
			return true
		}
	}
	return false
}

// subnetPrefix is the first IPv4 address prefix of a subnet, by id.
func (e *Emulator) subnetPrefix(s *subscription, subnetID string, now time.Time) (netip.Prefix, bool) {
	// /subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.Network/virtualNetworks/{vnet}/subnets/{subnet}
	seg := strings.Split(strings.Trim(subnetID, "/"), "/")
	if len(seg) != 10 {
		return netip.Prefix{}, false
	}
	g := s.liveGroup(seg[3], now)
	if g == nil {
		return netip.Prefix{}, false
	}
	_, vv := g.liveEntry("virtualNetworks", seg[7], now)
	if vv == nil {
		return netip.Prefix{}, false
	}
	for _, sn := range asList(propsOf(vv.doc)["subnets"]) {
		so, _ := sn.(obj)
		if !strings.EqualFold(stringOf(so["name"]), seg[9]) {
			continue
		}
		p := propsOf(so)
		cands := []any{p["addressPrefix"]}
		cands = append(cands, asList(p["addressPrefixes"])...)
		for _, c := range cands {
			if pf, err := netip.ParsePrefix(stringOf(c)); err == nil && pf.Addr().Is4() {
				return pf, true
			}
		}
	}
	return netip.Prefix{}, false
}

// imdsMAC is a stable MAC address for a NIC (Azure's 00-0D-3A prefix),
// written as IMDS does: 12 upper-case hex digits.
func imdsMAC(nicID string) string {
	h := sha256.Sum256([]byte(strings.ToLower(nicID)))
	return "000D3A" + strings.ToUpper(hex.EncodeToString(h[:3]))
}
