package privatelink

import (
	"errors"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"github.com/azlb/azlb/internal/annotations"
)

// The annotations of a Service's Private Link Service.
const (
	KeyCreate        = annotations.Prefix + "azure-pls-create"
	KeyName          = annotations.Prefix + "azure-pls-name"
	KeyResourceGroup = annotations.Prefix + "azure-pls-resource-group"
	KeySubnet        = annotations.Prefix + "azure-pls-ip-configuration-subnet"
	KeyIPCount       = annotations.Prefix + "azure-pls-ip-configuration-ip-address-count"
	KeyIPAddresses   = annotations.Prefix + "azure-pls-ip-configuration-ip-address"
	KeyFQDNs         = annotations.Prefix + "azure-pls-fqdns"
	KeyProxyProtocol = annotations.Prefix + "azure-pls-proxy-protocol"
	KeyVisibility    = annotations.Prefix + "azure-pls-visibility"
	KeyAutoApproval  = annotations.Prefix + "azure-pls-auto-approval"
)

// Keys lists every annotation Parse reads, in documentation order.
var Keys = []string{KeyCreate, KeyName, KeyResourceGroup, KeySubnet, KeyIPCount, KeyIPAddresses, KeyFQDNs, KeyProxyProtocol, KeyVisibility, KeyAutoApproval}

// MaxIPConfigurations is Azure's limit of NAT ip configurations per PLS.
const MaxIPConfigurations = 8

// Defaults are what a Service that names no value gets.
type Defaults struct {
	// ResourceGroup is azure.json privateLinkServiceResourceGroup (itself
	// defaulting to resourceGroup).
	ResourceGroup string
	// Subnet is the NAT subnet without the annotation: the Service's
	// azure-load-balancer-internal-subnet, else azure.json subnetName.
	Subnet string
}

// Spec is a Service's Private Link Service request.
type Spec struct {
	// Create: azure-pls-create is "true".
	Create bool
	// Name is the PLS name; "" means the default, pls-<frontend name>.
	Name          string
	ResourceGroup string
	// Subnet is the NAT ip configurations' subnet name.
	Subnet string
	// IPCount is the number of NAT ip configurations (1-8).
	IPCount int
	// StaticIPs are the NAT addresses asked for; the first is primary.
	StaticIPs []netip.Addr
	FQDNs     []string
	// ProxyProtocol turns on PROXY protocol v2 towards the backends.
	ProxyProtocol bool
	// Visibility and AutoApproval are subscription ids; Visibility may be
	// ["*"]. nil: not set.
	Visibility   []string
	AutoApproval []string
	// Configured lists the azure-pls-* annotations set besides create and
	// resource-group: a Service that shares another Service's PLS may set
	// none of them.
	Configured []string
}

// plsNameRE is Azure's rule for a PLS name (as for other Microsoft.Network
// resources): 1-80 letters, digits, '_', '.', '-', starting with a letter
// or digit, ending with a letter, digit or '_'.
var plsNameRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,78}[A-Za-z0-9_])?$`)

// rgNameRE is Azure's rule for a resource group name: 1-90 letters,
// digits, '_', '-', '.', '(' or ')', not ending with '.'.
var rgNameRE = regexp.MustCompile(`^[-\w.()]{0,89}[-\w()]$`)

// guidRE is a subscription id.
var guidRE = regexp.MustCompile(`^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$`)

// fqdnRE is one DNS name: labels of letters, digits and '-' (a leading
// "*." wildcard allowed), not starting or ending with '-', 253 characters
// at most.
var fqdnLabelRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// Parse reads a Service's azure-pls-* annotations. A Service without
// azure-pls-create gets Spec{} and no error when it sets no other one; the
// errors are *annotations.Error, joined.
func Parse(ann map[string]string, d Defaults) (Spec, error) {
	p := &parser{ann: ann, s: Spec{ResourceGroup: d.ResourceGroup, Subnet: d.Subnet, IPCount: 1}}
	p.identity()
	p.addresses()
	p.options()
	if len(p.errs) > 0 {
		return Spec{}, errors.Join(p.errs...)
	}
	return p.s, nil
}

// parser reads the annotations into s, collecting every error.
type parser struct {
	ann  map[string]string
	s    Spec
	errs []error
}

func (p *parser) bad(key, rule string) {
	p.errs = append(p.errs, &annotations.Error{Key: key, Value: p.ann[key], Rule: rule})
}

// configured is an annotation's trimmed value; one whose value is empty
// (or blank) counts as not set.
func (p *parser) configured(key string) (string, bool) {
	v := strings.TrimSpace(p.ann[key])
	if v == "" {
		return "", false
	}
	p.s.Configured = append(p.s.Configured, key)
	return v, true
}

// identity: create, resource group, name, subnet.
func (p *parser) identity() {
	if v, ok := p.ann[KeyCreate]; ok {
		switch t := strings.TrimSpace(v); {
		case strings.EqualFold(t, "true"):
			p.s.Create = true
		case strings.EqualFold(t, "false"), t == "":
		default:
			p.bad(KeyCreate, `is not a boolean: use "true" or "false"`)
		}
	}
	if v, ok := p.ann[KeyResourceGroup]; ok {
		if t := strings.TrimSpace(v); t != "" {
			if !rgNameRE.MatchString(t) {
				p.bad(KeyResourceGroup, "is not a valid resource group name: 1-90 letters, digits, '_', '-', '.', '(' or ')', not ending with '.'")
			} else {
				p.s.ResourceGroup = t
			}
		}
	}
	if v, ok := p.configured(KeyName); ok {
		if !plsNameRE.MatchString(v) {
			p.bad(KeyName, "is not a valid Private Link Service name: 1-80 letters, digits, '_', '.' or '-', starting with a letter or digit and ending with a letter, digit or '_'")
		} else {
			p.s.Name = v
		}
	}
	if v, ok := p.configured(KeySubnet); ok {
		if !plsNameRE.MatchString(v) {
			p.bad(KeySubnet, "is not a valid subnet name: 1-80 letters, digits, '_', '.' or '-', starting with a letter or digit and ending with a letter, digit or '_'")
		} else {
			p.s.Subnet = v
		}
	}
}

// addresses: the NAT ip configuration count and static addresses.
func (p *parser) addresses() {
	countOK := true
	if v, ok := p.configured(KeyIPCount); ok {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			p.bad(KeyIPCount, "is not an integer")
			countOK = false
		case n < 1 || n > MaxIPConfigurations:
			p.bad(KeyIPCount, "is out of range: a Private Link Service has 1 to 8 NAT IP configurations")
			countOK = false
		default:
			p.s.IPCount = n
		}
	}
	v, ok := p.configured(KeyIPAddresses)
	if !ok {
		return
	}
	seen := map[netip.Addr]bool{}
	for _, f := range strings.Fields(v) {
		a, err := netip.ParseAddr(f)
		rule := ""
		switch {
		case err != nil || a.Zone() != "":
			rule = "is not a space-separated list of IPv4 addresses: " + strconv.Quote(f) + " is not an IP address"
		case !a.Is4():
			rule = "is not a space-separated list of IPv4 addresses: " + strconv.Quote(f) + " is not IPv4 (Private Link Service NAT addresses are IPv4)"
		case seen[a]:
			rule = "lists " + f + " twice"
		}
		if rule != "" {
			p.bad(KeyIPAddresses, rule)
			p.s.StaticIPs = nil
			return
		}
		seen[a] = true
		p.s.StaticIPs = append(p.s.StaticIPs, a)
	}
	if countOK && len(p.s.StaticIPs) > p.s.IPCount {
		p.bad(KeyIPAddresses, "lists "+strconv.Itoa(len(p.s.StaticIPs))+" addresses, more than "+KeyIPCount+" ("+strconv.Itoa(p.s.IPCount)+")")
	}
}

// options: FQDNs, proxy protocol, visibility, auto-approval.
func (p *parser) options() {
	if v, ok := p.configured(KeyFQDNs); ok {
		for _, f := range strings.Fields(v) {
			if !validFQDN(f) {
				p.bad(KeyFQDNs, "is not a space-separated list of DNS names: "+strconv.Quote(f)+" is not one")
				p.s.FQDNs = nil
				break
			}
			p.s.FQDNs = append(p.s.FQDNs, f)
		}
	}
	if v, ok := p.configured(KeyProxyProtocol); ok {
		switch {
		case strings.EqualFold(v, "true"):
			p.s.ProxyProtocol = true
		case strings.EqualFold(v, "false"):
		default:
			p.bad(KeyProxyProtocol, `is not a boolean: use "true" or "false"`)
		}
	}
	if v, ok := p.configured(KeyVisibility); ok {
		subs, rule := parseSubscriptions(v, true)
		if rule != "" {
			p.bad(KeyVisibility, rule)
		} else {
			p.s.Visibility = subs
		}
	}
	if v, ok := p.configured(KeyAutoApproval); ok {
		p.autoApproval(v)
	}
}

// autoApproval: subscriptions approved without review, each of them
// visible.
func (p *parser) autoApproval(v string) {
	subs, rule := parseSubscriptions(v, false)
	everyone := len(p.s.Visibility) == 1 && p.s.Visibility[0] == "*"
	switch {
	case rule != "":
		p.bad(KeyAutoApproval, rule)
	case p.s.Visibility != nil && !everyone:
		for _, a := range subs {
			if !containsFold(p.s.Visibility, a) {
				p.bad(KeyAutoApproval, "lists subscription "+a+", which "+KeyVisibility+" does not: auto-approved subscriptions must be visible")
				subs = nil
				break
			}
		}
		p.s.AutoApproval = subs
	case p.s.Visibility == nil && len(subs) > 0:
		p.bad(KeyAutoApproval, "is set without "+KeyVisibility+": auto-approved subscriptions must be visible")
	default:
		p.s.AutoApproval = subs
	}
}

// parseSubscriptions reads space-separated subscription ids ("*" alone
// when star is allowed); rule is "" when the value is valid.
func parseSubscriptions(v string, star bool) ([]string, string) {
	f := strings.Fields(v)
	out := make([]string, 0, len(f))
	for _, s := range f {
		switch {
		case s == "*" && star && len(f) == 1:
			return []string{"*"}, ""
		case s == "*" && star:
			return nil, `mixes "*" with subscription ids: "*" stands alone`
		case !guidRE.MatchString(s):
			return nil, "is not a space-separated list of subscription ids: " + strconv.Quote(s) + " is not a GUID"
		case containsFold(out, s):
			return nil, "lists subscription " + s + " twice"
		}
		out = append(out, strings.ToLower(s))
	}
	return out, ""
}

func validFQDN(f string) bool {
	f = strings.TrimSuffix(f, ".")
	if f == "" || len(f) > 253 {
		return false
	}
	labels := strings.Split(f, ".")
	for i, l := range labels {
		if i == 0 && l == "*" && len(labels) > 1 {
			continue
		}
		if !fqdnLabelRE.MatchString(l) {
			return false
		}
	}
	return true
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// ProxyProtocolRequested reports whether the annotations ask for a PLS
// with proxy protocol: azure-pls-create and azure-pls-proxy-protocol both
// "true" (any case, spaces trimmed). Azure then sends the PROXY v2 header
// on the load balancer's health probes too, which kube-proxy's health
// check server does not read, so an externalTrafficPolicy Local Service's
// HTTP probe on its health check node port would always fail.
func ProxyProtocolRequested(ann map[string]string) bool {
	return strings.EqualFold(strings.TrimSpace(ann[KeyCreate]), "true") &&
		strings.EqualFold(strings.TrimSpace(ann[KeyProxyProtocol]), "true")
}
