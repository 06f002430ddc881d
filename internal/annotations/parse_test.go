package annotations

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestParseDefaults(t *testing.T) {
	spec, err := Parse(newService(nil))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if spec.Internal || spec.HAPorts || !spec.EnableFloatingIP || !spec.EnableTCPReset {
		t.Errorf("bool defaults wrong: %+v", spec)
	}
	if spec.TCPIdleTimeoutMinutes != nil || spec.IPv4.IsValid() || spec.IPv6.IsValid() ||
		spec.Ports != nil || spec.Unsupported != nil || spec.LoadBalancerConfigurations != nil ||
		spec.Probe != (ProbeOverrides{}) {
		t.Errorf("unset fields not zero: %+v", spec)
	}
}

func TestParseValid(t *testing.T) {
	ann := map[string]string{
		KeyInternal:                                     "TRUE",
		KeyInternalSubnet:                               " subnet-a ",
		KeyPIPName:                                      "my.pip_1",
		KeyPIPNameIPv6:                                  "pip6",
		KeyIPv4:                                         "10.0.0.7",
		KeyIPv6:                                         "fd00::7",
		KeyLoadBalancerConfigurations:                   " lb-1 , LB-2,Lb-1",
		KeyDNSLabelName:                                 "my-app-1",
		KeyTCPIdleTimeout:                               "100",
		KeyDisableFloatingIP:                            " True ",
		KeyDisableTCPReset:                              "false",
		KeyHAPorts:                                      "true",
		KeyProbeProtocol:                                "hTTp",
		KeyProbeRequestPath:                             "/ready",
		KeyProbeInterval:                                "60",
		KeyProbeNumOfProbe:                              "2", // 120 s exactly is allowed
		PortKey(443, PortSuffixProbeProtocol):           "HTTPS",
		PortKey(443, PortSuffixProbeRequestPath):        "/tls",
		PortKey(443, PortSuffixProbeInterval):           "5",
		PortKey(443, PortSuffixProbeNumOfProbe):         "24",
		PortKey(443, PortSuffixProbePort):               "http",
		PortKey(80, PortSuffixNoLBRule):                 "false",
		PortKey(80, PortSuffixNoProbeRule):              "TRUE",
		PortKey(80, PortSuffixProbePort):                "10256",
		Prefix + "azure-load-balancer-resource-group":   "rg",
		Prefix + "port_80_health-probe_probe-threshold": "3",
		Prefix + "port_80":                              "x",
		Prefix + "other-cloud-thing":                    "ignored",
		"example.com/azure-load-balancer-internal":      "not ours",
	}
	spec, err := Parse(newService(ann))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := &ServiceSpec{
		Internal:                   true,
		InternalSubnet:             "subnet-a",
		PIPName:                    "my.pip_1",
		PIPNameIPv6:                "pip6",
		IPv4:                       netip.MustParseAddr("10.0.0.7"),
		IPv6:                       netip.MustParseAddr("fd00::7"),
		LoadBalancerConfigurations: []string{"lb-1", "LB-2"},
		DNSLabelName:               "my-app-1",
		PIPResourceGroup:           "rg",
		TCPIdleTimeoutMinutes:      i32(100),
		EnableFloatingIP:           false,
		EnableTCPReset:             true,
		HAPorts:                    true,
		Probe:                      ProbeOverrides{Protocol: ProbeHTTP, RequestPath: "/ready", IntervalInSeconds: i32(60), NumberOfProbes: i32(2)},
		Ports: map[int32]PortOverrides{
			443: {Probe: ProbeOverrides{Protocol: ProbeHTTPS, RequestPath: "/tls", IntervalInSeconds: i32(5), NumberOfProbes: i32(24), Port: &ProbePortRef{Name: "http"}}},
			80:  {NoProbeRule: true, Probe: ProbeOverrides{Port: &ProbePortRef{Number: 10256}}},
		},
		Unsupported: []string{
			Prefix + "port_80",
			Prefix + "port_80_health-probe_probe-threshold",
		},
	}
	// Compare exported fields only.
	spec.local, spec.healthCheckNodePort, spec.servicePorts = false, 0, nil
	if !reflect.DeepEqual(spec, want) {
		t.Errorf("Parse =\n%+v\nwant\n%+v", spec, want)
	}
	if got := spec.Port(80); !got.NoProbeRule || got.NoLBRule {
		t.Errorf("Port(80) = %+v", got)
	}
	if got := spec.Port(8080); !reflect.DeepEqual(got, PortOverrides{}) {
		t.Errorf("Port(8080) = %+v, want zero", got)
	}
}

func TestParseBlankOptionalStrings(t *testing.T) {
	ann := map[string]string{
		KeyInternalSubnet: " ", KeyPIPName: "", KeyPIPNameIPv6: "  ", KeyIPv4: "", KeyIPv6: " ",
		KeyLoadBalancerConfigurations: " ", KeyDNSLabelName: "",
	}
	spec, err := Parse(newService(ann))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if spec.InternalSubnet != "" || spec.PIPName != "" || spec.PIPNameIPv6 != "" || spec.IPv4.IsValid() ||
		spec.IPv6.IsValid() || spec.LoadBalancerConfigurations != nil || spec.DNSLabelName != "" {
		t.Errorf("blank values not treated as unset: %+v", spec)
	}
}

func TestParseErrors(t *testing.T) {
	long := strings.Repeat("a", 81)
	tests := []struct {
		name string
		ann  map[string]string
		want []string // one expected substring per leaf error, in order
	}{
		{"interval not an integer", map[string]string{KeyProbeInterval: "abc"},
			[]string{`service.beta.kubernetes.io/azure-load-balancer-health-probe-interval: "abc" is not an integer`}},
		{"interval below Azure minimum", map[string]string{KeyProbeInterval: "4"},
			[]string{`azure-load-balancer-health-probe-interval: "4" is out of range: must be at least 5 seconds (Azure's minimum probe interval)`}},
		{"interval overflows", map[string]string{KeyProbeInterval: "99999999999"},
			[]string{`"99999999999" is out of range for an integer`}},
		{"num-of-probe zero", map[string]string{KeyProbeNumOfProbe: "0"},
			[]string{`azure-load-balancer-health-probe-num-of-probe: "0" is out of range: must be at least 1`}},
		{"window over 120 with default num", map[string]string{KeyProbeInterval: "61"},
			[]string{`azure-load-balancer-health-probe-interval: "61" gives interval × num-of-probe = 61 s × 2 = 122 s, over Azure's limit of 120 s (interval from service.beta.kubernetes.io/azure-load-balancer-health-probe-interval, num-of-probe from the default)`}},
		{"window over 120 with num only", map[string]string{KeyProbeNumOfProbe: "25"},
			[]string{`azure-load-balancer-health-probe-num-of-probe: "25" gives interval × num-of-probe = 5 s × 25 = 125 s`}},
		{"per-port window mixing levels", map[string]string{KeyProbeInterval: "30", PortKey(443, PortSuffixProbeNumOfProbe): "5"},
			[]string{`port_443_health-probe_num-of-probe: "5" gives interval × num-of-probe = 30 s × 5 = 150 s, over Azure's limit of 120 s (interval from service.beta.kubernetes.io/azure-load-balancer-health-probe-interval, num-of-probe from service.beta.kubernetes.io/port_443_health-probe_num-of-probe)`}},
		{"bool not a bool", map[string]string{KeyInternal: "yes"},
			[]string{`azure-load-balancer-internal: "yes" is not a boolean: use "true" or "false"`}},
		{"bool empty", map[string]string{KeyDisableTCPReset: ""},
			[]string{`azure-load-balancer-disable-tcp-reset: "" is not a boolean`}},
		{"bool numeric", map[string]string{KeyDisableFloatingIP: "1"},
			[]string{`azure-disable-load-balancer-floating-ip: "1" is not a boolean`}},
		{"ipv4 given an IPv6", map[string]string{KeyIPv4: "::1"}, []string{`azure-load-balancer-ipv4: "::1" is not an IPv4 address`}},
		{"ipv4 garbage", map[string]string{KeyIPv4: "300.1.1.1"}, []string{`azure-load-balancer-ipv4: "300.1.1.1" is not an IP address`}},
		{"ipv6 given an IPv4", map[string]string{KeyIPv6: "1.2.3.4"}, []string{`azure-load-balancer-ipv6: "1.2.3.4" is not an IPv6 address`}},
		{"ipv6 mapped v4", map[string]string{KeyIPv6: "::ffff:1.2.3.4"}, []string{`is not an IPv6 address (IPv4-mapped addresses are not accepted)`}},
		{"ipv6 zone", map[string]string{KeyIPv6: "fe80::1%eth0"}, []string{`must not carry an IPv6 zone`}},
		{"pip name bad start", map[string]string{KeyPIPName: "-pip"}, []string{`azure-pip-name: "-pip" is not a valid Azure resource name`}},
		{"pip name too long", map[string]string{KeyPIPNameIPv6: long}, []string{`azure-pip-name-ipv6: "` + long[:64] + `"… is not a valid Azure resource name`}},
		{"dns label upper case", map[string]string{KeyDNSLabelName: "My-App"}, []string{`azure-dns-label-name: "My-App" is not a valid DNS label`}},
		{"dns label too short", map[string]string{KeyDNSLabelName: "ab"}, []string{`"ab" is not a valid DNS label: 3-63`}},
		{"idle timeout low", map[string]string{KeyTCPIdleTimeout: "3"}, []string{`azure-load-balancer-tcp-idle-timeout: "3" is out of range: must be between 4 and 100 minutes`}},
		{"idle timeout high", map[string]string{KeyTCPIdleTimeout: "101"}, []string{`"101" is out of range: must be between 4 and 100 minutes`}},
		{"idle timeout not integer", map[string]string{KeyTCPIdleTimeout: "4m"}, []string{`azure-load-balancer-tcp-idle-timeout: "4m" is not an integer`}},
		{"HA ports on a public LB", map[string]string{KeyHAPorts: "true"},
			[]string{`azure-load-balancer-enable-high-availability-ports: "true" is only valid for internal load balancers: set service.beta.kubernetes.io/azure-load-balancer-internal to "true" or remove it`}},
		{"HA ports with internal false", map[string]string{KeyHAPorts: "True", KeyInternal: "false"},
			[]string{`azure-load-balancer-enable-high-availability-ports: "True" is only valid for internal load balancers`}},
		{"probe protocol", map[string]string{KeyProbeProtocol: "udp"}, []string{`azure-load-balancer-health-probe-protocol: "udp" is not a probe protocol: use Tcp, Http or Https`}},
		{"request path relative", map[string]string{KeyProbeRequestPath: "healthz"}, []string{`azure-load-balancer-health-probe-request-path: "healthz" is not a request path: it must start with "/"`}},
		{"request path with space", map[string]string{KeyProbeRequestPath: "/a b"}, []string{`must not contain spaces`}},
		{"configurations empty entry", map[string]string{KeyLoadBalancerConfigurations: "lb-1,,lb-2,"},
			[]string{`azure-load-balancer-configurations: "lb-1,,lb-2," contains an empty name`}},
		{"configurations bad name", map[string]string{KeyLoadBalancerConfigurations: "lb-1, lb 2"},
			[]string{`azure-load-balancer-configurations: "lb-1, lb 2" contains invalid name(s) "lb 2": configuration names must be valid Azure resource names: 1-80`}},
		{"configurations many bad names, one error", map[string]string{KeyLoadBalancerConfigurations: "a b,c d,,e f,g h,ok"},
			[]string{`contains an empty name`, `contains invalid name(s) "a b", "c d", "e f" and 1 more:`}},
		{"per-port unknown port", map[string]string{PortKey(8080, PortSuffixProbeProtocol): "Tcp"},
			[]string{`port_8080_health-probe_protocol: "Tcp" is not applied: the Service has no port 8080 (its ports: 80, 443)`}},
		{"per-port leading zero", map[string]string{Prefix + "port_080_no_lb_rule": "true"},
			[]string{`port_080_no_lb_rule: "true" is not applied: the key's port "080" is not a port number`}},
		{"per-port not a number", map[string]string{Prefix + "port_http_no_probe_rule": "true"},
			[]string{`port_http_no_probe_rule: "true" is not applied: the key's port "http" is not a port number`}},
		{"per-port zero", map[string]string{Prefix + "port_0_health-probe_interval": "5"}, []string{`the key's port "0" is not a port number`}},
		{"per-port bad bool", map[string]string{PortKey(80, PortSuffixNoLBRule): "1"}, []string{`port_80_no_lb_rule: "1" is not a boolean`}},
		{"per-port bad protocol", map[string]string{PortKey(443, PortSuffixProbeProtocol): "grpc"}, []string{`port_443_health-probe_protocol: "grpc" is not a probe protocol`}},
		{"per-port bad path", map[string]string{PortKey(443, PortSuffixProbeRequestPath): "x"}, []string{`port_443_health-probe_request-path: "x" is not a request path`}},
		{"per-port interval low", map[string]string{PortKey(443, PortSuffixProbeInterval): "1"}, []string{`port_443_health-probe_interval: "1" is out of range`}},
		{"per-port num low", map[string]string{PortKey(80, PortSuffixProbeNumOfProbe): "-1"}, []string{`port_80_health-probe_num-of-probe: "-1" is out of range`}},
		{"probe port unknown name", map[string]string{PortKey(80, PortSuffixProbePort): "metrics"},
			[]string{`port_80_health-probe_port: "metrics" is neither a port number (1-65535) nor the name of a port of the Service`}},
		{"probe port out of range", map[string]string{PortKey(80, PortSuffixProbePort): "70000"}, []string{`port_80_health-probe_port: "70000" is out of range: must be between 1 and 65535`}},
		{"probe port empty", map[string]string{PortKey(80, PortSuffixProbePort): ""}, []string{`port_80_health-probe_port: "" is neither`}},
		{"several problems, in key order", map[string]string{
			KeyProbeInterval: "abc", KeyInternal: "maybe", KeyTCPIdleTimeout: "0", PortKey(9, PortSuffixNoLBRule): "true",
		}, []string{
			`azure-load-balancer-health-probe-interval: "abc"`,
			`azure-load-balancer-internal: "maybe"`,
			`azure-load-balancer-tcp-idle-timeout: "0"`,
			`port_9_no_lb_rule: "true" is not applied: the Service has no port 9`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := Parse(newService(tc.ann))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", spec)
			}
			if spec != nil {
				t.Errorf("Parse returned a spec alongside an error")
			}
			leaves := checkLeaves(t, err, tc.ann)
			if len(leaves) != len(tc.want) {
				t.Fatalf("got %d errors, want %d: %v", len(leaves), len(tc.want), err)
			}
			for i, w := range tc.want {
				if !strings.Contains(leaves[i].Error(), w) {
					t.Errorf("error %d = %q, want it to contain %q", i, leaves[i], w)
				}
			}
		})
	}
}

// TestParseLargeValues feeds 64 KiB values: errors must stay short and
// Parse must stay linear (a quadratic path would time the test out).
func TestParseLargeValues(t *testing.T) {
	ann := map[string]string{
		KeyLoadBalancerConfigurations: strings.Repeat("a b,", 1<<14) + strings.Repeat(",", 1<<14),
		KeyPIPName:                    strings.Repeat("x", 1<<16),
		KeyProbeRequestPath:           "/" + strings.Repeat("y ", 1<<15),
		KeyProbeInterval:              strings.Repeat("9", 1<<16),
	}
	_, err := Parse(newService(ann))
	leaves := checkLeaves(t, err, ann)
	if len(leaves) != 5 {
		t.Fatalf("got %d errors, want 5: %v", len(leaves), err)
	}
	if n := len(err.Error()); n > 4096 {
		t.Errorf("error is %d bytes long; bad values must be cut", n)
	}
}

func TestParseNil(t *testing.T) {
	spec, err := Parse(nil)
	if err == nil || spec != nil {
		t.Fatalf("Parse(nil) = %v, %v; want an error", spec, err)
	}
}

func TestParseDoesNotModifyService(t *testing.T) {
	ann := map[string]string{KeyInternal: "true", PortKey(80, PortSuffixNoLBRule): "true"}
	svc := newService(ann)
	before := svc.DeepCopy()
	spec, err := Parse(svc)
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Ports[0].NodePort = 1 // later edits must not leak into the spec
	if !reflect.DeepEqual(before.Annotations, ann) || before.Spec.Ports[1] != svc.Spec.Ports[1] {
		t.Errorf("Parse modified the Service")
	}
	if got := spec.ProbeFor(v1.ServicePort{Port: 443, NodePort: nodePortHTTPS}); got.Port != nodePortHTTPS {
		t.Errorf("ProbeFor port = %d", got.Port)
	}
	if got := spec.resolveProbePort(ProbePortRef{Name: "http"}); got != nodePortHTTP {
		t.Errorf("spec shares the Service's ports slice: resolved %d", got)
	}
}

func TestPortKey(t *testing.T) {
	if got, want := PortKey(8080, PortSuffixProbeProtocol), "service.beta.kubernetes.io/port_8080_health-probe_protocol"; got != want {
		t.Errorf("PortKey = %q, want %q", got, want)
	}
}
