package annotations

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

const testPrefixID = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/net-rg/providers/Microsoft.Network/publicIPPrefixes/web-prefix"

// The public IP annotations of issue 26 are read (and so no longer reported
// as unsupported).
func TestParsePublicIPAnnotations(t *testing.T) {
	spec, err := Parse(newService(map[string]string{
		KeyPIPResourceGroup: " net-rg ",
		KeyPIPPrefixID:      testPrefixID,
		KeyPIPPrefixIDIPv6:  strings.ToLower(testPrefixID) + "-v6",
		KeyPIPTags:          "team=web, env=prod",
		KeyPIPIPTags:        "RoutingPreference=Internet, FirstPartyUsage=/Unprivileged",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Unsupported) != 0 {
		t.Errorf("Unsupported = %v, want none", spec.Unsupported)
	}
	if spec.PIPResourceGroup != "net-rg" || spec.PIPPrefixFor(false) != testPrefixID || spec.PIPPrefixFor(true) != strings.ToLower(testPrefixID)+"-v6" {
		t.Errorf("resource group %q, prefixes %q %q", spec.PIPResourceGroup, spec.PIPPrefixID, spec.PIPPrefixIDIPv6)
	}
	if !maps.Equal(spec.PIPTags, map[string]string{"team": "web", "env": "prod"}) {
		t.Errorf("PIPTags = %v", spec.PIPTags)
	}
	want := []IPTag{{"RoutingPreference", "Internet"}, {"FirstPartyUsage", "/Unprivileged"}}
	if len(spec.PIPIPTags) != 2 || spec.PIPIPTags[0] != want[0] || spec.PIPIPTags[1] != want[1] {
		t.Errorf("PIPIPTags = %v, want %v", spec.PIPIPTags, want)
	}
}

func TestParsePublicIPAnnotationErrors(t *testing.T) {
	for key, value := range map[string]string{
		KeyPIPResourceGroup: "bad/group",
		KeyPIPPrefixID:      "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/pip",
		KeyPIPPrefixIDIPv6:  "web-prefix",
		KeyPIPTags:          "team=web,a/b=c",
		KeyPIPIPTags:        "RoutingPreference",
	} {
		_, err := Parse(newService(map[string]string{key: value}))
		if err == nil || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), quoteValue(value)) {
			t.Errorf("%s=%q: error %v, want one naming the key and the value", key, value, err)
		}
	}
}

// azure-pip-tags is read as the Azure cloud provider reads it (issue 40
// item 3): keys and values trimmed, an empty value kept, and an item that
// is not one key=value pair with a non-blank key dropped, listed in
// DroppedPIPTags for the Warning event, not refused.
func TestParsePIPTagsDropsWhatUpstreamDrops(t *testing.T) {
	for value, want := range map[string]struct {
		tags    map[string]string
		dropped []string
	}{
		"a=b,c= d,e =, =f":       {map[string]string{"a": "b", "c": "d", "e": ""}, []string{"=f"}},
		"team, x=1=2 ,k=v,  =  ": {map[string]string{"k": "v"}, []string{"team", "x=1=2", "="}},
		"a=b,,":                  {map[string]string{"a": "b"}, nil},
		"=":                      {nil, []string{"="}},
	} {
		spec, err := Parse(newService(map[string]string{KeyPIPTags: value}))
		if err != nil {
			t.Errorf("%q: %v", value, err)
			continue
		}
		if !maps.Equal(spec.PIPTags, want.tags) || !slices.Equal(spec.DroppedPIPTags, want.dropped) {
			t.Errorf("%q: tags %v dropped %q, want %v %q", value, spec.PIPTags, spec.DroppedPIPTags, want.tags, want.dropped)
		}
	}
}
