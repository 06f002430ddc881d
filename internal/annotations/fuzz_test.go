package annotations

import (
	"slices"
	"strings"
	"testing"
)

// fuzzKey turns a fuzzed string into an annotation key: strings without a
// "/" get Prefix, so the fuzzer reaches the supported keys with short
// inputs.
func fuzzKey(s string) string {
	if strings.Contains(s, "/") {
		return s
	}
	return Prefix + s
}

// FuzzParse builds an annotation map from three fuzzed key/value pairs and
// checks that Parse never panics, that every error is an *Error naming one
// of the keys, and that a successful spec yields sane probes.
func FuzzParse(f *testing.F) {
	f.Add("azure-load-balancer-health-probe-interval", "abc", "azure-load-balancer-internal", "true", "port_80_health-probe_port", "https", false)
	f.Add("azure-load-balancer-health-probe-interval", "60", "azure-load-balancer-health-probe-num-of-probe", "3", "port_443_health-probe_protocol", "Http", true)
	f.Add("azure-load-balancer-enable-high-availability-ports", "true", "azure-load-balancer-ipv6", "::ffff:1.2.3.4", "port_080_no_lb_rule", "true", false)
	f.Add("azure-load-balancer-configurations", "lb-1,,LB-1", "azure-dns-label-name", "Ab", "port_80_health-probe_interval", "61", true)
	f.Add("port_443_health-probe_num-of-probe", "24", "azure-load-balancer-tcp-idle-timeout", "100", "port_8080_no_probe_rule", "TRUE", false)
	f.Add("azure-pip-name", strings.Repeat("x", 200), "example.com/x", "y", "port_", "", true)
	f.Add("azure-pip-tags", "a=b,c= d,e =, =f", "azure-pip-tags", "team,x=1=2", "port_80_health-probe_interval", "10", true)
	f.Add("azure-additional-public-ips", " 1.2.3.4, 2001:db8::1,,1.2.3.4", "azure-additional-public-ips", "fe80::1%eth0,::ffff:1.2.3.4", "azure-load-balancer-ipv4", "0.0.0.0", false)
	// Every annotation azlb interprets, with a value of the wrong kind.
	for _, k := range []string{KeyInternal, KeyInternalSubnet, KeyPIPName, KeyPIPNameIPv6, KeyIPv4, KeyIPv6, KeyLoadBalancerConfigurations,
		KeyDNSLabelName, KeyTCPIdleTimeout, KeyDisableFloatingIP, KeyDisableTCPReset, KeyHAPorts, KeyProbeProtocol, KeyProbeRequestPath,
		KeyProbeInterval, KeyProbeNumOfProbe, KeyAdditionalPublicIPs} {
		f.Add(k, "\x00-1", k, "", "port_80_health-probe_interval", "-1", false)
	}
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3, v3 string, local bool) {
		ann := map[string]string{fuzzKey(k1): v1, fuzzKey(k2): v2, fuzzKey(k3): v3}
		svc := newService(ann)
		if local {
			svc = localService(ann)
		}
		spec, err := Parse(svc)
		if err != nil {
			if spec != nil {
				t.Fatalf("spec alongside error %v", err)
			}
			if len(checkLeaves(t, err, ann)) == 0 {
				t.Fatalf("error without leaves: %v", err)
			}
			return
		}
		for _, p := range svc.Spec.Ports {
			pr := spec.ProbeFor(p)
			switch pr.Protocol {
			case ProbeTCP:
				if pr.RequestPath != "" {
					t.Fatalf("Tcp probe with a path: %+v", pr)
				}
			case ProbeHTTP, ProbeHTTPS:
				if !strings.HasPrefix(pr.RequestPath, "/") {
					t.Fatalf("Http probe without an absolute path: %+v", pr)
				}
			default:
				t.Fatalf("unknown protocol: %+v", pr)
			}
			if pr.IntervalInSeconds < MinProbeIntervalSeconds || pr.NumberOfProbes < MinNumberOfProbes ||
				int64(pr.IntervalInSeconds)*int64(pr.NumberOfProbes) > MaxProbeWindowSeconds {
				t.Fatalf("probe timing breaks Azure's rules: %+v", pr)
			}
			if pr.Port < 0 || pr.Port > 65535 {
				t.Fatalf("probe port out of range: %+v", pr)
			}
		}
		if spec.HAPorts && !spec.Internal {
			t.Fatalf("HA ports accepted on a public Service")
		}
		for k, v := range spec.PIPTags {
			if k == "" || k != strings.TrimSpace(k) || v != strings.TrimSpace(v) || strings.Contains(k+v, "=") || strings.Contains(k+v, ",") {
				t.Fatalf("azure-pip-tags gave the tag %q=%q", k, v)
			}
		}
		checkAdditionalIPs(t, spec.AdditionalPublicIPs)
		if listed := ListedAdditionalIPs(svc); !slices.Equal(listed, spec.AdditionalPublicIPs) {
			t.Fatalf("ListedAdditionalIPs %v, Parse %v", listed, spec.AdditionalPublicIPs)
		}
		for _, d := range spec.DroppedPIPTags {
			if d == "" || d != strings.TrimSpace(d) {
				t.Fatalf("azure-pip-tags dropped %q", d)
			}
		}
	})
}
