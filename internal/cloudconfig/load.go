package cloudconfig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/azlb/azlb/internal/config"
)

// The Secret the Azure cloud provider reads its configuration from.
const (
	SecretNamespace = "kube-system"
	SecretName      = "azure-cloud-provider"
	SecretKey       = "cloud-config"
)

// SecretLabel names the Secret and its key in errors and warnings.
var SecretLabel = fmt.Sprintf("Secret %s/%s (key %s)", SecretNamespace, SecretName, SecretKey)

// ReadTimeout bounds the read of the Secret.
const ReadTimeout = 30 * time.Second

// Result is a loaded configuration and what the Secret contributed, for a
// log line.
type Result struct {
	Config *config.Config
	// Source says where the configuration came from: "azure.json",
	// "azure.json and <SecretLabel>" or "<SecretLabel>".
	Source string
	// Overrides are the fields the Secret set (names only), in merge and
	// secret modes.
	Overrides []string
	// Note explains a merge without the Secret (it or its key is missing).
	Note string
}

// Load reads azure.json at path and, per its cloudConfigType, the Secret
// through client (nil: no Kubernetes client; merge then uses the file alone
// with a Note, secret is an error).
func Load(ctx context.Context, path string, client kubernetes.Interface) (*Result, error) {
	file, err := readFile(path)
	if err != nil {
		return nil, err
	}
	mode, err := config.CloudConfigTypeOf(file)
	if err != nil {
		return nil, fmt.Errorf("load configuration %s: %w", path, err)
	}
	if mode == config.CloudConfigTypeFile {
		c, err := config.LoadOverridden(file, nil, SecretLabel)
		if err != nil {
			return nil, fmt.Errorf("load configuration %s: %w", path, err)
		}
		return &Result{Config: c, Source: "azure.json"}, nil
	}
	secret, note, err := readSecret(ctx, client, mode)
	if err != nil {
		return nil, fmt.Errorf("load configuration %s: cloudConfigType %s: %w", path, mode, err)
	}
	c, err := config.LoadOverridden(file, secret, SecretLabel)
	if err != nil {
		return nil, fmt.Errorf("load configuration %s: %w", path, err)
	}
	r := &Result{Config: c, Note: note, Source: "azure.json"}
	if secret != nil {
		r.Overrides, _ = config.SecretKeys(secret) // it loaded, so it parses
		r.Source = "azure.json and " + SecretLabel
		if mode == config.CloudConfigTypeSecret {
			r.Source = SecretLabel
		}
	}
	return r, nil
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load configuration: %w", err)
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, config.MaxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("load configuration %s: %w", path, err)
	}
	if len(b) > config.MaxConfigSize {
		return nil, fmt.Errorf("load configuration %s: larger than %d bytes", path, config.MaxConfigSize)
	}
	return b, nil
}

// readSecret returns the Secret's document, or nil with a note in merge
// mode when it (or its key) does not exist.
func readSecret(ctx context.Context, client kubernetes.Interface, mode string) ([]byte, string, error) {
	if client == nil {
		if mode == config.CloudConfigTypeSecret {
			return nil, "", fmt.Errorf("%s cannot be read without a Kubernetes client (--kubeconfig)", SecretLabel)
		}
		return nil, "no Kubernetes client: " + SecretLabel + " not read, azure.json alone applies", nil
	}
	ctx, cancel := context.WithTimeout(ctx, ReadTimeout)
	defer cancel()
	s, err := client.CoreV1().Secrets(SecretNamespace).Get(ctx, SecretName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if mode == config.CloudConfigTypeSecret {
			return nil, "", fmt.Errorf("no Secret %s/%s (cloudConfigType secret takes the whole configuration from it; "+
				"create it, or set cloudConfigType to merge or file in azure.json)", SecretNamespace, SecretName)
		}
		return nil, fmt.Sprintf("Secret %s/%s does not exist: azure.json alone applies", SecretNamespace, SecretName), nil
	case apierrors.IsForbidden(err):
		return nil, "", fmt.Errorf("reading Secret %s/%s is forbidden (%s): grant get on it to the controller's identity "+
			"(the chart does), or set cloudConfigType: file in azure.json to read the file alone", SecretNamespace, SecretName, reason(err))
	case err != nil:
		return nil, "", fmt.Errorf("reading Secret %s/%s: %w", SecretNamespace, SecretName, err)
	}
	data, ok := s.Data[SecretKey]
	if !ok || len(strings.TrimSpace(string(data))) == 0 {
		if mode == config.CloudConfigTypeSecret {
			return nil, "", fmt.Errorf("no (or an empty) key %s in Secret %s/%s", SecretKey, SecretNamespace, SecretName)
		}
		return nil, fmt.Sprintf("Secret %s/%s has no (or an empty) key %s: azure.json alone applies", SecretNamespace, SecretName, SecretKey), nil
	}
	return data, "", nil
}

func reason(err error) string {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return se.Status().Message
	}
	return err.Error()
}
