package placement

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azlb/azlb/internal/config"
)

type cfg = config.MultipleStandardLoadBalancerConfiguration

func boolPtr(b bool) *bool { return &b }

func matchLabels(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func mustNew(t *testing.T, configs []cfg, def string) *Placer {
	t.Helper()
	p, err := New(configs, def)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

// wantErrContaining fails unless err is non-nil and contains every substring.
func wantErrContaining(t *testing.T, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want error containing %q, got nil", subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
}

func asNoEligible(t *testing.T, err error) *NoEligibleLoadBalancerError {
	t.Helper()
	var ne *NoEligibleLoadBalancerError
	if !errors.As(err, &ne) {
		t.Fatalf("error %v (%T) is not a *NoEligibleLoadBalancerError", err, err)
	}
	return ne
}
