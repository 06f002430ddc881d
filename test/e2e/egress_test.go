package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/servicegateway"
	"github.com/azlb/azlb/internal/testutil"
	"github.com/azlb/azlb/internal/verify"
)

// egressPod creates a pod labelled with an egress identity on a node and
// gives it its IP, as the scheduler and the kubelet would.
func egressPod(t *testing.T, ns, name, identity, node, ip string) {
	t.Helper()
	ctx := context.Background()
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{servicegateway.EgressLabel: identity}},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: "e2e.invalid/egress"}}},
	}
	p, err := suite.cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = v1.PodRunning
	p.Status.PodIP = ip
	p.Status.PodIPs = []v1.PodIP{{IP: ip}}
	if _, err := suite.cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func deletePod(t *testing.T, ns, name string) {
	t.Helper()
	if err := suite.cs.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
}

func podGone(ctx context.Context, ns, name string) bool {
	_, err := suite.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	return err != nil
}

func egressLeft(ctx context.Context, t *testing.T, id string) []string {
	var left []string
	if _, err := arm(t).NatGateway.Get(ctx, devenv.ResourceGroup, id); err == nil {
		left = append(left, "NAT gateway")
	}
	if _, err := arm(t).PublicIP.Get(ctx, devenv.ResourceGroup, id+"-pip"); err == nil {
		left = append(left, "public IP")
	}
	svcs, err := arm(t).ServiceGateway.GetServices(ctx, devenv.ResourceGroup, names.ServiceGateway)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs {
		if *s.Name == id {
			left = append(left, "outbound service")
		}
	}
	return left
}

// Egress with the real controller binary and API server: labelled pods
// create their identity's public IP, NAT gateway (attached to the gateway)
// and outbound service and are registered under it with a pod finalizer;
// when the last pod goes, the identity is torn down, with the controller
// killed (SIGKILL) at each teardown step and restarted, and the pods are
// released only at the end. default-natgw is never touched.
func TestEgressThroughTheServiceGateway(t *testing.T) {
	ctx := context.Background()
	cfg := podIPConfig(t)
	createNode(t, "egr-n1", "10.240.4.1", nil)
	createNode(t, "egr-n2", "10.240.4.2", nil)
	ns := createNamespace(t)
	const id = "team-e2e"
	first := startController(t, "first", cfg, false)
	egressPod(t, ns, "p1", id, "egr-n1", "10.244.4.10")
	egressPod(t, ns, "p2", id, "egr-n2", "10.244.4.20")
	want := []string{"10.240.4.1 10.244.4.10 " + id, "10.240.4.2 10.244.4.20 " + id}
	eventually(t, 60*time.Second, "egress pods registered", func(context.Context) (bool, error) {
		return slices.Equal(gatewayAddresses(t), want), nil
	})
	nat, err := arm(t).NatGateway.Get(ctx, devenv.ResourceGroup, id)
	if err != nil || nat.Properties.ServiceGateway == nil || string(*nat.SKU.Name) != "StandardV2" {
		t.Fatalf("NAT gateway %+v %v", nat, err)
	}
	p1, _ := suite.cs.CoreV1().Pods(ns).Get(ctx, "p1", metav1.GetOptions{})
	if !slices.Contains(p1.Finalizers, servicegateway.PodFinalizer) {
		t.Fatalf("p1 finalizers %v", p1.Finalizers)
	}
	// azlb verify finds nothing wrong with the identity.
	vcfg, err := config.LoadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	egressFindings := func(ctx context.Context) ([]string, error) {
		rep, err := verify.Run(ctx, vcfg, arm(t), suite.cs)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, f := range rep.Findings {
			if strings.Contains(f.Doc, "#egress") {
				out = append(out, f.String())
			}
		}
		return out, nil
	}
	if f, err := egressFindings(ctx); err != nil || len(f) != 0 {
		t.Fatalf("azlb verify: %v %v", f, err)
	}
	first.stop()

	emu := suite.env.Emulator()
	steps := []struct{ name, method, path string }{
		{"remove the addresses", http.MethodPost, "/updateAddressLocations$"},
		{"detach the NAT gateway", http.MethodPut, "/natGateways/" + id + "$"},
		{"unregister the outbound service", http.MethodPost, "/updateServices$"},
		{"delete the NAT gateway", http.MethodDelete, "/natGateways/" + id + "$"},
		{"delete the public IP", http.MethodDelete, "/publicIPAddresses/" + id + "-pip$"},
	}
	deletePod(t, ns, "p1")
	deletePod(t, ns, "p2")
	for i, st := range steps {
		fid, err := emu.AddFault(emulator.Fault{Method: st.method, PathRegex: st.path, Status: http.StatusBadRequest, Code: "InjectedCrashPoint"})
		if err != nil {
			t.Fatal(err)
		}
		c := startController(t, fmt.Sprintf("kill-%d", i), cfg, false)
		eventually(t, 60*time.Second, "the controller reaching step "+st.name, func(context.Context) (bool, error) {
			for _, f := range emu.Faults() {
				if f.ID == fid {
					return f.Fired > 0, nil
				}
			}
			return false, nil
		})
		c.kill()
		emu.RemoveFault(fid)
		if podGone(ctx, ns, "p1") || podGone(ctx, ns, "p2") {
			t.Fatalf("a pod was released before its identity was torn down (killed at %q)", st.name)
		}
	}
	startController(t, "final", cfg, false)
	eventually(t, 60*time.Second, "identity torn down and pods released", func(ctx context.Context) (bool, error) {
		return podGone(ctx, ns, "p1") && podGone(ctx, ns, "p2") && len(egressLeft(ctx, t, id)) == 0 && len(gatewayAddresses(t)) == 0, nil
	})
	svcs, err := arm(t).ServiceGateway.GetServices(ctx, devenv.ResourceGroup, names.ServiceGateway)
	if err != nil || len(svcs) != 1 || *svcs[0].Name != names.DefaultOutboundService {
		t.Errorf("gateway services: %v %v (default-natgw must stay)", svcs, err)
	}
	if f, err := egressFindings(ctx); err != nil || len(f) != 0 {
		t.Errorf("azlb verify after the teardown: %v %v", f, err)
	}
}

// Traffic: with the emulator's data plane, a labelled pod's outbound flow
// leaves from its identity's public IP, which a loopback server sees as
// the source; once the last pod is gone the pod has no route any more.
func TestEgressTrafficLeavesFromTheIdentityIP(t *testing.T) {
	ctx := context.Background()
	public := testutil.LoopbackNet(t)
	env, err := devenv.Start(ctx, t.TempDir(), emulator.Options{DataPlane: true, PublicIPv4CIDR: public.String()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	notThrottled(t, env)
	if err := env.SeedServiceGateway(ctx); err != nil {
		t.Fatal(err)
	}
	clients, err := env.Clients(ctx, azure.ClientOptions{Source: "e2e-egress"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(clients.Close)
	createNode(t, "egt-n1", "10.240.5.1", nil)
	ns := createNamespace(t)
	const id = "team-traffic"
	startController(t, "traffic", writeConfigFor(t, env, map[string]any{
		"serviceGatewayEnabled": true, "loadBalancerBackendPoolConfigurationType": "podIP", "loadBalancerSku": "service",
	}), false)
	egressPod(t, ns, "p1", id, "egt-n1", "10.244.5.10")
	pod := netip.MustParseAddr("10.244.5.10")
	eventually(t, 60*time.Second, "the pod's outbound route", func(context.Context) (bool, error) {
		_, svc, ok := env.Emulator().EgressSource(pod)
		return ok && svc == id, nil
	})
	pip, err := clients.PublicIP.Get(ctx, devenv.ResourceGroup, id+"-pip")
	if err != nil {
		t.Fatal(err)
	}
	// A loopback server that answers with the source address it sees.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, c.RemoteAddr().(*net.TCPAddr).IP.String())
			_ = c.Close()
		}
	}()
	c, err := env.Emulator().DialEgress(ctx, pod, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	seen, _ := io.ReadAll(c)
	_ = c.Close()
	if string(seen) != *pip.Properties.IPAddress {
		t.Fatalf("the server saw %q, want the identity's public IP %s", seen, *pip.Properties.IPAddress)
	}
	deletePod(t, ns, "p1")
	eventually(t, 60*time.Second, "the pod released and its route gone", func(ctx context.Context) (bool, error) {
		_, _, routed := env.Emulator().EgressSource(pod)
		return podGone(ctx, ns, "p1") && !routed, nil
	})
}
