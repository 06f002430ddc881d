package devenv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// ApplyFile creates the objects of a multi-document YAML manifest (the
// kinds deploy/ uses: ServiceAccount, ClusterRole, ClusterRoleBinding,
// Role, RoleBinding, Namespace). Objects that exist already are left alone.
func ApplyFile(ctx context.Context, cs kubernetes.Interface, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	objs, err := DecodeManifest(path, b)
	if err != nil {
		return err
	}
	return Apply(ctx, cs, path, objs)
}

// Apply creates objs (of the kinds ApplyFile names) once kube-system
// exists; source names them in errors.
func Apply(ctx context.Context, cs kubernetes.Interface, source string, objs []runtime.Object) error {
	// kube-system is created by the API server shortly after it is ready.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("namespace kube-system never appeared: %w", err)
	}
	for i, obj := range objs {
		if err := create(ctx, cs, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s: object %d: %w", source, i, err)
		}
	}
	return nil
}

// DecodeManifest decodes every document of a multi-document YAML manifest
// into the typed objects of client-go's scheme (kinds it does not know into
// unstructured objects); source names the manifest in errors.
func DecodeManifest(source string, data []byte) ([]runtime.Object, error) {
	dec := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []runtime.Object
	for i := 0; ; i++ {
		doc, err := dec.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, i, err)
		}
		if isEmptyDocument(doc) {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if runtime.IsNotRegisteredError(err) {
			// A kind client-go does not know (a ServiceMonitor).
			u := &unstructured.Unstructured{}
			obj, err = u, yaml.Unmarshal(doc, &u.Object)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, i, err)
		}
		objs = append(objs, obj)
	}
}

// isEmptyDocument is true for a document of comments and blank lines only.
func isEmptyDocument(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' && !bytes.Equal(line, []byte("---")) {
			return false
		}
	}
	return true
}

func create(ctx context.Context, cs kubernetes.Interface, obj any) error {
	var err error
	switch o := obj.(type) {
	case *corev1.Namespace:
		_, err = cs.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
	case *corev1.ServiceAccount:
		_, err = cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.ClusterRole:
		_, err = cs.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.ClusterRoleBinding:
		_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.Role:
		_, err = cs.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.RoleBinding:
		_, err = cs.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	default:
		return fmt.Errorf("kind %T is not supported by ApplyFile", obj)
	}
	return err
}
