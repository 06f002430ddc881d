package emulator

import (
	"crypto/x509"
	"fmt"
	"net/netip"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/emulator/dataplane"
)

// Default identity and ranges used when Options leaves them empty.
const (
	DefaultTenantID       = "00000000-0000-0000-0000-000000000001"
	DefaultClientID       = "azlb-emulator-client"
	DefaultClientSecret   = "emulator-secret"
	DefaultPublicIPv4CIDR = "20.40.0.0/16"
	DefaultPublicIPv6CIDR = "2603:1030:40::/48"
	// DefaultInternetPrefixes is what the Internet service tag stands for
	// in the data plane unless Options.InternetPrefixes says otherwise.
	DefaultInternetPrefixes = "127.0.0.0/8"
	// DefaultDataPlanePublicIPv4CIDR is where public IPv4 addresses come
	// from when the data plane is on: a loopback range, so that the data
	// plane can listen on them.
	DefaultDataPlanePublicIPv4CIDR = "127.64.0.0/16"

	// DefaultWriteBudget and DefaultWriteBudgetWindow are the single write
	// bucket of ThrottleWriteBudget: 1,000 writes per 5 minutes.
	DefaultWriteBudget       = 1000
	DefaultWriteBudgetWindow = 5 * time.Minute

	// NetworkAPIVersion is the only Microsoft.Network api-version served.
	NetworkAPIVersion = "2025-05-01"
	// ResourcesAPIVersion is the resource-group api-version of the recordings.
	ResourcesAPIVersion = "2021-04-01"
)

// resourcesAPIVersions lists the Microsoft.Resources api-versions accepted
// for resource groups.
var resourcesAPIVersions = []string{
	"2021-04-01", "2022-09-01", "2023-07-01", "2024-03-01", "2024-07-01", "2024-11-01", "2025-04-01",
}

// FeatureConnectionDraining is the subscription feature a backend pool's
// drainPeriodInSeconds needs (docs/emulator.md, Backend pool drain period).
const FeatureConnectionDraining = "Microsoft.Network/SLBAllowConnectionDraining"

// Options configures an Emulator. The zero value is usable.
type Options struct {
	// Features are the subscription features registered (every
	// subscription), e.g. FeatureConnectionDraining; without it a pool
	// with a drainPeriodInSeconds above 0 is refused.
	Features []string
	// Clock drives operation completion, the refill of the throttling
	// buckets and Retry-After values; nil means the real clock.
	Clock clock.Clock
	// Latency is added to every ARM call (see SetLatency).
	Latency time.Duration
	// OperationDuration is how long an asynchronous operation stays
	// InProgress. 0 means the first poll answers Succeeded.
	OperationDuration time.Duration
	// Throttle limits the ARM requests (429 with Retry-After). The zero
	// value throttles as Azure does; NoThrottle turns limits off.
	Throttle Throttle
	// WriteBudget is the number of writes per WriteBudgetWindow per
	// subscription before 429 when Throttle.Mode is ThrottleWriteBudget
	// (set with another mode, it is an error); 0 means 1000.
	WriteBudget int
	// WriteBudgetWindow is the refill window of ThrottleWriteBudget's
	// bucket; 0 means 5 minutes.
	WriteBudgetWindow time.Duration
	// PublicIPv4CIDR is the range public IPv4 addresses and prefixes are
	// allocated from; "" means 20.40.0.0/16.
	PublicIPv4CIDR string
	// PublicIPv6CIDR is the range public IPv6 addresses are allocated from;
	// "" means 2603:1030:40::/48.
	PublicIPv6CIDR string
	// DataPlane turns on the data plane (package dataplane): load
	// balancing rules whose frontend address is on loopback (127.0.0.0/8;
	// for IPv6 ::1 and prefixes routed to the loopback device, see
	// dataplane.Loopback) carry real TCP and UDP to the loopback members
	// of their pools. Public IPv4 addresses
	// then come from DefaultDataPlanePublicIPv4CIDR unless PublicIPv4CIDR
	// says otherwise (it must be inside 127.0.0.0/8). Off by default.
	DataPlane bool
	// DataPlaneLogger receives the data plane's state changes (probe
	// transitions, frontends it cannot listen on).
	DataPlaneLogger klog.Logger
	// DataPlaneNetwork, with DataPlane, is a network namespace the data
	// plane serves beside loopback: real nodes (internal/localcluster).
	// Frontends and members in its prefixes are served there as Azure
	// serves a VM (the client's address kept, floating IP delivered to the
	// frontend's address; docs/data-plane.md, Real nodes), and
	// PublicIPv4CIDR may then be inside its prefixes instead of loopback.
	// The namespace must route nowhere off the machine (Start refuses it
	// otherwise).
	DataPlaneNetwork *dataplane.Network
	// InternetPrefixes are the source addresses the data plane's network
	// security groups count as the Internet service tag, except those
	// inside a virtual network's address space (VirtualNetwork). nil
	// means DefaultInternetPrefixes (all of 127.0.0.0/8, so that a client
	// on the host, which Linux gives the source 127.0.0.1, is the
	// Internet); an empty non-nil slice means none.
	InternetPrefixes []netip.Prefix
	// ServiceTags are service tags and the prefixes they stand for in the
	// data plane (for example "AzureFrontDoor.Backend": 127.1.2.0/24).
	// Their names are accepted in security rules besides the emulator's
	// built-in list; a built-in tag not listed here matches no address.
	ServiceTags map[string][]netip.Prefix
	// TenantID, ClientID and ClientSecret name the one client-credentials
	// identity the AAD endpoint accepts. Empty fields take the Default*
	// constants.
	TenantID, ClientID, ClientSecret string
	// Tenants are more tenants, each holding the subscriptions it lists
	// (every other subscription is TenantID's). The one client application
	// is registered in all of them. ARM then holds requests to the rules
	// across tenants (docs/emulator.md, Tenants): a token of the
	// subscription's tenant, and auxiliary tokens of the tenants whose
	// subscriptions a write links.
	Tenants []Tenant
	// ClientCertificates are the certificates registered on that client
	// application: a client assertion signed with the key of one of them
	// (and valid by its NotBefore and NotAfter) authenticates it as its
	// secret does (SetClientCertificates changes them at run time).
	ClientCertificates []*x509.Certificate
	// ServiceGatewayPOSTStatus is how updateServices and
	// updateAddressLocations answer: SGWPostOK (200, what NRP does; the
	// default) or SGWPostAccepted (202 and polling, what the specification
	// says).
	ServiceGatewayPOSTStatus int
	// ServiceGatewayPageSize is the page size of GET services and GET
	// addressLocations; 0 means DefaultSGWPageSize.
	ServiceGatewayPageSize int
	// ServiceGatewayMaxServicesPerUpdate is the most serviceRequests one
	// updateServices may hold; a longer one is refused whole (400
	// TooManyServicesInRequest). 0 means no maximum (NRP documents none).
	ServiceGatewayMaxServicesPerUpdate int
	// PodLoopback maps the addresses of pods the service gateway holds
	// onto loopback for the data plane. Kubernetes refuses loopback
	// addresses in EndpointSlices, so pods keep addresses of a pod network
	// (From); the data plane connects to the pod at From's i-th address on
	// To's i-th address (To inside 127.0.0.0/8, the same size). Security
	// groups and the flow hash still see the pod's own address. The zero
	// value maps nothing: only pods on loopback are reached.
	PodLoopback PrefixMap
}

// PrefixMap maps the addresses of From onto To, offset for offset.
type PrefixMap struct{ From, To netip.Prefix }

// Map returns a's address in To, or false when a is outside From (or the
// two are not of one family).
func (m PrefixMap) Map(a netip.Addr) (netip.Addr, bool) {
	if !m.From.IsValid() || !m.To.IsValid() || !m.From.Contains(a) || m.From.Addr().BitLen() != m.To.Addr().BitLen() {
		return netip.Addr{}, false
	}
	from, to := m.From.Masked().Addr().AsSlice(), m.To.Masked().Addr().AsSlice()
	b := a.AsSlice()
	for i := range b {
		b[i] = to[i] | (b[i] ^ from[i])
	}
	out, _ := netip.AddrFromSlice(b)
	return out, true
}

// withDefaults fills empty fields.
func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Throttle.Mode == ThrottleWriteBudget {
		if o.WriteBudget == 0 {
			o.WriteBudget = DefaultWriteBudget
		}
		if o.WriteBudgetWindow == 0 {
			o.WriteBudgetWindow = DefaultWriteBudgetWindow
		}
	}
	if o.PublicIPv4CIDR == "" {
		o.PublicIPv4CIDR = DefaultPublicIPv4CIDR
		if o.DataPlane {
			o.PublicIPv4CIDR = DefaultDataPlanePublicIPv4CIDR
		}
	}
	if o.PublicIPv6CIDR == "" {
		o.PublicIPv6CIDR = DefaultPublicIPv6CIDR
	}
	if o.InternetPrefixes == nil {
		o.InternetPrefixes = []netip.Prefix{netip.MustParsePrefix(DefaultInternetPrefixes)}
	}
	if o.TenantID == "" {
		o.TenantID = DefaultTenantID
	}
	if o.ClientID == "" {
		o.ClientID = DefaultClientID
	}
	if o.ClientSecret == "" {
		o.ClientSecret = DefaultClientSecret
	}
	if o.Latency < 0 {
		o.Latency = 0
	}
	if o.OperationDuration < 0 {
		o.OperationDuration = 0
	}
	if o.ServiceGatewayPOSTStatus == 0 {
		o.ServiceGatewayPOSTStatus = SGWPostOK
	}
	if o.ServiceGatewayPageSize == 0 {
		o.ServiceGatewayPageSize = DefaultSGWPageSize
	}
	return o
}

// validate reports configuration errors that New would otherwise hide.
func (o Options) validate() error {
	v4, err := netip.ParsePrefix(o.PublicIPv4CIDR)
	if err != nil || !v4.Addr().Is4() {
		return fmt.Errorf("emulator: PublicIPv4CIDR %q is not an IPv4 CIDR", o.PublicIPv4CIDR)
	}
	if v4.Bits() > 30 {
		return fmt.Errorf("emulator: PublicIPv4CIDR %q is too small (need /30 or larger)", o.PublicIPv4CIDR)
	}
	if o.DataPlaneNetwork != nil && !o.DataPlane {
		return fmt.Errorf("emulator: DataPlaneNetwork needs DataPlane")
	}
	if o.DataPlane && (!v4.Addr().IsLoopback() || v4.Bits() < 8) && !o.inDataPlaneNetwork(v4) {
		return fmt.Errorf("emulator: PublicIPv4CIDR %q must be inside 127.0.0.0/8 when the data plane is on (it listens on loopback only), or inside the prefixes of its network namespace", o.PublicIPv4CIDR)
	}
	v6, err := netip.ParsePrefix(o.PublicIPv6CIDR)
	if err != nil || !v6.Addr().Is6() || v6.Addr().Is4In6() {
		return fmt.Errorf("emulator: PublicIPv6CIDR %q is not an IPv6 CIDR", o.PublicIPv6CIDR)
	}
	if err := o.validateServiceGateway(); err != nil {
		return err
	}
	if err := o.validateThrottle(); err != nil {
		return err
	}
	if m := o.PodLoopback; m != (PrefixMap{}) {
		if !m.From.IsValid() || !m.To.IsValid() || !m.From.Addr().Is4() || !m.To.Addr().IsLoopback() || !m.To.Addr().Is4() ||
			m.From.Bits() != m.To.Bits() || m.To.Bits() < 8 {
			return fmt.Errorf("emulator: PodLoopback %s -> %s must map an IPv4 prefix onto one of the same size inside 127.0.0.0/8", m.From, m.To)
		}
	}
	if err := o.validateTags(); err != nil {
		return err
	}
	if err := o.validateTenants(); err != nil {
		return err
	}
	if v6.Bits() > 120 {
		return fmt.Errorf("emulator: PublicIPv6CIDR %q is too small (need /120 or larger)", o.PublicIPv6CIDR)
	}
	return nil
}

// inDataPlaneNetwork reports whether p lies inside one of the data plane
// network's prefixes.
func (o Options) inDataPlaneNetwork(p netip.Prefix) bool {
	if o.DataPlaneNetwork == nil {
		return false
	}
	for _, q := range o.DataPlaneNetwork.Prefixes {
		if q.Bits() <= p.Bits() && q.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// validateThrottle checks the throttling settings.
func (o Options) validateThrottle() error {
	if err := o.Throttle.validate(); err != nil {
		return err
	}
	if o.Throttle.Mode == ThrottleWriteBudget {
		if o.WriteBudget < 1 || o.WriteBudgetWindow <= 0 {
			return fmt.Errorf("emulator: WriteBudget %d and WriteBudgetWindow %s must be positive", o.WriteBudget, o.WriteBudgetWindow)
		}
		return nil
	}
	if o.WriteBudget != 0 || o.WriteBudgetWindow != 0 {
		mode := o.Throttle.Mode
		if mode == "" {
			mode = ThrottleAzure
		}
		return fmt.Errorf("emulator: WriteBudget and WriteBudgetWindow apply to throttle mode %s only, not %s", ThrottleWriteBudget, mode)
	}
	return nil
}

// validateServiceGateway checks the service gateway settings.
func (o Options) validateServiceGateway() error {
	if o.ServiceGatewayPOSTStatus != SGWPostOK && o.ServiceGatewayPOSTStatus != SGWPostAccepted {
		return fmt.Errorf("emulator: service gateway POST status (postStatus) %d must be %d or %d", o.ServiceGatewayPOSTStatus, SGWPostOK, SGWPostAccepted)
	}
	if o.ServiceGatewayPageSize < 1 || o.ServiceGatewayPageSize > 100000 {
		return fmt.Errorf("emulator: service gateway page size (pageSize) %d must be between 1 and 100000", o.ServiceGatewayPageSize)
	}
	if o.ServiceGatewayMaxServicesPerUpdate < 0 {
		return fmt.Errorf("emulator: ServiceGatewayMaxServicesPerUpdate %d must not be negative", o.ServiceGatewayMaxServicesPerUpdate)
	}
	return nil
}

// validateTags checks the Internet prefixes and the service tags.
func (o Options) validateTags() error {
	for _, p := range o.InternetPrefixes {
		if !p.IsValid() {
			return fmt.Errorf("emulator: InternetPrefixes holds an invalid prefix")
		}
	}
	for name, ps := range o.ServiceTags {
		if !validTagName(name) {
			return fmt.Errorf("emulator: service tag name %q is invalid (letters, digits, '.', '_' and '-', starting with a letter)", name)
		}
		if isBuiltinAddressTag(name) {
			return fmt.Errorf("emulator: service tag %q cannot be configured (Internet, VirtualNetwork and AzureLoadBalancer are built in)", name)
		}
		for _, p := range ps {
			if !p.IsValid() {
				return fmt.Errorf("emulator: service tag %q holds an invalid prefix", name)
			}
		}
	}
	return nil
}
