package adminstate

import (
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/backendpool"
)

// State is the admin state of a backend address entry.
type State = armnetwork.LoadBalancerBackendAddressAdminState

// sameState compares admin states case-insensitively (ARM canonicalises
// "down" to "Down").
func sameState(a, b State) bool { return strings.EqualFold(string(a), string(b)) }

// setAdminState sets, on every entry of the pool whose key
// (backendpool.EntryKey: its IP address, or the owner of its ip
// configuration) is in desired, that admin state. Other entries are left
// untouched. It returns the keys of the entries it changed and of the
// desired keys found in the pool.
func setAdminState(pool *armnetwork.BackendAddressPool, desired map[string]State) (changed, found []string) {
	return setAdminStateKeeping(pool, desired, nil)
}

// setAdminStateKeeping is setAdminState for a Local Service's dedicated
// pool: the entries named after a node of keepDown (the nodes draining for
// the Service, backendpool.LocalPools) are set Down whatever desired says
// (backendpool.Policy.LocalState), so the admin-state writer never puts
// None back over the local service updater's Down.
func setAdminStateKeeping(pool *armnetwork.BackendAddressPool, desired map[string]State, keepDown sets.Set[string]) (changed, found []string) {
	if pool == nil || pool.Properties == nil {
		return nil, nil
	}
	for _, a := range pool.Properties.LoadBalancerBackendAddresses {
		ip := backendpool.EntryKey(a)
		if ip == "" {
			continue
		}
		want, ok := desired[ip]
		if !ok {
			continue
		}
		found = append(found, ip)
		if keepDown.Has(ptr.Deref(a.Name, "")) {
			want = armnetwork.LoadBalancerBackendAddressAdminStateDown
		}
		if sameState(backendpool.AdminStateOf(a), want) {
			continue
		}
		w := want
		a.Properties.AdminState = &w
		changed = append(changed, ip)
	}
	return changed, found
}
