package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azlb/azlb/internal/config"
)

// certPassword is the password of the test PKCS#12 file
// (internal/config/testdata/clientcert/README.md).
const certPassword = "p12-Pa55word"

// serviceEvent reports whether the Service has an event of reason whose
// message holds text.
func serviceEvent(ns, name, reason, text string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		evs, err := suite.cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason && strings.Contains(e.Message, text) {
				return true, nil
			}
		}
		return false, nil
	}
}

// TestClientCertificateCredential runs the controller with certificate
// authentication (azure.json aadClientCertPath and aadClientCertPassword, a
// PKCS#12 file, no aadClientSecret). While the emulator's AAD knows no
// certificate of the client, the Service gets a Warning naming AAD's
// AADSTS700027 and nothing is written to ARM; with the certificate
// registered, the Service gets its load balancer. The password is in
// neither controller's log.
func TestClientCertificateCredential(t *testing.T) {
	ctx := context.Background()
	p12, err := filepath.Abs(filepath.Join(suite.root, "internal", "config", "testdata", "clientcert", "rsa-legacy.p12"))
	if err != nil {
		t.Fatal(err)
	}
	certs, _, err := config.LoadClientCertificate(p12, certPassword)
	if err != nil {
		t.Fatal(err)
	}
	emu := suite.env.Emulator()
	t.Cleanup(func() { emu.SetClientCertificates() })
	cfgPath := writeConfig(t, map[string]any{"aadClientSecret": nil, "aadClientCertPath": p12, "aadClientCertPassword": certPassword})
	createNode(t, "cert-n1", "10.240.12.1", nil)
	ns := createNamespace(t)

	// Not registered: AAD refuses the assertion, ARM sees no request.
	emu.SetClientCertificates()
	before := armWrites()
	a := startController(t, "a", cfgPath, false)
	if _, err := suite.cs.CoreV1().Services(ns).Create(ctx, loadBalancerService(ns, "web", 80), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteService(t, ns, "web") })
	eventually(t, 60*time.Second, "a SyncLoadBalancerFailed event naming AADSTS700027", serviceEvent(ns, "web", "SyncLoadBalancerFailed", "AADSTS700027"))
	if n := armWrites() - before; n != 0 {
		t.Fatalf("%d ARM writes without a token", n)
	}
	logA := a.logText(t)
	a.stop()

	// Registered: the Service is served.
	emu.SetClientCertificates(certs...)
	b := startController(t, "b", cfgPath, false)
	ingressIP(t, ns, "web")
	for name, log := range map[string]string{"a": logA, "b": b.logText(t)} {
		if strings.Contains(log, certPassword) {
			t.Errorf("controller %s logged the certificate's password", name)
		}
	}
	deleteServiceAndWait(t, ns, "web")
}
