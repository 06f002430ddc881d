package emulator

import (
	"net/http"
	"slices"
	"strings"
)

// Availability zones. The emulator knows which regions have zones (a
// small table, below) and tells clients the way ARM does: GET
// /subscriptions/{sub}/providers/Microsoft.Compute lists, for the resource
// type virtualMachines, one zoneMappings entry per region with zones (the
// Azure cloud provider reads exactly that). Public IPs and load balancer
// frontends are checked against it:
//   - zones in a region without zones: LocationNotSupportAvailabilityZones
//     (400, "The resource '...' does not support availability zones at
//     location 'ukwest'.", as reported in Azure/Azure-Landing-Zones#425);
//   - a zone the region does not have: InvalidAvailabilityZone ("The
//     zone(s) '4' for resource '...' is not supported. The supported zones
//     for location 'westeurope' are '1,2,3'", hashicorp/terraform-provider-azurerm#6296);
//   - zones of an existing public IP or frontend changed:
//     ResourceAvailabilityZonesCannotBeModified, with Azure's message ("...
//     Zones cannot be added/updated/removed once the resource is created.",
//     Azure/azure-powershell#13656; the code is the emulator's reading).

// zoneRegion is a region of the table: its display name (what
// zoneMappings carries) and whether it has zones 1, 2 and 3.
type zoneRegion struct {
	display string
	zones   bool
}

// regionZones: the regions with availability zones (from a public Azure
// Resource Graph query listing them) and a few without (westus,
// northcentralus, westcentralus, ukwest, canadaeast, ...). A region not in
// the table has no zones.
var regionZones = map[string]zoneRegion{
	"australiaeast": {"Australia East", true}, "brazilsouth": {"Brazil South", true},
	"canadacentral": {"Canada Central", true}, "centralindia": {"Central India", true},
	"centralus": {"Central US", true}, "eastasia": {"East Asia", true},
	"eastus": {"East US", true}, "eastus2": {"East US 2", true},
	"francecentral": {"France Central", true}, "germanywestcentral": {"Germany West Central", true},
	"israelcentral": {"Israel Central", true}, "italynorth": {"Italy North", true},
	"japaneast": {"Japan East", true}, "japanwest": {"Japan West", true},
	"koreacentral": {"Korea Central", true}, "mexicocentral": {"Mexico Central", true},
	"newzealandnorth": {"New Zealand North", true}, "northeurope": {"North Europe", true},
	"norwayeast": {"Norway East", true}, "polandcentral": {"Poland Central", true},
	"qatarcentral": {"Qatar Central", true}, "southafricanorth": {"South Africa North", true},
	"southcentralus": {"South Central US", true}, "southeastasia": {"Southeast Asia", true},
	"spaincentral": {"Spain Central", true}, "swedencentral": {"Sweden Central", true},
	"switzerlandnorth": {"Switzerland North", true}, "uaenorth": {"UAE North", true},
	"uksouth": {"UK South", true}, "westeurope": {"West Europe", true},
	"westus2": {"West US 2", true}, "westus3": {"West US 3", true},

	"westus": {"West US", false}, "northcentralus": {"North Central US", false},
	"westcentralus": {"West Central US", false}, "ukwest": {"UK West", false},
	"canadaeast": {"Canada East", false}, "australiasoutheast": {"Australia Southeast", false},
	"southindia": {"South India", false}, "koreasouth": {"Korea South", false},
}

// zonesOfRegion are the zones of a region (nil: none).
func zonesOfRegion(location string) []string {
	if regionZones[normLocation(location)].zones {
		return []string{"1", "2", "3"}
	}
	return nil
}

// serveProvider answers GET /subscriptions/{sub}/providers/{namespace}:
// Microsoft.Compute with its virtualMachines resource type and the zone
// mappings of the table; Microsoft.Network with no resource types listed.
func (e *Emulator) serveProvider(c *reqCtx) {
	if c.r.Method != http.MethodGet {
		methodNotAllowed(c)
		return
	}
	ns, ok := servedNamespace(c.rt.ns)
	var types []any
	switch {
	case !ok:
		writeARMError(c.w, gatewayError(http.StatusNotFound, "InvalidResourceNamespace",
			"The resource namespace '%s' is invalid. The emulator serves Microsoft.Network and Microsoft.Compute.", c.rt.ns))
		return
	case ns == "Microsoft.Compute":
		var locations, mappings []any
		for _, name := range slices.Sorted(mapKeys(regionZones)) {
			r := regionZones[name]
			locations = append(locations, r.display)
			if r.zones {
				mappings = append(mappings, obj{"location": r.display, "zones": []any{"1", "2", "3"}})
			}
		}
		types = []any{obj{"resourceType": "virtualMachines", "locations": locations, "zoneMappings": mappings}}
	default:
		types = []any{}
	}
	writeJSONTree(c.w, http.StatusOK, obj{
		"id": "/subscriptions/" + c.rt.sub + "/providers/" + ns, "namespace": ns,
		"registrationState": "Registered", "registrationPolicy": "RegistrationRequired", "resourceTypes": types,
	})
}

// servedNamespace is the canonical name of a resource provider namespace
// the emulator serves (Microsoft.Network, Microsoft.Compute).
func servedNamespace(ns string) (string, bool) {
	for _, n := range []string{"Microsoft.Network", "Microsoft.Compute"} {
		if strings.EqualFold(ns, n) {
			return n, true
		}
	}
	return "", false
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// zoneList reads a document's zones (baseDoc has checked they are strings).
func zoneList(doc obj) []string {
	var out []string
	for _, z := range asList(doc["zones"]) {
		out = append(out, stringOf(z))
	}
	return out
}

// checkZones checks the zones of a new or updated public IP or frontend
// (id; resourceType as ARM names it in messages) in location; oldZones are
// those it has (has: it exists).
func checkZones(id, resourceType, location string, zones, oldZones []string, has bool) *armError {
	if len(zones) > 0 {
		region := zonesOfRegion(location)
		if region == nil {
			return nrpError(http.StatusBadRequest, "LocationNotSupportAvailabilityZones",
				"The resource '%s/%s' does not support availability zones at location '%s'.", resourceType, lastSegment(id), normLocation(location))
		}
		for _, z := range zones {
			if !slices.Contains(region, z) {
				return nrpError(http.StatusBadRequest, "InvalidAvailabilityZone",
					"The zone(s) '%s' for resource '%s/%s' is not supported. The supported zones for location '%s' are '%s'",
					z, resourceType, lastSegment(id), normLocation(location), strings.Join(region, ","))
			}
		}
	}
	if has && !sameZones(zones, oldZones) {
		return nrpError(http.StatusBadRequest, "ResourceAvailabilityZonesCannotBeModified",
			"Resource %s has an existing availability zone constraint %s and the request has availability zone constraint %s, which do not match. Zones cannot be added/updated/removed once the resource is created. The resource cannot be updated from regional to zonal or vice-versa.",
			id, zoneConstraint(oldZones), zoneConstraint(zones))
	}
	return nil
}

func sameZones(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}

func zoneConstraint(z []string) string {
	if len(z) == 0 {
		return "NoZone"
	}
	return strings.Join(slices.Sorted(slices.Values(z)), ", ")
}

// checkFrontendZones checks the zones of a load balancer's frontends
// against its region and, for frontends it had, their zones before.
func checkFrontendZones(location string, frontends []any, old obj) *armError {
	for _, f := range frontends {
		fo := f.(obj)
		var oldZones []string
		has := false
		if old != nil {
			if of := findChild(old, "frontendIPConfigurations", stringOf(fo["name"])); of != nil {
				oldZones, has = zoneList(of), true
			}
		}
		if ae := checkZones(stringOf(fo["id"]), "Microsoft.Network/loadBalancers/frontendIPConfigurations", location, zoneList(fo), oldZones, has); ae != nil {
			return ae
		}
	}
	return nil
}
