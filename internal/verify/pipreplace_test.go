package verify

import (
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/utils/ptr"
)

const prefixID = "/subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.Network/publicIPPrefixes/new-prefix"

// An owned public IP of one Service that does not come from the prefix
// its annotation names, or lacks its IP tags, is a finding (azlb replaces
// it); a prefix that does not exist refuses the Service (one SKIP line); a
// public IP several Services share keeps what it has (issue 40 item 4).
func TestPublicIPReplacementFindings(t *testing.T) {
	withPrefix := func(prefix *armnetwork.PublicIPPrefix) *Snapshot {
		s := fixture()
		s.Services[0].Annotations = map[string]string{"service.beta.kubernetes.io/azure-pip-prefix-id": prefixID}
		s.Prefixes = map[string]*armnetwork.PublicIPPrefix{strings.ToLower(prefixID): prefix}
		return s
	}
	v4 := &armnetwork.PublicIPPrefix{ID: ptr.To(prefixID), Properties: &armnetwork.PublicIPPrefixPropertiesFormat{PublicIPAddressVersion: ptr.To(armnetwork.IPVersionIPv4)}}

	r := Check(withPrefix(v4))
	if got := findings(r); !strings.Contains(got, "takes its address from prefix") || !strings.Contains(got, "azlb replaces it") {
		t.Errorf("prefix differs: findings %q, want one saying azlb replaces the public IP", got)
	}

	s := withPrefix(v4)
	s.PublicIPs[0].Properties.PublicIPPrefix = &armnetwork.SubResource{ID: ptr.To(prefixID)}
	if r := Check(s); !r.Clean() {
		t.Errorf("public IP from the prefix: findings\n%s", findings(r))
	}

	wantSkipped(t, withPrefix(nil), "default/web", "PublicIPPrefixUnusable")
	v6 := &armnetwork.PublicIPPrefix{ID: ptr.To(prefixID), Properties: &armnetwork.PublicIPPrefixPropertiesFormat{PublicIPAddressVersion: ptr.To(armnetwork.IPVersionIPv6)}}
	wantSkipped(t, withPrefix(v6), "default/web", "PublicIPPrefixUnusable")

	s = withPrefix(v4)
	s.PublicIPs[0].Tags["k8s-azure-service"] = ptr.To("default/web,default/other")
	if r := Check(s); strings.Contains(findings(r), "azlb replaces it") {
		t.Errorf("shared public IP: findings\n%s", findings(r))
	}

	s = fixture()
	s.Services[0].Annotations = map[string]string{"service.beta.kubernetes.io/azure-pip-ip-tags": "RoutingPreference=Internet"}
	if got := findings(Check(s)); !strings.Contains(got, "has IP tags (none), want service.beta.kubernetes.io/azure-pip-ip-tags") {
		t.Errorf("IP tags differ: findings %q", got)
	}
}
