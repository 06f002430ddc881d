package emulator

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// vmState is the runtime state of a VM or scale set VM: its power state
// and, for scale set VMs, the private addresses of its ip configurations.
// It is immutable once published; an action builds a new one.
type vmState struct {
	// power is the settled power state code ("running", "stopped",
	// "deallocated") before action.
	power string
	// action is the last power action: while it runs the VM shows during,
	// once it succeeded next.
	action       *operation
	during, next string
	// ips maps lower(nicConfig)+"/"+lower(ipConfig) to the private address
	// (scale set VMs).
	ips map[string]string
	// nicEtag is the weak etag of the scale set VM's network interface
	// views.
	nicEtag string
}

// powerAt is the power state code at now.
func (s *vmState) powerAt(now time.Time) string {
	if s == nil {
		return "running"
	}
	if s.action != nil {
		if !s.action.done(now) {
			return s.during
		}
		if s.action.result == resultSucceeded {
			return s.next
		}
	}
	return s.power
}

// withAction returns a copy of s running a power action.
func (s *vmState) withAction(now time.Time, op *operation, during, next string) *vmState {
	n := *s
	n.power = s.powerAt(now)
	n.action, n.during, n.next = op, during, next
	return &n
}

// powerActions maps a power action to the state shown while it runs and
// the state it ends in. Restart shows "starting" while it runs.
var powerActions = map[string][2]string{
	"start":      {"starting", "running"},
	"poweroff":   {"stopping", "stopped"},
	"deallocate": {"deallocating", "deallocated"},
	"restart":    {"starting", "running"},
}

// canonicalAction returns the canonical spelling of a power action URL
// segment, or "".
func canonicalAction(seg string) string {
	switch strings.ToLower(seg) {
	case "start":
		return "start"
	case "poweroff":
		return "powerOff"
	case "deallocate":
		return "deallocate"
	case "restart":
		return "restart"
	}
	return ""
}

// checkPowerAction rejects actions the current power state does not allow
// (a restart needs a running VM, as ARM requires).
func checkPowerAction(id, action, power string) *armError {
	if strings.EqualFold(action, "restart") && power != "running" {
		return crpError(http.StatusConflict, "OperationNotAllowed",
			"Operation 'restart' is not allowed on VM '%s' since the VM is %s.", id, power)
	}
	return nil
}

var powerDisplay = map[string]string{
	"running": "VM running", "stopped": "VM stopped", "deallocated": "VM deallocated",
	"starting": "VM starting", "stopping": "VM stopping", "deallocating": "VM deallocating",
}

// isWindowsImage guesses the OS of an image reference (offer or publisher
// naming Windows).
func isWindowsImage(img obj) bool {
	return strings.Contains(strings.ToLower(stringOf(img["offer"])), "windows") ||
		strings.Contains(strings.ToLower(stringOf(img["publisher"])), "windows")
}

// exactVersion is the image version a "latest" image resolves to.
func exactVersion(windows bool) string {
	if windows {
		return "17763.8276.260109"
	}
	return "22.04.202601150"
}

// normOSProfile validates osProfile and fills what Compute adds. Secrets
// (adminPassword, customData) are never stored. computerName is set when
// not empty (VMs); scale sets keep computerNamePrefix.
func normOSProfile(in obj, path string, windows bool, vm bool) (obj, *armError) {
	p, err := getObj(in, "osProfile", path)
	if err != nil {
		return nil, errInvalidParameter(joinPath(path, "osProfile"), "%v", err)
	}
	out := obj{}
	if p != nil {
		out = deepCopy(p).(obj)
	}
	delete(out, "adminPassword")
	delete(out, "customData")
	for _, k := range []string{"computerName", "computerNamePrefix", "adminUsername"} {
		if _, _, err := getStr(out, k, joinPath(path, "osProfile")); err != nil {
			return nil, errInvalidParameter(joinPath(path, "osProfile."+k), "%v", err)
		}
	}
	if windows {
		wcfg, _ := out["windowsConfiguration"].(obj)
		if wcfg == nil {
			wcfg = obj{}
		}
		setDefault(wcfg, "provisionVMAgent", true)
		setDefault(wcfg, "enableAutomaticUpdates", true)
		if vm {
			setDefault(wcfg, "patchSettings", obj{"patchMode": "AutomaticByOS", "assessmentMode": "ImageDefault"})
			setDefault(wcfg, "enableVMAgentPlatformUpdates", true)
		}
		out["windowsConfiguration"] = wcfg
	} else {
		lcfg, _ := out["linuxConfiguration"].(obj)
		if lcfg == nil {
			lcfg = obj{}
		}
		setDefault(lcfg, "disablePasswordAuthentication", false)
		setDefault(lcfg, "provisionVMAgent", true)
		if vm {
			setDefault(lcfg, "patchSettings", obj{"patchMode": "ImageDefault", "assessmentMode": "ImageDefault"})
			setDefault(lcfg, "enableVMAgentPlatformUpdates", true)
		}
		out["linuxConfiguration"] = lcfg
	}
	setDefault(out, "secrets", []any{})
	setDefault(out, "allowExtensionOperations", true)
	setDefault(out, "requireGuestProvisionSignal", true)
	return out, nil
}

// normStorageProfile validates storageProfile and fills the OS disk
// defaults. vm: a VM's OS disk caches ReadWrite and has a deleteOption; a
// scale set model's caches None.
func normStorageProfile(in obj, path string, vm bool) (obj, bool, *armError) {
	sp, err := getObj(in, "storageProfile", path)
	if err != nil {
		return nil, false, errInvalidParameter(joinPath(path, "storageProfile"), "%v", err)
	}
	out := obj{}
	if sp != nil {
		out = deepCopy(sp).(obj)
	}
	img, err := getObj(out, "imageReference", joinPath(path, "storageProfile"))
	if err != nil {
		return nil, false, errInvalidParameter(joinPath(path, "storageProfile.imageReference"), "%v", err)
	}
	if img == nil {
		img = obj{"publisher": "Canonical", "offer": "0001-com-ubuntu-server-jammy", "sku": "22_04-lts-gen2", "version": "latest"}
	}
	windows := isWindowsImage(img)
	disk, err := getObj(out, "osDisk", joinPath(path, "storageProfile"))
	if err != nil {
		return nil, false, errInvalidParameter(joinPath(path, "storageProfile.osDisk"), "%v", err)
	}
	if disk == nil {
		disk = obj{}
	}
	osType := "Linux"
	size := 30
	if windows {
		osType, size = "Windows", 127
	}
	setDefault(disk, "osType", osType)
	setDefault(disk, "createOption", "FromImage")
	if vm {
		setDefault(disk, "caching", "ReadWrite")
		setDefault(disk, "deleteOption", "Detach")
	} else {
		setDefault(disk, "caching", "None")
	}
	md, _ := disk["managedDisk"].(obj)
	if md == nil {
		md = obj{}
	}
	setDefault(md, "storageAccountType", "Premium_LRS")
	disk["managedDisk"] = md
	setDefault(disk, "diskSizeGB", size)
	out["imageReference"] = img
	out["osDisk"] = disk
	return out, windows, nil
}

// computerName is the computer name of scale set VM i: the prefix and the
// instance id in base 36, six digits ("vmss000000").
func computerName(prefix string, i int) string {
	s := strings.ToLower(strconv.FormatInt(int64(i), 36))
	for len(s) < 6 {
		s = "0" + s
	}
	return prefix + s
}

// instanceStatuses are the provisioning and power statuses of an instance
// view.
func instanceStatuses(ps, power string, now time.Time) []any {
	return []any{
		obj{"code": "ProvisioningState/" + strings.ToLower(ps), "level": "Info",
			"displayStatus": "Provisioning " + strings.ToLower(ps), "time": timeString(now)},
		obj{"code": "PowerState/" + power, "level": "Info", "displayStatus": powerDisplay[power]},
	}
}

// instanceView renders the instance view of a VM or scale set VM.
func instanceView(doc obj, st *vmState, ps string, now time.Time, scaleSet bool) obj {
	props := propsOf(doc)
	osp, _ := props["osProfile"].(obj)
	stg, _ := props["storageProfile"].(obj)
	disk, _ := stg["osDisk"].(obj)
	img, _ := stg["imageReference"].(obj)
	osName, osVersion := "Ubuntu", "22.04"
	if isWindowsImage(img) {
		osName, osVersion = "Windows Server 2019 Datacenter", "10.0.17763.8276"
	}
	iv := obj{
		"computerName": stringOf(osp["computerName"]),
		"osName":       osName,
		"osVersion":    osVersion,
		"vmAgent": obj{"vmAgentVersion": "2.7.41491.1149", "statuses": []any{obj{
			"code": "ProvisioningState/succeeded", "level": "Info", "displayStatus": "Ready",
			"message": "GuestAgent is running and processing the extensions.", "time": timeString(now)}}},
		"disks": []any{obj{"name": stringOf(disk["name"]), "statuses": []any{obj{
			"code": "ProvisioningState/succeeded", "level": "Info", "displayStatus": "Provisioning succeeded", "time": timeString(now)}}}},
		"hyperVGeneration":     "V1",
		"statuses":             instanceStatuses(ps, st.powerAt(now), now),
		"platformUpdateDomain": 0,
		"platformFaultDomain":  0,
	}
	if scaleSet {
		iv["placementGroupId"] = stringOf(propsOf(doc)["vmId"])
	}
	return iv
}
