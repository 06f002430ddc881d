package imds

import (
	"errors"
	"strings"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// providerIDPrefix is the scheme of Azure provider IDs.
const providerIDPrefix = "azure://"

// NodeMetadata is the node's metadata as azlb's controller manager derives
// it from ARM for the same VM: providerID azure://<resourceId>, the VM
// size, the region, the zone ("<region>-<zone>" for a zonal VM, else the
// fault domain) and the addresses (each interface's private IPv4 then IPv6
// addresses as InternalIP, the primary interface first; the lower-cased
// computer name as Hostname).
func (i *Instance) NodeMetadata() (*cloudprovider.InstanceMetadata, error) {
	c := i.Compute
	if c.ResourceID == "" {
		return nil, errors.New("instance metadata: no compute.resourceId")
	}
	region := strings.ToLower(c.Location)
	zone := c.PlatformFaultDomain
	if c.Zone != "" {
		zone = region + "-" + c.Zone
	}
	if zone == "" {
		zone = "0"
	}
	var addrs []v1.NodeAddress
	seen := map[string]bool{}
	add := func(list []IPAddress) {
		for _, a := range list {
			if a.PrivateIPAddress != "" && !seen[a.PrivateIPAddress] {
				seen[a.PrivateIPAddress] = true
				addrs = append(addrs, v1.NodeAddress{Type: v1.NodeInternalIP, Address: a.PrivateIPAddress})
			}
		}
	}
	for _, nic := range i.Network.Interface {
		add(nic.IPv4.IPAddress)
		add(nic.IPv6.IPAddress)
	}
	if cn := strings.ToLower(c.OSProfile.ComputerName); cn != "" {
		addrs = append(addrs, v1.NodeAddress{Type: v1.NodeHostName, Address: cn})
	}
	return &cloudprovider.InstanceMetadata{
		ProviderID:    providerIDPrefix + c.ResourceID,
		InstanceType:  c.VMSize,
		NodeAddresses: addrs,
		Zone:          zone,
		Region:        region,
	}, nil
}
