package annotations

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/azlb/azlb/internal/config"
)

// IPTag is one azure-pip-ip-tags entry: an Azure public IP tag such as
// RoutingPreference=Internet.
type IPTag struct {
	Type, Tag string
}

// resourceGroupRE is Azure's rule for resource group names: 1-90 letters,
// digits, '_', '-', '.', '(' or ')', not ending with '.'.
var resourceGroupRE = regexp.MustCompile(`^[-\w.()]{0,89}[-\w()]$`)

const resourceGroupRule = "is not a valid resource group name: 1-90 letters, digits, '_', '-', '.', '(' or ')', not ending with '.'"

// prefixIDRE matches the ARM id of a public IP prefix.
var prefixIDRE = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Network/publicIPPrefixes/[^/]+$`)

const prefixIDRule = "is not the id of a public IP prefix: /subscriptions/{subscription}/resourceGroups/{group}/providers/Microsoft.Network/publicIPPrefixes/{name}"

func init() {
	serviceWide[strings.TrimPrefix(KeyPIPResourceGroup, Prefix)] = func(p *parser, key, value string) {
		v := strings.TrimSpace(value)
		if v == "" {
			return
		}
		if !resourceGroupRE.MatchString(v) {
			p.fail(&Error{Key: key, Value: value, Rule: resourceGroupRule})
			return
		}
		p.spec.PIPResourceGroup = v
	}
	serviceWide[strings.TrimPrefix(KeyPIPPrefixID, Prefix)] = func(p *parser, key, value string) {
		p.spec.PIPPrefixID = p.prefixID(key, value)
	}
	serviceWide[strings.TrimPrefix(KeyPIPPrefixIDIPv6, Prefix)] = func(p *parser, key, value string) {
		p.spec.PIPPrefixIDIPv6 = p.prefixID(key, value)
	}
	serviceWide[strings.TrimPrefix(KeyPIPTags, Prefix)] = func(p *parser, key, value string) {
		tags, dropped, err := config.ParseTags(value)
		if err != nil {
			p.fail(&Error{Key: key, Value: value, Rule: "is invalid: " + err.Error()})
			return
		}
		if len(tags) > 0 {
			p.spec.PIPTags = tags
		}
		p.spec.DroppedPIPTags = dropped
	}
	serviceWide[strings.TrimPrefix(KeyPIPIPTags, Prefix)] = func(p *parser, key, value string) {
		tags, err := parseIPTags(value)
		if err != nil {
			p.fail(&Error{Key: key, Value: value, Rule: err.Error()})
			return
		}
		p.spec.PIPIPTags = tags
	}
}

// prefixID validates a public IP prefix id; blank means unset.
func (p *parser) prefixID(key, value string) string {
	return p.matching(key, value, prefixIDRE, prefixIDRule)
}

// parseIPTags reads "Type=Tag,Type2=Tag2" (the Azure cloud provider's
// format), empty items ignored.
func parseIPTags(value string) ([]IPTag, error) {
	var out []IPTag
	for _, item := range strings.Split(value, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		typ, tag, ok := strings.Cut(item, "=")
		typ, tag = strings.TrimSpace(typ), strings.TrimSpace(tag)
		if !ok || typ == "" || tag == "" {
			return nil, fmt.Errorf("has %s, which is not an IP tag: write ipTagType=tag pairs separated by commas, e.g. \"RoutingPreference=Internet\"", quoteValue(strings.TrimSpace(item)))
		}
		out = append(out, IPTag{Type: typ, Tag: tag})
	}
	return out, nil
}

// PIPPrefixFor is the azure-pip-prefix-id(-ipv6) of a family ("IPv4" or
// "IPv6"); "" when unset.
func (s *ServiceSpec) PIPPrefixFor(ipv6 bool) string {
	if ipv6 {
		return s.PIPPrefixIDIPv6
	}
	return s.PIPPrefixID
}
