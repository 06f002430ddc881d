package cloudconfig

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const credential = "Zq9-cl0ud-c0nfig-s3cret"

// fileWithout is an azure.json lacking the credential, of a type.
func fileWithout(t *testing.T, typ string) string {
	t.Helper()
	doc := `{"tenantId": "t", "aadClientId": "c", "subscriptionId": "s", "resourceGroup": "rg", "location": "eastus"`
	if typ != "" {
		doc += `, "cloudConfigType": "` + typ + `"`
	}
	return writeFile(t, doc+"}")
}

func secret(data map[string]string) *v1.Secret {
	s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: SecretNamespace, Name: SecretName}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func TestLoad(t *testing.T) {
	ctx := context.Background()
	withCredential := secret(map[string]string{SecretKey: "aadClientSecret: " + credential + "\nlocation: westeurope\n"})

	t.Run("merge (the default) takes the Secret's fields", func(t *testing.T) {
		r, err := Load(ctx, fileWithout(t, ""), fake.NewClientset(withCredential))
		if err != nil {
			t.Fatal(err)
		}
		if r.Config.AADClientSecret.Reveal() != credential || r.Config.Location != "westeurope" || r.Config.TenantID != "t" {
			t.Errorf("config %v", r.Config)
		}
		if r.Source != "azure.json and "+SecretLabel || strings.Join(r.Overrides, ",") != "aadClientSecret,location" || r.Note != "" {
			t.Errorf("result %+v", r)
		}
	})
	t.Run("merge without the Secret or its key: the file alone, said so", func(t *testing.T) {
		for name, cs := range map[string]*fake.Clientset{
			"no Secret":        fake.NewClientset(),
			"no key":           fake.NewClientset(secret(map[string]string{"azure.json": "{}"})),
			"empty key":        fake.NewClientset(secret(map[string]string{SecretKey: " \n"})),
			"no client at all": nil,
		} {
			var client kubernetes.Interface
			if cs != nil {
				client = cs
			}
			_, err := Load(ctx, fileWithout(t, "merge"), client)
			if err == nil || !strings.Contains(err.Error(), "aadClientSecret: required") {
				t.Errorf("%s: %v, want the file's own error (it lacks the credential)", name, err)
			}
		}
		r, err := Load(ctx, writeFile(t, `{"cloudConfigType": "merge", "tenantId": "t", "aadClientId": "c", "aadClientSecret": "x-`+credential+`", "subscriptionId": "s", "resourceGroup": "rg", "location": "eastus"}`), fake.NewClientset())
		if err != nil || r.Source != "azure.json" || !strings.Contains(r.Note, "does not exist: azure.json alone applies") {
			t.Fatalf("%+v %v", r, err)
		}
	})
	t.Run("file: the Secret is never read", func(t *testing.T) {
		cs := fake.NewClientset(withCredential)
		_, err := Load(ctx, fileWithout(t, "file"), cs)
		if err == nil || !strings.Contains(err.Error(), "aadClientSecret: required") {
			t.Fatalf("%v", err)
		}
		if n := len(cs.Actions()); n != 0 {
			t.Fatalf("%d API calls with cloudConfigType file: %v", n, cs.Actions())
		}
	})
	t.Run("secret: the Secret alone, and it must exist", func(t *testing.T) {
		full := secret(map[string]string{SecretKey: `{"tenantId": "t2", "aadClientId": "c", "aadClientSecret": "` + credential + `", "subscriptionId": "s", "resourceGroup": "rg2", "location": "westus"}`})
		r, err := Load(ctx, fileWithout(t, "secret"), fake.NewClientset(full))
		if err != nil || r.Config.ResourceGroup != "rg2" || r.Config.TenantID != "t2" || r.Source != SecretLabel {
			t.Fatalf("%+v %v", r, err)
		}
		for name, cs := range map[string]*fake.Clientset{"no Secret": fake.NewClientset(), "no key": fake.NewClientset(secret(map[string]string{"x": "{}"}))} {
			if _, err := Load(ctx, fileWithout(t, "secret"), cs); err == nil || !strings.Contains(err.Error(), "cloudConfigType secret") {
				t.Errorf("%s: %v", name, err)
			}
		}
		if _, err := Load(ctx, fileWithout(t, "secret"), nil); err == nil || !strings.Contains(err.Error(), "without a Kubernetes client") {
			t.Errorf("no client: %v", err)
		}
	})
	t.Run("a read that fails otherwise fails closed", func(t *testing.T) {
		for name, e := range map[string]error{
			"forbidden":   apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, SecretName, nil),
			"unavailable": apierrors.NewServiceUnavailable("etcd is down"),
		} {
			cs := fake.NewClientset(withCredential)
			cs.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, e })
			_, err := Load(ctx, fileWithout(t, ""), cs)
			if err == nil || !strings.Contains(err.Error(), "Secret kube-system/azure-cloud-provider") {
				t.Errorf("%s: %v", name, err)
			}
			if name == "forbidden" && !strings.Contains(err.Error(), "grant get on it") {
				t.Errorf("forbidden: %v, want the advice", err)
			}
		}
	})
	t.Run("a bad Secret is an error naming it, without the credential", func(t *testing.T) {
		bad := secret(map[string]string{SecretKey: `{"aadClientSecret": "` + credential + `", "loadBalancerSku": "premium"}`})
		_, err := Load(ctx, fileWithout(t, ""), fake.NewClientset(bad))
		if err == nil || !strings.Contains(err.Error(), SecretLabel) || !strings.Contains(err.Error(), "loadBalancerSku") || strings.Contains(err.Error(), credential) {
			t.Fatalf("%v", err)
		}
	})
}

func writeFile(t *testing.T, doc string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "azure.json")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
