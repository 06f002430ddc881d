package verify

import (
	"context"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/privatelink"
)

// Replaced public IPs (load-balancers.md, Public IPs): a public IP azlb
// created for one Service alone, which the Service does not name by its
// address, whose frontends serve only that Service and no Private Link
// Service, is replaced by a new public IP of the same name when it does not
// come from the prefix azure-pip-prefix-id(-ipv6) names or does not have
// the IP tags azure-pip-ip-tags lists. Such a public IP left as it is is a
// finding; a prefix that does not exist or is of the other IP version
// refuses the Service (PublicIPPrefixUnusable). Any other public IP keeps
// what it has (a Warning event): no finding.

// collectPrefixes reads the public IP prefixes the LoadBalancer Services
// name, by lower-cased id (nil: it does not exist).
func collectPrefixes(ctx context.Context, clients *azure.Clients, svcs []*v1.Service) (map[string]*armnetwork.PublicIPPrefix, error) {
	out := map[string]*armnetwork.PublicIPPrefix{}
	cs := map[string]*armnetwork.PublicIPPrefixesClient{}
	for _, svc := range svcs {
		if svc.Spec.Type != v1.ServiceTypeLoadBalancer {
			continue
		}
		for _, key := range []string{annotations.KeyPIPPrefixID, annotations.KeyPIPPrefixIDIPv6} {
			id := strings.TrimSpace(svc.Annotations[key])
			if _, read := out[lower(id)]; id == "" || read {
				continue
			}
			rid, err := arm.ParseResourceID(id)
			if err != nil {
				continue // an invalid annotation is judged as such
			}
			c := cs[lower(rid.SubscriptionID)]
			if c == nil {
				if c, err = armnetwork.NewPublicIPPrefixesClient(rid.SubscriptionID, clients.NetworkCredential(), clients.ARMClientOptions("publicipprefix")); err != nil {
					return nil, err
				}
				cs[lower(rid.SubscriptionID)] = c
			}
			resp, err := c.Get(ctx, rid.ResourceGroupName, rid.Name, nil)
			switch {
			case azure.Classify(err) == azure.ClassStale:
				out[lower(id)] = nil
			case err != nil:
				return nil, fmt.Errorf("read public IP prefix %s: %w", id, err)
			default:
				out[lower(id)] = &resp.PublicIPPrefix
			}
		}
	}
	return out, nil
}

// replaceable: azlb replaces the public IP, rather than keep it, when it
// does not meet the Service's prefix or IP tags.
func (m *nodeMode) replaceable(svc *v1.Service, spec *annotations.ServiceSpec, fam v1.IPFamily, pip *armnetwork.PublicIPAddress) bool {
	if !m.ownedPIP(pip) || pip.SKU == nil || !strings.EqualFold(string(ptr.Deref(pip.SKU.Name, "")), "Standard") {
		return false
	}
	if v, _ := tagValue(pip.Tags, names.TagServiceName); strings.TrimSpace(v) != svc.Namespace+"/"+svc.Name {
		return false
	}
	pipName := spec.PIPName
	if fam == v1.IPv6Protocol {
		pipName = spec.PIPNameIPv6
	}
	if requestedAddress(svc, spec, fam) != "" && pipName == "" {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(svc.Annotations[privatelink.KeyCreate]), "true") {
		return false
	}
	base := names.FrontendBase(svc)
	for _, lb := range m.managed {
		for _, fe := range frontendsOf(lb) {
			if fe.Properties == nil || fe.Properties.PublicIPAddress == nil || lower(ptr.Deref(fe.Properties.PublicIPAddress.ID, "")) != lower(ptr.Deref(pip.ID, "")) {
				continue
			}
			if !names.Owns(base, ptr.Deref(fe.Name, "")) {
				return false
			}
			for _, r := range rulesOf(lb) {
				if r.Properties != nil && !names.Owns(base, ptr.Deref(r.Name, "")) && strings.EqualFold(childName(r.Properties.FrontendIPConfiguration), ptr.Deref(fe.Name, "")) {
					return false
				}
			}
		}
	}
	return true
}

// prefixUnusable says why the prefix the Service names for the family
// cannot give a public IP ("" when it can, or was not read).
func (m *nodeMode) prefixUnusable(spec *annotations.ServiceSpec, fam v1.IPFamily) string {
	key, id := annotations.KeyPIPPrefixID, spec.PIPPrefixFor(fam == v1.IPv6Protocol)
	if fam == v1.IPv6Protocol {
		key = annotations.KeyPIPPrefixIDIPv6
	}
	prefix, read := m.s.Prefixes[lower(id)]
	switch {
	case id == "" || !read:
		return ""
	case prefix == nil:
		return fmt.Sprintf("refused (PublicIPPrefixUnusable): %s=%s: the public IP prefix does not exist", key, id)
	case prefix.Properties != nil && prefix.Properties.PublicIPAddressVersion != nil && !strings.EqualFold(string(*prefix.Properties.PublicIPAddressVersion), ipVersion(fam)):
		return fmt.Sprintf("refused (PublicIPPrefixUnusable): %s=%s: the prefix is %s, the frontend needs %s", key, id, *prefix.Properties.PublicIPAddressVersion, ipVersion(fam))
	}
	return ""
}

// replacementDue names what the Service asks of its public IP that only a
// new one has ("" when it has it).
func replacementDue(spec *annotations.ServiceSpec, fam v1.IPFamily, pip *armnetwork.PublicIPAddress) string {
	have := ""
	if pip.Properties != nil && pip.Properties.PublicIPPrefix != nil {
		have = ptr.Deref(pip.Properties.PublicIPPrefix.ID, "")
	}
	if id := spec.PIPPrefixFor(fam == v1.IPv6Protocol); id != "" && !strings.EqualFold(id, have) {
		return fmt.Sprintf("takes its address from prefix %q, want %s (annotation)", have, id)
	}
	if spec.PIPIPTags != nil && !sameIPTags(spec.PIPIPTags, pip) {
		return fmt.Sprintf("has IP tags %s, want %s", ipTagList(pip), annotations.KeyPIPIPTags)
	}
	return ""
}

// checkReplacement: a replaceable public IP meets the Service's prefix and
// IP tags (azlb replaces one that does not).
func (m *nodeMode) checkReplacement(svc *v1.Service, spec *annotations.ServiceSpec, fam v1.IPFamily, pip *armnetwork.PublicIPAddress) {
	if !m.replaceable(svc, spec, fam, pip) {
		return
	}
	if id := spec.PIPPrefixFor(fam == v1.IPv6Protocol); id != "" {
		if _, read := m.s.Prefixes[lower(id)]; !read {
			return // a prefix not read is not judged
		}
	}
	if why := replacementDue(spec, fam, pip); why != "" {
		m.r.add(serviceObject(svc), "load-balancers.md#public-ips-owned-and-user-owned",
			"public IP %s %s: azlb replaces it with a new public IP", ptr.Deref(pip.Name, ""), why)
	}
}

// sameIPTags compares IP tags as sets, types ignoring case.
func sameIPTags(want []annotations.IPTag, pip *armnetwork.PublicIPAddress) bool {
	set := map[string]int{}
	for _, w := range want {
		set[lower(w.Type)+"="+w.Tag]++
	}
	n := 0
	if pip.Properties != nil {
		for _, h := range pip.Properties.IPTags {
			if h != nil {
				set[lower(ptr.Deref(h.IPTagType, ""))+"="+ptr.Deref(h.Tag, "")]--
				n++
			}
		}
	}
	for _, c := range set {
		if c != 0 {
			return false
		}
	}
	return n == len(want)
}

func ipTagList(pip *armnetwork.PublicIPAddress) string {
	if pip.Properties == nil || len(pip.Properties.IPTags) == 0 {
		return "(none)"
	}
	parts := make([]string, 0, len(pip.Properties.IPTags))
	for _, t := range pip.Properties.IPTags {
		if t == nil {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%s", ptr.Deref(t.IPTagType, ""), ptr.Deref(t.Tag, "")))
	}
	return strings.Join(parts, ",")
}
