package config

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FieldError is one configuration problem: the JSON path of the field
// (e.g. "multipleStandardLoadBalancerConfigurations[1].name") and the rule
// it breaks. Its text never holds the value of a secret.
type FieldError struct {
	Field string
	Rule  string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Rule }

// internalLBSuffix is appended to a public load balancer's name to name its
// internal counterpart.
const internalLBSuffix = "-internal"

type validator struct{ errs []error }

func (v *validator) add(field, rule string) {
	v.errs = append(v.errs, &FieldError{Field: field, Rule: rule})
}

func (v *validator) required(field, value, why string) {
	if strings.TrimSpace(value) == "" {
		v.add(field, why)
	}
}

func oneOf(known []string) string {
	return "must be one of " + strings.Join(known, ", ")
}

// Validate checks the configuration and reports every problem found, joined
// with errors.Join; each is a *FieldError. It judges the configuration as
// SetDefaults would leave it (so unset fields with defaults are fine) without
// modifying c. It reads caCertFile, if set, from the file system.
func (c *Config) Validate() error {
	if c == nil {
		return errors.New("configuration is nil")
	}
	d := *c
	d.SetDefaults()

	var v validator
	v.required("subscriptionId", d.SubscriptionID, "required")
	v.required("resourceGroup", d.ResourceGroup, "required")
	v.required("location", d.Location, "required")

	if !contains(knownClouds, d.Cloud) && d.ResourceManagerEndpoint == "" {
		v.add("cloud", fmt.Sprintf("unknown cloud %q: %s, or set resourceManagerEndpoint for a custom cloud",
			d.Cloud, oneOf(knownClouds)))
	}
	v.auth(&d)
	v.networkResources(&d)
	v.cloudConfigType(&d)
	v.endpoint("resourceManagerEndpoint", d.ResourceManagerEndpoint)
	v.endpoint("activeDirectoryAuthorityHost", d.ActiveDirectoryAuthorityHost)
	v.caCertFile(d.CACertFile)

	v.loadBalancer(&d)
	v.multipleSLBs(c, &d)

	// Range rules on numbers. Defaults only replace zeros, so a value that
	// fails here is the user's.
	if d.LoadBalancerBackendPoolUpdateIntervalInSeconds <= 0 {
		v.add("loadBalancerBackendPoolUpdateIntervalInSeconds", "must be greater than 0")
	}
	if d.LoadBalancerCacheTTLInSeconds < 0 {
		v.add("loadBalancerCacheTTLInSeconds", "must not be negative")
	}
	if d.DriftRepairIntervalInSeconds != nil && (*d.DriftRepairIntervalInSeconds < 0 || (*d.DriftRepairIntervalInSeconds > 0 && *d.DriftRepairIntervalInSeconds < 10)) {
		v.add("driftRepairIntervalInSeconds", "must be 0 (off) or at least 10")
	}
	if d.PutVMSSVMBatchSize < 0 {
		v.add("putVMSSVMBatchSize", "must not be negative")
	}
	if d.VMCacheTTLInSeconds < 0 {
		v.add("vmCacheTTLInSeconds", "must not be negative")
	}
	if d.MaximumLoadBalancerRuleCount <= 0 {
		v.add("maximumLoadBalancerRuleCount", "must be greater than 0")
	}
	if !contains(knownHealthProbes, d.ClusterServiceLoadBalancerHealthProbeMode) {
		v.add("clusterServiceLoadBalancerHealthProbeMode", oneOf(knownHealthProbes))
	}
	if p := d.ClusterServiceSharedLoadBalancerHealthProbePort; p < 1 || p > 65535 {
		v.add("clusterServiceSharedLoadBalancerHealthProbePort", "must be between 1 and 65535")
	}
	if !strings.HasPrefix(d.ClusterServiceSharedLoadBalancerHealthProbePath, "/") {
		v.add("clusterServiceSharedLoadBalancerHealthProbePath", `must start with "/"`)
	}
	if err := checkUserAgent(d.UserAgent); err != "" {
		v.add("userAgent", err)
	}
	v.tags(&d)
	v.adminStateTaints(d.LoadBalancerAdminStateTaints)
	v.drainPeriod(d.LoadBalancerBackendPoolDrainPeriodInSeconds)
	v.backoff(d.BackoffConfig)
	// Rate limits are checked as written, before inheritance copies a bad
	// value into other fields and reports it again there.
	v.rateLimit("", c.RateLimitConfig)
	v.rateLimitPtr("loadBalancerRateLimit", c.LoadBalancerRateLimit)
	v.rateLimitPtr("publicIPAddressRateLimit", c.PublicIPAddressRateLimit)
	v.rateLimitPtr("serviceGatewayRateLimit", c.ServiceGatewayRateLimit)
	v.rateLimitPtr("virtualMachineScaleSetRateLimit", c.VirtualMachineScaleSetRateLimit)
	v.rateLimitPtr("virtualMachineRateLimit", c.VirtualMachineRateLimit)
	v.rateLimitPtr("interfaceRateLimit", c.InterfaceRateLimit)

	return errors.Join(v.errs...)
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func (v *validator) loadBalancer(d *Config) {
	if !contains(knownSKUs, d.LoadBalancerSKU) {
		v.add("loadBalancerSku", fmt.Sprintf("%s; got %q", oneOf(knownSKUs), d.LoadBalancerSKU))
	}
	if !contains(knownPoolTypes, d.LoadBalancerBackendPoolConfigurationType) {
		v.add("loadBalancerBackendPoolConfigurationType", fmt.Sprintf("%s; got %q", oneOf(knownPoolTypes), d.LoadBalancerBackendPoolConfigurationType))
	}
	v.serviceGateway(d)
}

// serviceGatewayFields names the three settings that select pod-based
// backend pools; they are set together or not at all.
const serviceGatewayFields = "serviceGatewayEnabled, loadBalancerBackendPoolConfigurationType, loadBalancerSku"

// serviceGateway checks the pod-based (ServiceGateway) settings: the three
// that select it come together, reported in one error naming all three, and
// the mode needs the virtual network its backend pools refer to.
func (v *validator) serviceGateway(d *Config) {
	podIP := d.LoadBalancerBackendPoolConfigurationType == BackendPoolPodIP
	serviceSKU := d.LoadBalancerSKU == LoadBalancerSKUService
	if d.ServiceGatewayEnabled != podIP || podIP != serviceSKU {
		v.add(serviceGatewayFields, fmt.Sprintf(
			"pod-based backend pools need all three together (serviceGatewayEnabled: true, loadBalancerBackendPoolConfigurationType: podIP, loadBalancerSku: service) and none of them otherwise; got serviceGatewayEnabled: %t, loadBalancerBackendPoolConfigurationType: %q, loadBalancerSku: %q",
			d.ServiceGatewayEnabled, d.LoadBalancerBackendPoolConfigurationType, d.LoadBalancerSKU))
		return
	}
	if d.ServiceGatewayEnabled {
		v.required("vnetName", d.VnetName, "required with serviceGatewayEnabled: the backend pools of pod-based load balancers refer to the cluster's virtual network")
	}
	if d.ServiceGatewayUpdateServicesBatchSize < 0 {
		v.add("serviceGatewayUpdateServicesBatchSize", fmt.Sprintf("must not be negative (0 means %d); got %d",
			DefaultServiceGatewayUpdateServicesBatchSize, d.ServiceGatewayUpdateServicesBatchSize))
	}
}

// DefaultServiceGatewayUpdateServicesBatchSize is how many services one
// updateServices call carries when azure.json does not say: the API
// documents no maximum, and a refused call is split, so a small batch
// bounds what one bad entry costs.
const DefaultServiceGatewayUpdateServicesBatchSize = 20

// UpdateServicesBatchSize is the most services one updateServices call
// carries (serviceGatewayUpdateServicesBatchSize, or its default).
func (c *Config) UpdateServicesBatchSize() int {
	if c.ServiceGatewayUpdateServicesBatchSize > 0 {
		return c.ServiceGatewayUpdateServicesBatchSize
	}
	return DefaultServiceGatewayUpdateServicesBatchSize
}

// PodIPMode reports whether Services get pod-based backend pools through
// the ServiceGateway API (serviceGatewayEnabled, which Validate accepts only
// together with podIP pools and the service SKU).
func (c *Config) PodIPMode() bool { return c.ServiceGatewayEnabled }

func (v *validator) multipleSLBs(c, d *Config) {
	if !d.UseMultipleStandardLoadBalancers() {
		return
	}
	const list = "multipleStandardLoadBalancerConfigurations"
	if d.ServiceGatewayEnabled {
		v.add("serviceGatewayEnabled", "cannot be combined with "+list)
	}
	if d.LoadBalancerSKU != LoadBalancerSKUStandard {
		v.add("loadBalancerSku", fmt.Sprintf("must be standard when %s is set; got %q", list, d.LoadBalancerSKU))
	}
	if pt := d.LoadBalancerBackendPoolConfigurationType; pt != BackendPoolNodeIP {
		if c.LoadBalancerBackendPoolConfigurationType == "" {
			v.add("loadBalancerBackendPoolConfigurationType", fmt.Sprintf("must be nodeIP when %s is set; unset, it defaults to %s (NIC-based pools), which multiple load balancers do not support: set it to nodeIP", list, pt))
		} else {
			v.add("loadBalancerBackendPoolConfigurationType", fmt.Sprintf("must be nodeIP when %s is set; got %q", list, pt))
		}
	}

	// Azure resource names are case-insensitive, so names and VM sets are
	// compared ignoring case.
	names := map[string]bool{}
	vmSets := map[string]bool{}
	defaultName := d.DefaultLoadBalancerName()
	haveDefault := false
	for i, m := range d.MultipleStandardLoadBalancerConfigurations {
		at := fmt.Sprintf("%s[%d]", list, i)
		switch key := strings.ToLower(m.Name); {
		case strings.TrimSpace(m.Name) == "":
			v.add(at+".name", "required")
		case names[key]:
			v.add(at+".name", fmt.Sprintf("duplicate %q", m.Name))
		case strings.HasSuffix(key, internalLBSuffix):
			v.add(at+".name", fmt.Sprintf("%q must not end in %q: that suffix names the internal load balancer, which is created automatically", m.Name, internalLBSuffix))
		default:
			names[key] = true
		}
		if strings.EqualFold(m.Name, defaultName) {
			haveDefault = true
		}
		if m.PrimaryVMSet != "" {
			key := strings.ToLower(m.PrimaryVMSet)
			if vmSets[key] {
				v.add(at+".primaryVMSet", fmt.Sprintf("duplicate %q", m.PrimaryVMSet))
			}
			vmSets[key] = true
		}
		v.selector(at+".serviceLabelSelector", m.ServiceLabelSelector)
		v.selector(at+".serviceNamespaceSelector", m.ServiceNamespaceSelector)
		v.selector(at+".nodeSelector", m.NodeSelector)
	}
	if !haveDefault {
		v.add(list, fmt.Sprintf("no configuration named after the cluster (%q, from loadBalancerName or clusterName)", defaultName))
	}
}

// selector checks that a label selector converts with
// metav1.LabelSelectorAsSelector. Each label and expression is converted on
// its own, labels in key order, so that every bad item is reported, at its
// own path, in a stable order.
func (v *validator) selector(path string, s *metav1.LabelSelector) {
	if s == nil {
		return
	}
	keys := make([]string, 0, len(s.MatchLabels))
	for k := range s.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		one := &metav1.LabelSelector{MatchLabels: map[string]string{k: s.MatchLabels[k]}}
		if _, err := metav1.LabelSelectorAsSelector(one); err != nil {
			v.add(fmt.Sprintf("%s.matchLabels[%q]", path, k), err.Error())
		}
	}
	for i, e := range s.MatchExpressions {
		one := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{e}}
		if _, err := metav1.LabelSelectorAsSelector(one); err != nil {
			v.add(fmt.Sprintf("%s.matchExpressions[%d]", path, i), err.Error())
		}
	}
}

func (v *validator) backoff(b BackoffConfig) {
	if b.CloudProviderBackoffRetries < 0 {
		v.add("cloudProviderBackoffRetries", "must not be negative")
	}
	if b.CloudProviderBackoffDuration < 0 {
		v.add("cloudProviderBackoffDuration", "must not be negative")
	}
	if x := b.CloudProviderBackoffExponent; x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		v.add("cloudProviderBackoffExponent", "must be a finite number, not negative")
	}
	if x := b.CloudProviderBackoffJitter; x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		v.add("cloudProviderBackoffJitter", "must be a finite number, not negative")
	}
}

func (v *validator) rateLimitPtr(stanza string, r *RateLimitConfig) {
	if r != nil {
		v.rateLimit(stanza, *r)
	}
}

func (v *validator) rateLimit(stanza string, r RateLimitConfig) {
	qps := func(name string, x float32) {
		f := float64(x)
		if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			v.add(joinPath(stanza, name), "must be a finite number, not negative")
		}
	}
	bucket := func(name string, n int) {
		if n < 0 {
			v.add(joinPath(stanza, name), "must not be negative")
		}
	}
	qps("cloudProviderRateLimitQPS", r.CloudProviderRateLimitQPS)
	bucket("cloudProviderRateLimitBucket", r.CloudProviderRateLimitBucket)
	qps("cloudProviderRateLimitQPSWrite", r.CloudProviderRateLimitQPSWrite)
	bucket("cloudProviderRateLimitBucketWrite", r.CloudProviderRateLimitBucketWrite)
}

// MaxUserAgentLength bounds userAgent.
const MaxUserAgentLength = 256

// checkUserAgent returns why ua cannot start a User-Agent header, or "".
func checkUserAgent(ua string) string {
	if len(ua) > MaxUserAgentLength {
		return fmt.Sprintf("must be at most %d characters", MaxUserAgentLength)
	}
	for _, r := range ua {
		if r < 0x20 || r > 0x7e {
			return "must be printable ASCII (letters, digits, punctuation and spaces)"
		}
	}
	if strings.TrimSpace(ua) != ua {
		return "must not start or end with a space"
	}
	return ""
}

// RetiredBasicSKU is the rule CheckController reports for loadBalancerSku
// basic.
const RetiredBasicSKU = "Basic Load Balancer was retired by Azure on 2025-09-30, and azlb never creates one. " +
	"To migrate a cluster that still has Basic load balancers, set loadBalancerSku to standard and restart azlb-controller-manager: " +
	"its first reconcile moves every node and Service to Standard load balancers and keeps each Service's IP " +
	"(Basic public IPs are upgraded to Standard; expect a short outage per Service; set up outbound connectivity yourself; see docs/migration.md)"

// CheckController reports settings that azure.json may hold (so that
// tools such as azlb status read a cluster's file as it is) but that the
// controller refuses to run with: loadBalancerSku basic.
func (c *Config) CheckController() error {
	d := *c
	d.SetDefaults()
	if d.LoadBalancerSKU == LoadBalancerSKUBasic {
		return &FieldError{Field: "loadBalancerSku", Rule: RetiredBasicSKU}
	}
	return nil
}
