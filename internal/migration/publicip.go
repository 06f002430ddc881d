package migration

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
)

// IsBasic reports whether a public IP has the Basic SKU (ARM's default
// when it has none).
func IsBasic(pip *armnetwork.PublicIPAddress) bool {
	return pip != nil && (pip.SKU == nil || ptr.Deref(pip.SKU.Name, armnetwork.PublicIPAddressSKUNameBasic) == armnetwork.PublicIPAddressSKUNameBasic)
}

func address(pip *armnetwork.PublicIPAddress) string {
	if pip == nil || pip.Properties == nil {
		return ""
	}
	return ptr.Deref(pip.Properties.IPAddress, "")
}

func isDynamic(pip *armnetwork.PublicIPAddress) bool {
	return pip.Properties == nil || ptr.Deref(pip.Properties.PublicIPAllocationMethod, armnetwork.IPAllocationMethodDynamic) == armnetwork.IPAllocationMethodDynamic
}

// UpgradeError says why a Basic public IP was not upgraded; nothing was
// written.
type UpgradeError struct {
	PublicIP, Reason string
}

func (e *UpgradeError) Error() string {
	return fmt.Sprintf("public IP %s is Basic and cannot be upgraded to Standard: %s", e.PublicIP, e.Reason)
}

// writeCopy PUTs a copy of pip (as read) changed by edit, with If-Match.
func writeCopy(ctx context.Context, client azure.PublicIPClient, rg string, pip *armnetwork.PublicIPAddress, edit func(*armnetwork.PublicIPAddress)) (*armnetwork.PublicIPAddress, error) {
	want := *pip
	if pip.Properties != nil {
		props := *pip.Properties
		want.Properties = &props
	} else {
		want.Properties = &armnetwork.PublicIPAddressPropertiesFormat{}
	}
	edit(&want)
	name := ptr.Deref(pip.Name, "")
	out, err := client.CreateOrUpdate(ctx, rg, name, want, ptr.Deref(pip.Etag, ""))
	if err != nil {
		return nil, fmt.Errorf("write public IP %s/%s: %w", rg, name, err)
	}
	if a := address(pip); a != "" && address(out) != a {
		klog.FromContext(ctx).Error(nil, "Azure changed the address of a public IP azlb wrote to keep it", "publicIP", name, "was", a, "now", address(out))
	}
	return out, nil
}

// MakeStatic makes a Basic Dynamic public IP that holds an address Static,
// so that it keeps the address once disassociated (ARM allows it while the
// public IP is associated). It reports whether it wrote.
func MakeStatic(ctx context.Context, client azure.PublicIPClient, rg string, pip *armnetwork.PublicIPAddress) (bool, error) {
	if !IsBasic(pip) || !isDynamic(pip) || address(pip) == "" {
		return false, nil
	}
	_, err := writeCopy(ctx, client, rg, pip, func(p *armnetwork.PublicIPAddress) {
		p.Properties.PublicIPAllocationMethod = to.Ptr(armnetwork.IPAllocationMethodStatic)
	})
	return err == nil, err
}

// UpgradePublicIP upgrades a Basic public IP to Standard (Regional,
// Static), keeping its address, name, tags and zones; one PUT with
// If-Match. ARM upgrades only a Static public IP nothing uses: for any
// other it writes nothing and returns an *UpgradeError.
func UpgradePublicIP(ctx context.Context, client azure.PublicIPClient, rg string, pip *armnetwork.PublicIPAddress) (*armnetwork.PublicIPAddress, error) {
	name := ptr.Deref(pip.Name, "")
	if p := pip.Properties; p != nil && (p.IPConfiguration != nil || p.NatGateway != nil) {
		user := ""
		if p.IPConfiguration != nil {
			user = ptr.Deref(p.IPConfiguration.ID, "")
		} else {
			user = ptr.Deref(p.NatGateway.ID, "")
		}
		return nil, &UpgradeError{PublicIP: name, Reason: "it is in use by " + user +
			" (Azure upgrades only a public IP nothing uses; azlb deletes the Basic load balancers it manages first, anything else must let go of it)"}
	}
	if isDynamic(pip) {
		return nil, &UpgradeError{PublicIP: name, Reason: "its allocation is Dynamic, so it holds no address any more, and Azure upgrades only Static public IPs; " +
			"set its allocation method to Static (it gets a new address) and azlb upgrades it on the next reconcile"}
	}
	return writeCopy(ctx, client, rg, pip, func(p *armnetwork.PublicIPAddress) {
		p.SKU = &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard), Tier: to.Ptr(armnetwork.PublicIPAddressSKUTierRegional)}
		p.Properties.PublicIPAllocationMethod = to.Ptr(armnetwork.IPAllocationMethodStatic)
	})
}
