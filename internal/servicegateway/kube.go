package servicegateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// Finalizers on a Service with a pod-based load balancer.
const (
	// Finalizer keeps the Service until azlb has removed its Azure
	// resources.
	Finalizer = "servicegateway.azure.com/service-cleanup"
	// LoadBalancerCleanupFinalizer is the service controller's; azlb adds it
	// when missing so that the controller calls EnsureLoadBalancerDeleted.
	LoadBalancerCleanupFinalizer = "service.kubernetes.io/load-balancer-cleanup"
)

// finalizerBackoff retries finalizer updates that met a conflict: 5 tries,
// 100 ms doubling, at most 5 s.
var finalizerBackoff = wait.Backoff{Steps: 5, Duration: 100 * time.Millisecond, Factor: 2, Cap: 5 * time.Second}

// freshService finds the Service: in the informer's cache, or, when the
// cache does not have it (yet) under this UID, from the API server. nil: it
// is gone, or the name now belongs to another Service (another UID). Any
// other error is returned (a transient lookup failure is not "gone").
func (e *Controller) freshService(ctx context.Context, ns, name, uid string) (*v1.Service, error) {
	if svc, err := e.services.Services(ns).Get(name); err == nil && uidKey(svc.UID) == uid {
		return svc, nil
	}
	svc, err := e.client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read Service %s/%s: %w", ns, name, err)
	}
	if uidKey(svc.UID) != uid {
		return nil, nil
	}
	return svc, nil
}

// ensureFinalizers adds the finalizers before the first Azure write: a
// fresh GET, the UID checked, an Update carrying the resourceVersion.
func (e *Controller) ensureFinalizers(ctx context.Context, svc *v1.Service) error {
	if slices.Contains(svc.Finalizers, Finalizer) && slices.Contains(svc.Finalizers, LoadBalancerCleanupFinalizer) {
		return nil
	}
	uid := svc.UID
	first := true
	return retry.RetryOnConflict(finalizerBackoff, func() error {
		cur := svc
		if !first {
			var err error
			if cur, err = e.client.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{}); err != nil {
				return err
			}
			if cur.UID != uid {
				return fmt.Errorf("service %s/%s was replaced (UID %s, was %s)", svc.Namespace, svc.Name, cur.UID, uid)
			}
		}
		first = false
		cp := cur.DeepCopy()
		for _, f := range []string{Finalizer, LoadBalancerCleanupFinalizer} {
			if !slices.Contains(cp.Finalizers, f) {
				cp.Finalizers = append(cp.Finalizers, f)
			}
		}
		if len(cp.Finalizers) == len(cur.Finalizers) {
			return nil
		}
		_, err := e.client.CoreV1().Services(cp.Namespace).Update(ctx, cp, metav1.UpdateOptions{})
		return err
	})
}

// removeFinalizers removes both finalizers once the Azure resources are
// gone, from the Service with this UID only (a same-name replacement is
// left alone). A Service that no longer exists needs nothing.
func (e *Controller) removeFinalizers(ctx context.Context, ns, name, uid string) error {
	return retry.RetryOnConflict(finalizerBackoff, func() error {
		cur, err := e.client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if uidKey(cur.UID) != uid {
			return nil
		}
		keep := slices.DeleteFunc(slices.Clone(cur.Finalizers), func(f string) bool {
			return f == Finalizer || f == LoadBalancerCleanupFinalizer
		})
		if len(keep) == len(cur.Finalizers) {
			return nil
		}
		cp := cur.DeepCopy()
		cp.Finalizers = keep
		_, err = e.client.CoreV1().Services(ns).Update(ctx, cp, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// ensureIngress writes the public IP into status.loadBalancer.ingress:
// addresses of the same family are replaced, hostnames and addresses of the
// other family kept. The patch carries the UID as a precondition.
func (e *Controller) ensureIngress(ctx context.Context, svc *v1.Service, ip string, family v1.IPFamily) error {
	want := mergeIngress(svc.Status.LoadBalancer.Ingress, ip, family)
	if slices.EqualFunc(want, svc.Status.LoadBalancer.Ingress, func(a, b v1.LoadBalancerIngress) bool { return a.IP == b.IP && a.Hostname == b.Hostname }) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": svc.UID},
		"status":   map[string]any{"loadBalancer": map[string]any{"ingress": want}},
	})
	if err != nil {
		return err
	}
	_, err = e.client.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

func mergeIngress(cur []v1.LoadBalancerIngress, ip string, family v1.IPFamily) []v1.LoadBalancerIngress {
	out := make([]v1.LoadBalancerIngress, 0, len(cur)+1)
	out = append(out, v1.LoadBalancerIngress{IP: ip})
	for _, in := range cur {
		if in.IP == "" {
			out = append(out, in) // a hostname
			continue
		}
		if a, err := netip.ParseAddr(in.IP); err == nil && a.Is6() != (family == v1.IPv6Protocol) {
			out = append(out, in)
		}
	}
	return out
}
