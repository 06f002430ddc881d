package annotations

import (
	"os"
	"strings"
	"testing"
)

// docs/load-balancers.md lists every key azlb supports (issue 27): any other
// azure-*/port_* key is reported as unsupported, so a key missing from the
// page would leave users unable to tell the two apart.
func TestDocsListEverySupportedKey(t *testing.T) {
	b, err := os.ReadFile("../../docs/load-balancers.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for name := range serviceWide {
		if !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("docs/load-balancers.md does not list the supported key %s", name)
		}
	}
	for suffix := range portSuffixes {
		if k := "`port_{port}_" + suffix + "`"; !strings.Contains(doc, k) {
			t.Errorf("docs/load-balancers.md does not list the supported key %s", k)
		}
	}
}

// What Unsupported lists: azure-* and port_* keys azlb does not implement,
// nothing else (issue 27: each becomes an UnsupportedAnnotation event).
func TestUnsupportedKeys(t *testing.T) {
	svc := newService(map[string]string{
		Prefix + "azure-shared-securityrule":            "true",
		Prefix + "port_80_no_health_probe":              "true",
		Prefix + "port_80":                              "x",
		Prefix + "azure-load-balancer-tcp-idle-timeout": "10",
		Prefix + "port_80_health-probe_protocol":        "Http",
		Prefix + "azure-allowed-ip-ranges":              "10.0.0.0/8",
		Prefix + "azure-disable-load-balancer-nsg-rule": "true",
		Prefix + "load-balancer-source-ranges":          "10.0.0.0/8",
		Prefix + "aws-load-balancer-type":               "nlb",
		"example.com/azure-thing":                       "y",
	})
	spec, err := Parse(svc)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{Prefix + "azure-shared-securityrule", Prefix + "port_80", Prefix + "port_80_no_health_probe"}
	if strings.Join(spec.Unsupported, " ") != strings.Join(want, " ") {
		t.Errorf("Unsupported = %v, want %v", spec.Unsupported, want)
	}
}
