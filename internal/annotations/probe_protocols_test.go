package annotations

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// withPorts replaces the Service's ports.
func withPorts(s *v1.Service, ports ...v1.ServicePort) *v1.Service {
	s.Spec.Ports = ports
	return s
}

func strp(s string) *string { return &s }

// UDP and SCTP ports (issue 27, item 1) and appProtocol (item 4).
func TestProbeForProtocolsAndAppProtocol(t *testing.T) {
	const nodePortDNS = 30053
	udp := v1.ServicePort{Name: "dns", Port: 53, NodePort: nodePortDNS, Protocol: v1.ProtocolUDP}
	sctp := v1.ServicePort{Name: "sig", Port: 53, NodePort: nodePortDNS, Protocol: v1.ProtocolSCTP}
	tcp := v1.ServicePort{Name: "http", Port: 80, NodePort: nodePortHTTP, Protocol: v1.ProtocolTCP}
	app := func(p v1.ServicePort, a string) v1.ServicePort { p.AppProtocol = strp(a); return p }
	k := func(port int32, suffix string) string { return PortKey(port, suffix) }
	tests := []struct {
		name string
		svc  *v1.Service
		port v1.ServicePort
		want ProbeSpec
	}{
		{"cluster UDP: no probe", withPorts(newService(nil), tcp, udp), udp,
			ProbeSpec{Protocol: ProbeTCP, Port: nodePortDNS, IntervalInSeconds: 5, NumberOfProbes: 2, Disabled: true}},
		{"cluster SCTP: no probe", withPorts(newService(nil), sctp), sctp,
			ProbeSpec{Protocol: ProbeTCP, Port: nodePortDNS, IntervalInSeconds: 5, NumberOfProbes: 2, Disabled: true}},
		{"cluster TCP beside UDP keeps its probe", withPorts(newService(nil), tcp, udp), tcp,
			ProbeSpec{Protocol: ProbeTCP, Port: nodePortHTTP, IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"cluster UDP: the service-wide protocol does not bring a probe back",
			withPorts(newService(map[string]string{KeyProbeProtocol: "Http", KeyProbeInterval: "10"}), tcp, udp), udp,
			ProbeSpec{Protocol: ProbeHTTP, Port: nodePortDNS, RequestPath: "/", IntervalInSeconds: 10, NumberOfProbes: 2, Disabled: true}},
		{"cluster UDP: a per-port request path alone does not either",
			withPorts(newService(map[string]string{k(53, PortSuffixProbeRequestPath): "/x"}), udp), udp,
			ProbeSpec{Protocol: ProbeTCP, Port: nodePortDNS, IntervalInSeconds: 5, NumberOfProbes: 2, Disabled: true}},
		{"cluster UDP: appProtocol does not either", withPorts(newService(nil), app(udp, "https")), app(udp, "https"),
			ProbeSpec{Protocol: ProbeHTTPS, Port: nodePortDNS, RequestPath: "/", IntervalInSeconds: 5, NumberOfProbes: 2, Disabled: true}},
		{"cluster UDP: per-port protocol asks for a probe",
			withPorts(newService(map[string]string{k(53, PortSuffixProbeProtocol): "http", k(53, PortSuffixProbeRequestPath): "/dns"}), udp), udp,
			ProbeSpec{Protocol: ProbeHTTP, Port: nodePortDNS, RequestPath: "/dns", IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"cluster UDP: per-port probe port asks for a probe (protocol from the service-wide key)",
			withPorts(newService(map[string]string{k(53, PortSuffixProbePort): "http", KeyProbeProtocol: "Https"}), tcp, udp), udp,
			ProbeSpec{Protocol: ProbeHTTPS, Port: nodePortHTTP, RequestPath: "/", IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"cluster SCTP: per-port probe port asks for a probe",
			withPorts(newService(map[string]string{k(53, PortSuffixProbePort): "8053"}), sctp), sctp,
			ProbeSpec{Protocol: ProbeTCP, Port: 8053, IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"cluster UDP: no_probe_rule with an explicit protocol stays off",
			withPorts(newService(map[string]string{k(53, PortSuffixProbeProtocol): "Tcp", k(53, PortSuffixNoProbeRule): "true"}), udp), udp,
			ProbeSpec{Protocol: ProbeTCP, Port: nodePortDNS, IntervalInSeconds: 5, NumberOfProbes: 2, Disabled: true}},
		{"local UDP keeps the health-check probe", withPorts(localService(nil), udp), udp,
			ProbeSpec{Protocol: ProbeHTTP, Port: healthCheckNP, RequestPath: "/healthz", IntervalInSeconds: 5, NumberOfProbes: 2, HealthCheck: true}},
		{"local SCTP keeps the health-check probe", withPorts(localService(nil), sctp), sctp,
			ProbeSpec{Protocol: ProbeHTTP, Port: healthCheckNP, RequestPath: "/healthz", IntervalInSeconds: 5, NumberOfProbes: 2, HealthCheck: true}},

		{"appProtocol http: Http at /", withPorts(newService(nil), app(tcp, "http")), app(tcp, "http"),
			ProbeSpec{Protocol: ProbeHTTP, Port: nodePortHTTP, RequestPath: "/", IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"appProtocol HTTPS (any case): Https at /", withPorts(newService(nil), app(tcp, "HTTPS")), app(tcp, "HTTPS"),
			ProbeSpec{Protocol: ProbeHTTPS, Port: nodePortHTTP, RequestPath: "/", IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"appProtocol http with the service-wide path", withPorts(newService(map[string]string{KeyProbeRequestPath: "/ready"}), app(tcp, "http")), app(tcp, "http"),
			ProbeSpec{Protocol: ProbeHTTP, Port: nodePortHTTP, RequestPath: "/ready", IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"appProtocol http with the per-port path", withPorts(newService(map[string]string{KeyProbeRequestPath: "/a", k(80, PortSuffixProbeRequestPath): "/b"}), app(tcp, "http")), app(tcp, "http"),
			ProbeSpec{Protocol: ProbeHTTP, Port: nodePortHTTP, RequestPath: "/b", IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"appProtocol http: per-port protocol wins", withPorts(newService(map[string]string{k(80, PortSuffixProbeProtocol): "Tcp"}), app(tcp, "http")), app(tcp, "http"),
			ProbeSpec{Protocol: ProbeTCP, Port: nodePortHTTP, IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"appProtocol https: service-wide protocol wins", withPorts(newService(map[string]string{KeyProbeProtocol: "Http"}), app(tcp, "https")), app(tcp, "https"),
			ProbeSpec{Protocol: ProbeHTTP, Port: nodePortHTTP, RequestPath: "/", IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"appProtocol kubernetes.io/h2c: Tcp", withPorts(newService(nil), app(tcp, "kubernetes.io/h2c")), app(tcp, "kubernetes.io/h2c"),
			ProbeSpec{Protocol: ProbeTCP, Port: nodePortHTTP, IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"appProtocol grpc: Tcp", withPorts(newService(nil), app(tcp, "grpc")), app(tcp, "grpc"),
			ProbeSpec{Protocol: ProbeTCP, Port: nodePortHTTP, IntervalInSeconds: 5, NumberOfProbes: 2}},
		{"appProtocol on a Local Service: the health-check probe stays", withPorts(localService(nil), app(tcp, "https")), app(tcp, "https"),
			ProbeSpec{Protocol: ProbeHTTP, Port: healthCheckNP, RequestPath: "/healthz", IntervalInSeconds: 5, NumberOfProbes: 2, HealthCheck: true}},
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
