package annotations

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestProbeFor(t *testing.T) {
	p80 := v1.ServicePort{Name: "http", Port: 80, NodePort: nodePortHTTP}
	p443 := v1.ServicePort{Name: "https", Port: 443, NodePort: nodePortHTTPS}
	tests := []struct {
		name string
		svc  *v1.Service
		port v1.ServicePort
		want ProbeSpec
	}{
		{"cluster default: Tcp on the NodePort", newService(nil), p80,
			ProbeSpec{Protocol: ProbeTCP, Port: nodePortHTTP, IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"local default: Http on healthCheckNodePort /healthz", localService(nil), p443,
			ProbeSpec{Protocol: ProbeHTTP, Port: healthCheckNP, RequestPath: "/healthz", IntervalInSeconds: 5, NumberOfProbes: 2, HealthCheck: true}},
		{"service-wide Http with path", newService(map[string]string{KeyProbeProtocol: "http", KeyProbeRequestPath: "/ready"}), p80,
			ProbeSpec{Protocol: ProbeHTTP, Port: nodePortHTTP, RequestPath: "/ready", IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"service-wide Https defaults the path to /", newService(map[string]string{KeyProbeProtocol: "Https"}), p443,
			ProbeSpec{Protocol: ProbeHTTPS, Port: nodePortHTTPS, RequestPath: "/", IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"request path ignored for Tcp", newService(map[string]string{KeyProbeRequestPath: "/ready"}), p80,
			ProbeSpec{Protocol: ProbeTCP, Port: nodePortHTTP, IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"per-port protocol beats service-wide", newService(map[string]string{KeyProbeProtocol: "Http", PortKey(443, PortSuffixProbeProtocol): "Tcp"}), p443,
			ProbeSpec{Protocol: ProbeTCP, Port: nodePortHTTPS, IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"other port keeps service-wide", newService(map[string]string{KeyProbeProtocol: "Http", PortKey(443, PortSuffixProbeProtocol): "Tcp"}), p80,
			ProbeSpec{Protocol: ProbeHTTP, Port: nodePortHTTP, RequestPath: "/", IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"per-port path beats service-wide", newService(map[string]string{KeyProbeProtocol: "Http", KeyProbeRequestPath: "/a", PortKey(80, PortSuffixProbeRequestPath): "/b"}), p80,
			ProbeSpec{Protocol: ProbeHTTP, Port: nodePortHTTP, RequestPath: "/b", IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"probe port by Service port name resolves to its NodePort", newService(map[string]string{PortKey(80, PortSuffixProbePort): "https"}), p80,
			ProbeSpec{Protocol: ProbeTCP, Port: nodePortHTTPS, IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"probe port by Service port number resolves to its NodePort", newService(map[string]string{PortKey(80, PortSuffixProbePort): "443"}), p80,
			ProbeSpec{Protocol: ProbeTCP, Port: nodePortHTTPS, IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"probe port other number is literal", newService(map[string]string{PortKey(80, PortSuffixProbePort): "10256"}), p80,
			ProbeSpec{Protocol: ProbeTCP, Port: 10256, IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"local with probe port override: path defaults to /", localService(map[string]string{PortKey(80, PortSuffixProbePort): "8080"}), p80,
			ProbeSpec{Protocol: ProbeHTTP, Port: 8080, RequestPath: "/", IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"local with service-wide path", localService(map[string]string{KeyProbeRequestPath: "/live"}), p80,
			ProbeSpec{Protocol: ProbeHTTP, Port: healthCheckNP, RequestPath: "/live", IntervalInSeconds: 5, NumberOfProbes: 2, HealthCheck: true}},
		{"local with Tcp override keeps healthCheckNodePort", localService(map[string]string{KeyProbeProtocol: "Tcp"}), p80,
			ProbeSpec{Protocol: ProbeTCP, Port: healthCheckNP, IntervalInSeconds: 5, NumberOfProbes: 2, HealthCheck: true}},
		{"local: the health-check probe takes the service-wide settings, not the port's (issue 40 item 2)", localService(map[string]string{
			KeyProbeInterval: "15", KeyProbeNumOfProbe: "5", KeyProbeRequestPath: "/", PortKey(80, PortSuffixProbeInterval): "10",
			PortKey(80, PortSuffixProbeNumOfProbe): "3", PortKey(80, PortSuffixProbeProtocol): "Tcp", PortKey(80, PortSuffixProbeRequestPath): "/x"}), p80,
			ProbeSpec{Protocol: ProbeHTTP, Port: healthCheckNP, RequestPath: "/", IntervalInSeconds: 15, NumberOfProbes: 5, HealthCheck: true}},
		{"local with a probe port of its own keeps the port's settings", localService(map[string]string{
			KeyProbeInterval: "15", PortKey(80, PortSuffixProbePort): "8080", PortKey(80, PortSuffixProbeInterval): "10"}), p80,
			ProbeSpec{Protocol: ProbeHTTP, Port: 8080, RequestPath: "/", IntervalInSeconds: 10, NumberOfProbes: 2}},
		{"interval and num: per-port over service-wide over default", newService(map[string]string{
			KeyProbeInterval: "10", KeyProbeNumOfProbe: "3", PortKey(80, PortSuffixProbeInterval): "20"}), p80,
			ProbeSpec{Protocol: ProbeTCP, Port: nodePortHTTP, IntervalInSeconds: 20, NumberOfProbes: 3}},
		{"service-wide interval and num", newService(map[string]string{KeyProbeInterval: "10", KeyProbeNumOfProbe: "3"}), p443,
			ProbeSpec{Protocol: ProbeTCP, Port: nodePortHTTPS, IntervalInSeconds: 10, NumberOfProbes: 3}},
		{"no_probe_rule disables", newService(map[string]string{PortKey(80, PortSuffixNoProbeRule): "true"}), p80,
			ProbeSpec{Protocol: ProbeTCP, Port: nodePortHTTP, IntervalInSeconds: 5, NumberOfProbes: 2, Disabled: true}},
		{"no_lb_rule disables", newService(map[string]string{PortKey(443, PortSuffixNoLBRule): "true"}), p443,
			ProbeSpec{Protocol: ProbeTCP, Port: nodePortHTTPS, IntervalInSeconds: 5, NumberOfProbes: 2, Disabled: true}},
		{"no_probe_rule false keeps the probe", newService(map[string]string{PortKey(80, PortSuffixNoProbeRule): "false"}), p80,
			ProbeSpec{Protocol: ProbeTCP, Port: nodePortHTTP, IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"port without NodePort yet", newService(nil), v1.ServicePort{Port: 80},
			ProbeSpec{Protocol: ProbeTCP, Port: 0, IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"port the Service does not list gets defaults", newService(map[string]string{KeyProbeProtocol: "Https"}), v1.ServicePort{Port: 9000, NodePort: 31000},
			ProbeSpec{Protocol: ProbeHTTPS, Port: 31000, RequestPath: "/", IntervalInSeconds: 5, NumberOfProbes: 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := Parse(tc.svc)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := spec.ProbeFor(tc.port); got != tc.want {
				t.Errorf("ProbeFor = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The per-port probe settings a Local Service's health-check probe does not
// apply are listed, for the Warning event (issue 40 item 2).
func TestIgnoredLocalProbeKeys(t *testing.T) {
	ann := map[string]string{KeyProbeInterval: "15", PortKey(80, PortSuffixProbeInterval): "10", PortKey(80, PortSuffixProbeNumOfProbe): "3",
		PortKey(443, PortSuffixProbePort): "8080", PortKey(443, PortSuffixProbeInterval): "10"}
	spec, err := Parse(localService(ann))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{PortKey(80, PortSuffixProbeInterval), PortKey(80, PortSuffixProbeNumOfProbe)}
	if got := spec.IgnoredLocalProbeKeys(); !slices.Equal(got, want) {
		t.Errorf("IgnoredLocalProbeKeys = %q, want %q", got, want)
	}
	cluster, err := Parse(newService(ann))
	if err != nil {
		t.Fatal(err)
	}
	if got := cluster.IgnoredLocalProbeKeys(); got != nil {
		t.Errorf("a Cluster Service: %q, want none", got)
	}
}
