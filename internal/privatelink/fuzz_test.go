package privatelink

import (
	"errors"
	"strings"
	"testing"

	"github.com/azlb/azlb/internal/annotations"
)

// FuzzParse: any annotation values either parse into a Spec within
// Azure's limits or fail with errors that each name an azure-pls-*
// annotation; never a panic.
func FuzzParse(f *testing.F) {
	f.Add("true", "pls", "rg", "subnet", "2", "10.0.0.1 10.0.0.2", "a.example.com", "false", "*", subA)
	f.Add("TRUE", "", "", "", "9", "::1", "..", "maybe", subA+" *", "x")
	f.Add("", "a", "(rg)", "s", "1", "10.0.0.1", "*.x.y", "true", subA, subA)
	f.Fuzz(func(t *testing.T, create, name, rg, subnet, count, ips, fqdns, proxy, vis, auto string) {
		vals := []string{create, name, rg, subnet, count, ips, fqdns, proxy, vis, auto}
		ann := map[string]string{}
		for i, k := range Keys {
			ann[k] = vals[i]
		}
		s, err := Parse(ann, defs)
		if err != nil {
			for _, e := range unwrapAll(err) {
				var ae *annotations.Error
				if !errors.As(e, &ae) || !strings.HasPrefix(ae.Key, annotations.Prefix+"azure-pls-") {
					t.Fatalf("error %v names no azure-pls annotation", e)
				}
			}
			return
		}
		if s.IPCount < 1 || s.IPCount > MaxIPConfigurations || len(s.StaticIPs) > s.IPCount {
			t.Fatalf("out of limits: %+v", s)
		}
		for _, a := range s.StaticIPs {
			if !a.Is4() {
				t.Fatalf("non-IPv4 NAT address %v", a)
			}
		}
		if s.Create {
			d := Desired(s, Target{FrontendID: "/x/frontendIPConfigurations/fe", SubnetID: "/x/subnets/" + s.Subnet, Location: "eastus", ClusterName: "c", Owner: "ns/svc"}, s.NameFor("/x/frontendIPConfigurations/fe"))
			if len(d.Properties.IPConfigurations) != s.IPCount {
				t.Fatalf("%d ip configurations for count %d", len(d.Properties.IPConfigurations), s.IPCount)
			}
			for _, c := range d.Properties.IPConfigurations {
				if len(*c.Name) > maxIPConfigName {
					t.Fatalf("ip configuration name %q too long", *c.Name)
				}
			}
		}
	})
}

func unwrapAll(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
