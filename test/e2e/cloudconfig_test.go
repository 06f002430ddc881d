package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azlb/azlb/internal/cloudconfig"
	"github.com/azlb/azlb/internal/emulator"
)

// putCloudConfigSecret writes (or with an empty document deletes) the
// Secret kube-system/azure-cloud-provider, key cloud-config.
func putCloudConfigSecret(t *testing.T, document string) {
	t.Helper()
	ctx := context.Background()
	secrets := suite.cs.CoreV1().Secrets(cloudconfig.SecretNamespace)
	err := secrets.Delete(ctx, cloudconfig.SecretName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if document == "" {
		return
	}
	s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cloudconfig.SecretNamespace, Name: cloudconfig.SecretName},
		Data: map[string][]byte{cloudconfig.SecretKey: []byte(document)}}
	if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestCloudConfigFromSecret runs the controller, as the chart's identity,
// with azure.json whose settings the Secret kube-system/azure-cloud-provider
// completes or replaces (cloudConfigType):
//
//   - merge (the default): azure.json without the client secret, the Secret
//     holding it and the cluster's name. The controller serves the Service
//     on the load balancer the Secret names, and logs what it took from the
//     Secret (field names, no value).
//   - secret, the Secret missing: the controller refuses to start, naming
//     the Secret; nothing is written to Azure.
//
// The chart's RBAC lets the manager get exactly that Secret
// (startController fails the test on any RBAC refusal in the log).
func TestCloudConfigFromSecret(t *testing.T) {
	ctx := context.Background()
	const cluster = "e2e-from-secret"
	t.Cleanup(func() { putCloudConfigSecret(t, "") })
	createNode(t, "ccs-n1", "10.240.13.1", nil)
	ns := createNamespace(t)

	putCloudConfigSecret(t, "aadClientSecret: "+emulator.DefaultClientSecret+"\nclusterName: "+cluster+"\n")
	a := startController(t, "a", writeConfig(t, map[string]any{"aadClientSecret": nil}), false)
	if _, err := suite.cs.CoreV1().Services(ns).Create(ctx, loadBalancerService(ns, "web", 80), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ingressIP(t, ns, "web")
	if getLB(t, cluster) == nil {
		t.Fatalf("no load balancer %s (the Secret's clusterName)", cluster)
	}
	log := a.logText(t)
	if !strings.Contains(log, `"Cloud configuration loaded" source="azure.json and Secret kube-system/azure-cloud-provider (key cloud-config)" cloudConfigType="merge" secretOverrides=["aadClientSecret","clusterName"]`) {
		t.Errorf("no log line saying what the Secret set:\n%s", tail([]byte(log), 4096))
	}
	if strings.Contains(log, emulator.DefaultClientSecret) {
		t.Error("the controller logged the client secret")
	}
	deleteServiceAndWait(t, ns, "web")
	a.stop()

	// cloudConfigType secret without the Secret: the controller refuses to
	// start.
	putCloudConfigSecret(t, "")
	before := armWrites()
	b := startController(t, "b", writeConfig(t, map[string]any{"cloudConfigType": "secret"}), false)
	select {
	case <-b.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("the controller runs with cloudConfigType secret and no Secret")
	}
	if log := b.logText(t); !strings.Contains(log, "Secret kube-system/azure-cloud-provider does not exist (cloudConfigType secret") {
		t.Errorf("the refusal does not name the Secret:\n%s", tail([]byte(log), 2048))
	}
	if n := armWrites() - before; n != 0 {
		t.Errorf("%d ARM writes by a controller that refused to start", n)
	}
}
