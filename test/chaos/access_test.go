package chaos

import (
	"context"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// The access settings of a Service (docs/security-groups.md, Who may
// connect), and the floating IP annotation, which decides the destinations
// of its rules.
const (
	annAllowedIPRanges = "service.beta.kubernetes.io/azure-allowed-ip-ranges"
	annLegacyRanges    = v1.AnnotationLoadBalancerSourceRangesKey // service.beta.kubernetes.io/load-balancer-source-ranges
	annServiceTags     = "service.beta.kubernetes.io/azure-allowed-service-tags"
	annDenyAll         = "service.beta.kubernetes.io/azure-deny-all-except-load-balancer-source-ranges"
	annDisableNSGRule  = "service.beta.kubernetes.io/azure-disable-load-balancer-nsg-rule"
	annFloatingIPOff   = "service.beta.kubernetes.io/azure-disable-load-balancer-floating-ip"
)

// rangeChoices are valid source ranges; some overlap (192.168.10.0/24 is
// inside 192.168.0.0/16) and two are the halves of one /24, so merging is
// exercised.
var rangeChoices = []string{"203.0.113.0/24", "198.51.100.0/25", "198.51.100.128/25", "192.168.0.0/16", "192.168.10.0/24", "10.0.0.0/8",
	"172.16.0.0/12", "100.64.0.0/10"}

// invalidRanges are source ranges azlb refuses: it allows the valid ones
// given with them, writes no Internet rule and denies everyone else (fail
// closed). They go into azure-allowed-ip-ranges only: the API server
// (v1.37, StrictIPCIDRValidation) refuses them in
// spec.loadBalancerSourceRanges and in the legacy annotation.
var invalidRanges = []string{"10.0.0.1/24", "10.0.0.1/24", "10.0.0.1", "10.0.0.0/33", "not-a-range"}

var serviceTagChoices = []string{"AzureFrontDoor.Backend", "Storage.WestEurope", "AzureCloud", "AzureFrontDoor.Backend,Storage.WestEurope",
	"AzureCloud, AzureFrontDoor.Backend"}

// The kinds of access change and their weights.
var accessChanges = []struct {
	name   string
	weight int
}{
	{"ranges-set", 24},        // spec.loadBalancerSourceRanges set or changed (annotations dropped)
	{"ranges-annotation", 10}, // azure-allowed-ip-ranges or the legacy annotation instead of the spec
	{"ranges-clear", 12},      // no range anywhere
	{"service-tags", 14},      // azure-allowed-service-tags toggled
	{"deny-all", 12},          // azure-deny-all-except-load-balancer-source-ranges toggled
	{"no-nsg-rule", 8},        // azure-disable-load-balancer-nsg-rule toggled
	{"floating-ip-off", 7},    // azure-disable-load-balancer-floating-ip toggled: node addresses and node ports become the destinations
	{"invalid-range", 10},     // an invalid range among valid ones (fail closed)
	{"conflict", 3},           // a combination azlb refuses (ConflictingAccessConfiguration)
}

func isTrue(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "true") }

// randomRanges are 1-3 valid ranges; now and then with 0.0.0.0/0, or an
// IPv6 range (the Services are IPv4: it adds no IPv4 source), or only an
// IPv6 range (the Service is closed on IPv4, not open).
func (w *world) randomRanges() []string {
	var out []string
	for _, i := range w.rnd.Perm(len(rangeChoices))[:1+w.rnd.IntN(3)] {
		out = append(out, rangeChoices[i])
	}
	switch r := w.rnd.IntN(100); {
	case r < 5:
		out = append(out, "0.0.0.0/0")
	case r < 10:
		out = append(out, "2001:db8::/32")
	case r < 13:
		out = []string{"2001:db8::/32"}
	}
	return out
}

// randomAccessAnnotations adds, now and then, access annotations to a
// Service's new annotations (created, or its annotations replaced).
func (w *world) randomAccessAnnotations(a map[string]string) {
	if w.rnd.IntN(100) < 6 {
		key := annAllowedIPRanges
		if w.rnd.IntN(3) == 0 {
			key = annLegacyRanges
		}
		a[key] = strings.Join(w.randomRanges(), ",")
	}
	if w.rnd.IntN(100) < 8 {
		a[annServiceTags] = w.pick(serviceTagChoices)
	}
	if w.rnd.IntN(100) < 6 {
		a[annDenyAll] = "true"
	}
	if w.rnd.IntN(100) < 4 {
		a[annDisableNSGRule] = "true"
	}
}

// access changes who may reach a Service: its source ranges (spec or
// annotation; set, changed, cleared, sometimes invalid), its service tags,
// deny-all, no NSG rule, floating IP; rarely a combination azlb refuses.
func (w *world) access(ctx context.Context) error {
	ref := w.services[w.rnd.IntN(len(w.services))]
	total := 0
	for _, c := range accessChanges {
		total += c.weight
	}
	kind := ""
	for n := w.rnd.IntN(total); kind == ""; {
		for _, c := range accessChanges {
			if n < c.weight {
				kind = c.name
				break
			}
			n -= c.weight
		}
	}
	// Every value is drawn before the update, which may be retried.
	ranges, other := w.randomRanges(), w.randomRanges()
	rangeKey := annAllowedIPRanges
	if w.rnd.IntN(3) == 0 {
		rangeKey = annLegacyRanges
	}
	tags := w.pick(serviceTagChoices)
	offAsFalse := w.rnd.IntN(3) == 0 // switched off by "false" rather than by removing the annotation
	bad := w.pick(invalidRanges)
	denyConflict := w.rnd.IntN(2) == 0
	toggle := func(a map[string]string, key, on string) {
		switch {
		case !isTrue(a[key]):
			a[key] = on
		case offAsFalse:
			a[key] = "false"
		default:
			delete(a, key)
		}
	}
	done := ""
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		svc, err := suite.cs.CoreV1().Services(ref.ns).Get(ctx, ref.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		a := svc.Annotations
		dropRangeAnnotations := func() {
			delete(a, annAllowedIPRanges)
			delete(a, annLegacyRanges)
		}
		did := kind
		if kind == "conflict" && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal {
			did = "ranges-set" // refused settings only on Cluster Services (see settleAccess)
		}
		switch did {
		case "ranges-set":
			svc.Spec.LoadBalancerSourceRanges = ranges
			dropRangeAnnotations()
		case "ranges-annotation":
			svc.Spec.LoadBalancerSourceRanges = nil
			dropRangeAnnotations()
			a[rangeKey] = strings.Join(ranges, ",")
		case "ranges-clear":
			svc.Spec.LoadBalancerSourceRanges = nil
			dropRangeAnnotations()
		case "service-tags":
			if _, ok := a[annServiceTags]; ok {
				delete(a, annServiceTags)
			} else {
				a[annServiceTags] = tags
			}
		case "deny-all":
			toggle(a, annDenyAll, "true")
		case "no-nsg-rule":
			toggle(a, annDisableNSGRule, "true")
		case "floating-ip-off":
			toggle(a, annFloatingIPOff, "true")
		case "invalid-range":
			// With floating IP off the deny-all of an invalid range is
			// refused (settleAccess): floating IP back on.
			delete(a, annFloatingIPOff)
			dropRangeAnnotations()
			svc.Spec.LoadBalancerSourceRanges = nil
			a[annAllowedIPRanges] = strings.Join(append(slices.Clone(ranges[:len(ranges)/2]), bad), ",")
		case "conflict":
			if denyConflict {
				// Deny-all with floating IP off, with ranges to keep.
				a[annDenyAll], a[annFloatingIPOff] = "true", "true"
				if len(svc.Spec.LoadBalancerSourceRanges) == 0 && a[annAllowedIPRanges] == "" && a[annLegacyRanges] == "" {
					svc.Spec.LoadBalancerSourceRanges = ranges
				}
				did = "conflict-deny-all-floating-ip-off"
			} else {
				// Ranges in the spec and in an annotation.
				svc.Spec.LoadBalancerSourceRanges = ranges
				a[rangeKey] = strings.Join(other, ",")
				did = "conflict-spec-and-annotation"
			}
		}
		settleAccess(svc, strings.HasPrefix(did, "conflict"))
		if _, err := suite.cs.CoreV1().Services(ref.ns).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			return err
		}
		done = did
		return nil
	})
	if err == nil {
		w.accessCounts[done]++
	}
	return err
}

// settleAccess keeps a Service's access settings to those azlb serves, so
// that verify judges the Service, unless conflict asks for one refused
// combination (on a Cluster Service: verify does not judge a refused
// Service, but would report the dedicated pool of a Local one as nobody's).
// Any later change of the Service settles it again:
//   - ranges both in spec.loadBalancerSourceRanges and in an annotation
//     (refused): the annotations go;
//   - deny-all with floating IP off (refused): deny-all goes;
//   - an invalid range with floating IP off: azlb refuses it (its fail
//     closed deny-all would be a deny-all with floating IP off) while verify
//     judges it, so it is not generated: the invalid ranges go.
func settleAccess(svc *v1.Service, conflict bool) {
	a := svc.Annotations
	allowed := conflict && svc.Spec.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyLocal
	if !allowed && len(svc.Spec.LoadBalancerSourceRanges) > 0 {
		delete(a, annAllowedIPRanges)
		delete(a, annLegacyRanges)
	}
	if !isTrue(a[annFloatingIPOff]) {
		return
	}
	if !allowed {
		delete(a, annDenyAll)
	}
	svc.Spec.LoadBalancerSourceRanges = validRanges(svc.Spec.LoadBalancerSourceRanges)
	for _, key := range []string{annAllowedIPRanges, annLegacyRanges} {
		if v, ok := a[key]; ok {
			if r := validRanges(strings.Split(v, ",")); len(r) > 0 {
				a[key] = strings.Join(r, ",")
			} else {
				delete(a, key)
			}
		}
	}
}

// validRanges drops the invalid ranges the churn writes (nil if none is
// left).
func validRanges(in []string) []string {
	var out []string
	for _, r := range in {
		if !slices.Contains(invalidRanges, strings.TrimSpace(r)) {
			out = append(out, r)
		}
	}
	return out
}
