package securitygroup_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"go.uber.org/goleak"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/securitygroup"
	"github.com/azlb/azlb/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type env struct {
	env     *devenv.Env
	clients *azure.Clients
	store   *securitygroup.Store
}

// start runs a writer on the seeded emulator's NSG (devenv.SecurityGroupName).
func start(t *testing.T) *env {
	t.Helper()
	e := testutil.StartEmulator(t, emulator.Options{}, nil)
	c := testutil.Clients(t, e, azure.ClientOptions{})
	s, err := securitygroup.New(securitygroup.Options{Client: c.SecurityGroup, ResourceGroup: devenv.ResourceGroup, Name: devenv.SecurityGroupName})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e.Emulator().ResetRequests()
	return &env{env: e, clients: c, store: s}
}

func (e *env) nsg(t *testing.T) *armnetwork.SecurityGroup {
	t.Helper()
	sg, err := e.clients.SecurityGroup.Get(context.Background(), devenv.ResourceGroup, devenv.SecurityGroupName)
	if err != nil {
		t.Fatal(err)
	}
	return sg
}

func (e *env) rules(t *testing.T) map[string]*armnetwork.SecurityRule {
	t.Helper()
	out := map[string]*armnetwork.SecurityRule{}
	for _, r := range e.nsg(t).Properties.SecurityRules {
		out[*r.Name] = r
	}
	return out
}

func (e *env) puts() int {
	n := 0
	for _, r := range e.env.Emulator().Requests() {
		if r.Kind == "arm" && r.Method == http.MethodPut && strings.Contains(strings.ToLower(r.Path), "networksecuritygroups") {
			n++
		}
	}
	return n
}

func web(dst string) securitygroup.Edit {
	return securitygroup.Edit{Service: "ns/" + dst, Release: securitygroup.Release{Addresses: []string{dst}},
		Allow: []securitygroup.Allow{{Family: securitygroup.IPv4, Protocol: "Tcp", Sources: []string{"Internet"}, Ports: []string{"80", "443"}, Destinations: []string{dst}}}}
}

func dests(r *armnetwork.SecurityRule) []string {
	var out []string
	if r.Properties.DestinationAddressPrefix != nil {
		out = append(out, *r.Properties.DestinationAddressPrefix)
	}
	for _, d := range r.Properties.DestinationAddressPrefixes {
		out = append(out, *d)
	}
	return out
}

func TestAllowRuleName(t *testing.T) {
	// md5("Tcp_Internet_80") and md5("Udp_10.0.0.0/24,192.168.0.0/16_443,53"), computed with md5sum.
	if got := securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"Internet"}, []string{"80"}); got != "k8s-azure-lb_allow_IPv4_d39272f7f57ed937951650d93992ad77" {
		t.Errorf("name = %s", got)
	}
	// Sources and ports are sorted as strings ("443" < "53").
	if got := securitygroup.AllowRuleName(securitygroup.IPv6, "Udp", []string{"192.168.0.0/16", "10.0.0.0/24"}, []string{"53", "443"}); got != "k8s-azure-lb_allow_IPv6_850ee1165c97d98eb9b8b65aaf0ea138" {
		t.Errorf("name = %s", got)
	}
}

func TestSharedRuleAndRelease(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	for _, ip := range []string{"20.0.0.1", "20.0.0.2"} {
		res, err := e.store.Update(ctx, web(ip))
		if err != nil || !res.Written || !res.Changed {
			t.Fatalf("update %s: %+v %v", ip, res, err)
		}
	}
	rules := e.rules(t)
	name := securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"Internet"}, []string{"443", "80"})
	r := rules[name]
	if len(rules) != 1 || r == nil {
		t.Fatalf("rules = %v, want one named %s", keys(rules), name)
	}
	if got := dests(r); fmt.Sprint(got) != "[20.0.0.1 20.0.0.2]" || r.Properties.DestinationAddressPrefix != nil {
		t.Errorf("destinations = %v (plural expected for two)", got)
	}
	if *r.Properties.Priority != 500 || *r.Properties.SourceAddressPrefix != "Internet" || len(r.Properties.DestinationPortRanges) != 2 {
		t.Errorf("rule = %+v", *r.Properties)
	}
	// The same edit again writes nothing.
	before := e.puts()
	if res, err := e.store.Update(ctx, web("20.0.0.1")); err != nil || res.Changed || res.Written {
		t.Fatalf("repeat: %+v %v", res, err)
	}
	if e.puts() != before {
		t.Errorf("an unchanged NSG was written")
	}
	// Release one: singular destination; release both: the rule goes.
	if _, err := e.store.Update(ctx, securitygroup.Edit{Service: "ns/a", Release: securitygroup.Release{Addresses: []string{"20.0.0.1"}}}); err != nil {
		t.Fatal(err)
	}
	r = e.rules(t)[name]
	if r == nil || ptr.Deref(r.Properties.DestinationAddressPrefix, "") != "20.0.0.2" || len(r.Properties.DestinationAddressPrefixes) != 0 {
		t.Fatalf("after release: %+v", r)
	}
	if _, err := e.store.Update(ctx, securitygroup.Edit{Service: "ns/b", Release: securitygroup.Release{Addresses: []string{"20.0.0.2"}}}); err != nil {
		t.Fatal(err)
	}
	if rules := e.rules(t); len(rules) != 0 {
		t.Errorf("rules left: %v", keys(rules))
	}
}

func keys(m map[string]*armnetwork.SecurityRule) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Concurrent edits share one read and one write.
func TestGroupCommit(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := e.store.Update(ctx, web(fmt.Sprintf("20.0.1.%d", i)))
			errs <- err
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	r := e.rules(t)[securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"Internet"}, []string{"80", "443"})]
	if r == nil || len(dests(r)) != 50 {
		t.Fatalf("rule = %+v", r)
	}
	if n := e.puts(); n >= 50 || n < 1 {
		t.Errorf("%d PUTs for 50 concurrent edits: no group commit", n)
	}
	t.Logf("50 concurrent edits: %d PUTs", e.puts())
}

// Rules that are not azlb's are never touched; priorities are allocated
// around them; deny-all takes the highest free priority.
func TestForeignRulesAndPriorities(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	sg := e.nsg(t)
	sg.Properties.SecurityRules = []*armnetwork.SecurityRule{
		{Name: ptr.To("ssh"), Properties: &armnetwork.SecurityRulePropertiesFormat{Priority: ptr.To[int32](500), Direction: ptr.To(armnetwork.SecurityRuleDirectionInbound),
			Access: ptr.To(armnetwork.SecurityRuleAccessAllow), Protocol: ptr.To(armnetwork.SecurityRuleProtocolTCP), SourceAddressPrefix: ptr.To("10.1.0.0/16"),
			SourcePortRange: ptr.To("*"), DestinationAddressPrefix: ptr.To("*"), DestinationPortRange: ptr.To("22"), Description: ptr.To("mine")}},
		{Name: ptr.To("k8s-azure-lb_mine"), Properties: &armnetwork.SecurityRulePropertiesFormat{Priority: ptr.To[int32](4095), Direction: ptr.To(armnetwork.SecurityRuleDirectionInbound),
			Access: ptr.To(armnetwork.SecurityRuleAccessDeny), Protocol: ptr.To(armnetwork.SecurityRuleProtocolAsterisk), SourceAddressPrefix: ptr.To("*"),
			SourcePortRange: ptr.To("*"), DestinationAddressPrefix: ptr.To("10.9.9.9"), DestinationPortRange: ptr.To("*")}},
	}
	if _, err := e.clients.SecurityGroup.CreateOrUpdate(ctx, devenv.ResourceGroup, devenv.SecurityGroupName, *sg, ""); err != nil {
		t.Fatal(err)
	}
	edit := web("20.0.0.1")
	edit.Allow[0].Sources = []string{"203.0.113.0/24"}
	edit.Deny = []securitygroup.Deny{{Family: securitygroup.IPv4, Destinations: []string{"20.0.0.1"}}}
	if _, err := e.store.Update(ctx, edit); err != nil {
		t.Fatal(err)
	}
	rules := e.rules(t)
	if r := rules["ssh"]; r == nil || ptr.Deref(r.Properties.Description, "") != "mine" || *r.Properties.Priority != 500 {
		t.Errorf("foreign rule changed: %+v", r)
	}
	if r := rules["k8s-azure-lb_mine"]; r == nil || dests(r)[0] != "10.9.9.9" {
		t.Errorf("unknown rule in azlb's range changed: %+v", r)
	}
	allow := rules[securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"203.0.113.0/24"}, []string{"80", "443"})]
	deny := rules[securitygroup.DenyRuleName(securitygroup.IPv4)]
	if allow == nil || *allow.Properties.Priority != 501 {
		t.Errorf("allow = %+v, want priority 501 (500 is taken)", allow)
	}
	if deny == nil || *deny.Properties.Priority != 4094 || *deny.Properties.Access != armnetwork.SecurityRuleAccessDeny || dests(deny)[0] != "20.0.0.1" {
		t.Errorf("deny = %+v, want priority 4094 (4095 is taken)", deny)
	}
}

// bigEdit has one source prefix more than an NSG may hold.
func bigEdit() securitygroup.Edit {
	big := securitygroup.Edit{Service: "ns/big", Allow: []securitygroup.Allow{{Family: securitygroup.IPv4, Protocol: "Tcp", Ports: []string{"80"}, Destinations: []string{"20.0.0.9"}}}}
	for i := 0; i < securitygroup.MaxSourcePrefixes+1; i++ {
		big.Allow[0].Sources = append(big.Allow[0].Sources, fmt.Sprintf("10.%d.%d.0/24", i/256, i%256))
	}
	return big
}

// An edit over Azure's limits fails alone; the others are written.
func TestLimitFailsOneEdit(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	big := bigEdit()
	var wg sync.WaitGroup
	var bigErr, smallErr error
	wg.Add(2)
	go func() { defer wg.Done(); _, bigErr = e.store.Update(ctx, big) }()
	go func() { defer wg.Done(); _, smallErr = e.store.Update(ctx, web("20.0.0.1")) }()
	wg.Wait()
	var le *securitygroup.LimitError
	if !errors.As(bigErr, &le) || le.Max != securitygroup.MaxSourcePrefixes || !strings.Contains(bigErr.Error(), "4000") {
		t.Errorf("big edit: %v, want a LimitError of 4000 source prefixes", bigErr)
	}
	if smallErr != nil {
		t.Errorf("small edit: %v", smallErr)
	}
	rules := e.rules(t)
	if len(rules) != 1 {
		t.Errorf("rules = %v, want only the small edit's", keys(rules))
	}
}

// A 412 (the NSG changed between read and write) is retried with a fresh
// read, keeping what the other writer wrote.
func TestConflictRetried(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	if _, err := e.store.Update(ctx, web("20.0.0.1")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.env.Emulator().AddFault(emulator.Fault{Method: http.MethodPut, PathRegex: "(?i)networkSecurityGroups", Status: http.StatusPreconditionFailed, Code: "PreconditionFailed", Count: 1}); err != nil {
		t.Fatal(err)
	}
	if res, err := e.store.Update(ctx, web("20.0.0.2")); err != nil || !res.Written {
		t.Fatalf("after a 412: %+v %v", res, err)
	}
	r := e.rules(t)[securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"Internet"}, []string{"80", "443"})]
	if r == nil || len(dests(r)) != 2 {
		t.Fatalf("rule = %+v", r)
	}
}

// A missing NSG is a NotFoundError naming the azure.json fields.
func TestNotFound(t *testing.T) {
	e := testutil.StartEmulator(t, emulator.Options{}, nil)
	c := testutil.Clients(t, e, azure.ClientOptions{})
	s, err := securitygroup.New(securitygroup.Options{Client: c.SecurityGroup, ResourceGroup: devenv.ResourceGroup, Name: "nope"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	_, err = s.Update(context.Background(), web("20.0.0.1"))
	var nf *securitygroup.NotFoundError
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), "securityGroupName") {
		t.Errorf("err = %v", err)
	}
}

// Collect drops destinations that are not live, and nothing else.
func TestCollect(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	for _, ip := range []string{"20.0.0.1", "20.0.0.2"} {
		if _, err := e.store.Update(ctx, web(ip)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.store.Collect(ctx, func(d string) bool { return d == "20.0.0.2" }); err != nil {
		t.Fatal(err)
	}
	r := e.rules(t)[securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"Internet"}, []string{"80", "443"})]
	if r == nil || fmt.Sprint(dests(r)) != "[20.0.0.2]" {
		t.Fatalf("rule = %+v", r)
	}
}

// Every port (HA ports) is written in the singular field: Azure refuses "*"
// in destinationPortRanges.
func TestEveryPort(t *testing.T) {
	e := start(t)
	edit := web("10.240.0.9")
	edit.Allow[0].Ports = []string{"*"}
	if _, err := e.store.Update(context.Background(), edit); err != nil {
		t.Fatal(err)
	}
	for _, r := range e.rules(t) {
		if ptr.Deref(r.Properties.DestinationPortRange, "") != "*" || len(r.Properties.DestinationPortRanges) != 0 {
			t.Errorf("rule %s ports = %v %v", *r.Name, r.Properties.DestinationPortRange, r.Properties.DestinationPortRanges)
		}
	}
}

// An edit with FromCopy starts from the writer's last copy: no read when it
// changes nothing; a copy changed out of band costs a 412 and a read, and
// nothing is lost.
func TestFromCopy(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	if _, err := e.store.Update(ctx, web("20.0.0.1")); err != nil {
		t.Fatal(err)
	}
	gen := e.store.CopyGeneration()
	e.env.Emulator().ResetRequests()
	fromCopy := func(dst string) securitygroup.Edit { ed := web(dst); ed.FromCopy = gen; return ed }
	if res, err := e.store.Update(ctx, fromCopy("20.0.0.1")); err != nil || res.Changed {
		t.Fatalf("an unchanged edit: %+v %v", res, err)
	}
	if n := len(e.env.Emulator().Requests()); n != 0 {
		t.Fatalf("an unchanged edit from the copy made %d ARM calls, want 0", n)
	}
	// Someone empties the NSG: the copy is stale.
	sg := e.nsg(t)
	sg.Properties.SecurityRules = nil
	if _, err := e.clients.SecurityGroup.CreateOrUpdate(ctx, devenv.ResourceGroup, devenv.SecurityGroupName, *sg, ""); err != nil {
		t.Fatal(err)
	}
	if res, err := e.store.Update(ctx, fromCopy("20.0.0.2")); err != nil || !res.Written {
		t.Fatalf("an edit from a stale copy: %+v %v", res, err)
	}
	r := e.rules(t)[securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"Internet"}, []string{"80", "443"})]
	if r == nil || strings.Join(dests(r), ",") != "20.0.0.2" {
		t.Fatalf("rule = %+v, want only 20.0.0.2 (the out-of-band change kept, the edit applied)", r)
	}
	// An edit without FromCopy reads.
	e.env.Emulator().ResetRequests()
	if _, err := e.store.Update(ctx, web("20.0.0.2")); err != nil {
		t.Fatal(err)
	}
	if n := len(e.env.Emulator().Requests()); n != 1 {
		t.Fatalf("an ordinary unchanged edit made %d ARM calls, want 1 (the read)", n)
	}
}

// tamper rewrites one rule of the NSG out of band, as someone with the
// Azure portal would.
func (e *env) tamper(t *testing.T, name string, change func(*armnetwork.SecurityRulePropertiesFormat)) {
	t.Helper()
	sg := e.nsg(t)
	found := false
	for _, r := range sg.Properties.SecurityRules {
		if *r.Name == name {
			change(r.Properties)
			found = true
		}
	}
	if !found {
		t.Fatalf("no rule %s to tamper with", name)
	}
	if _, err := e.clients.SecurityGroup.CreateOrUpdate(context.Background(), devenv.ResourceGroup, devenv.SecurityGroupName, *sg, ""); err != nil {
		t.Fatal(err)
	}
}

// restricted is a Service's edit allowing 203.0.113.0/24 to dst on TCP 80.
func restricted(dst string) securitygroup.Edit {
	return securitygroup.Edit{Service: "ns/" + dst, Release: securitygroup.Release{Addresses: []string{dst}},
		Allow: []securitygroup.Allow{{Family: securitygroup.IPv4, Protocol: "Tcp", Sources: []string{"203.0.113.0/24"}, Ports: []string{"80"}, Destinations: []string{dst}}}}
}

// A rule of azlb's whose source was widened out of band (issue 37, item 4)
// is never renamed to the name of its new content and kept: the next write
// of any Service rewrites it to what its name stands for (the writer saw
// it before), or, for a writer that never saw it (a restart), removes it.
func TestTamperedSourceIsNotLaundered(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			e := start(t)
			ctx := context.Background()
			if _, err := e.store.Update(ctx, restricted("20.0.0.1")); err != nil {
				t.Fatal(err)
			}
			name := securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"203.0.113.0/24"}, []string{"80"})
			open := securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"*"}, []string{"80"})
			e.tamper(t, name, func(p *armnetwork.SecurityRulePropertiesFormat) {
				p.SourceAddressPrefix, p.SourceAddressPrefixes = ptr.To("*"), nil
			})
			s := e.store
			if restart {
				var err error
				if s, err = securitygroup.New(securitygroup.Options{Client: e.clients.SecurityGroup, ResourceGroup: devenv.ResourceGroup, Name: devenv.SecurityGroupName}); err != nil {
					t.Fatal(err)
				}
				rctx, cancel := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() { defer close(done); s.Run(rctx) }()
				defer func() { cancel(); <-done }()
			}
			// An unrelated Service's write.
			res, err := s.Update(ctx, web("20.0.0.2"))
			if err != nil || !res.Written || len(res.Repaired) != 1 || res.Repaired[0] != name {
				t.Fatalf("unrelated write: %+v %v, want it written, repairing %s", res, err, name)
			}
			rules := e.rules(t)
			if r := rules[open]; r != nil {
				t.Fatalf("the tampered rule was laundered into %s: %+v", open, *r.Properties)
			}
			for n, r := range rules {
				for _, src := range append([]string{ptr.Deref(r.Properties.SourceAddressPrefix, "")}, prefixes(r.Properties.SourceAddressPrefixes)...) {
					if src == "*" {
						t.Errorf("rule %s still allows source *", n)
					}
				}
			}
			r := rules[name]
			switch {
			case restart && r != nil:
				t.Errorf("a writer that never saw the rule kept it: %+v", *r.Properties)
			case !restart && (r == nil || ptr.Deref(r.Properties.SourceAddressPrefix, "") != "203.0.113.0/24" || fmt.Sprint(dests(r)) != "[20.0.0.1]"):
				t.Errorf("rule %s = %+v, want it rewritten to 203.0.113.0/24 -> 20.0.0.1", name, r)
			}
			// Nothing is left to repair: the next write of the same edit
			// writes nothing.
			before := e.puts()
			if res, err := s.Update(ctx, web("20.0.0.2")); err != nil || res.Written || len(res.Repaired) != 0 {
				t.Fatalf("repeat: %+v %v", res, err)
			}
			if e.puts() != before {
				t.Error("a repaired NSG was written again")
			}
		})
	}
}

func prefixes(l []*string) []string {
	var out []string
	for _, s := range l {
		out = append(out, ptr.Deref(s, ""))
	}
	return out
}

// Other ways of changing azlb's rules out of band are rewritten or removed
// at the next write too, and never kept: a deny-all made an allow, a
// destination that is no address, an allow rule made outbound or a deny.
func TestTamperedRulesRewritten(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	edit := restricted("20.0.0.1")
	edit.Deny = []securitygroup.Deny{{Family: securitygroup.IPv4, Destinations: []string{"20.0.0.1"}}}
	if _, err := e.store.Update(ctx, edit); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Update(ctx, web("20.0.0.3")); err != nil {
		t.Fatal(err)
	}
	allow := securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"203.0.113.0/24"}, []string{"80"})
	internet := securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"Internet"}, []string{"80", "443"})
	deny := securitygroup.DenyRuleName(securitygroup.IPv4)
	e.tamper(t, deny, func(p *armnetwork.SecurityRulePropertiesFormat) {
		p.Access = ptr.To(armnetwork.SecurityRuleAccessAllow)
	})
	e.tamper(t, allow, func(p *armnetwork.SecurityRulePropertiesFormat) {
		p.DestinationAddressPrefix, p.DestinationAddressPrefixes = nil, []*string{ptr.To("20.0.0.1"), ptr.To("20.0.0.0/8")}
	})
	e.tamper(t, internet, func(p *armnetwork.SecurityRulePropertiesFormat) {
		p.Direction = ptr.To(armnetwork.SecurityRuleDirectionOutbound)
	})
	res, err := e.store.Update(ctx, web("20.0.0.2"))
	if err != nil || !res.Written || len(res.Repaired) != 3 {
		t.Fatalf("unrelated write: %+v %v, want 3 rules repaired", res, err)
	}
	rules := e.rules(t)
	if r := rules[deny]; r == nil || *r.Properties.Access != armnetwork.SecurityRuleAccessDeny || fmt.Sprint(dests(r)) != "[20.0.0.1]" {
		t.Errorf("deny-all = %+v, want it denying again", r)
	}
	if r := rules[allow]; r == nil || fmt.Sprint(dests(r)) != "[20.0.0.1]" {
		t.Errorf("allow = %+v, want destination 20.0.0.1 only", r)
	}
	// The outbound rule goes; the unrelated write's own rule is inbound.
	for n, r := range rules {
		if *r.Properties.Direction != armnetwork.SecurityRuleDirectionInbound {
			t.Errorf("rule %s is %s", n, *r.Properties.Direction)
		}
	}
	if r := rules[internet]; r == nil || fmt.Sprint(dests(r)) != "[20.0.0.2]" {
		t.Errorf("Internet rule = %+v, want only the unrelated write's 20.0.0.2 (20.0.0.3's outbound copy removed)", r)
	}
}

// Check applies an edit to the last copy and reports what its round would:
// a LimitError over Azure's limits, nothing otherwise; it writes nothing.
func TestCheck(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	big := bigEdit()
	var le *securitygroup.LimitError
	if err := e.store.Check(ctx, big); !errors.As(err, &le) || le.Max != securitygroup.MaxSourcePrefixes {
		t.Fatalf("Check of an edit over the limit: %v, want a LimitError", err)
	}
	if err := e.store.Check(ctx, web("20.0.0.1")); err != nil {
		t.Fatalf("Check of a small edit: %v", err)
	}
	if n := e.puts(); n != 0 {
		t.Fatalf("Check wrote the NSG %d times", n)
	}
}

// Narrow keeps a Service's destinations in the rules whose sources it
// accepts and takes them out of the others, leaving deny-all rules; its
// own allows and deny are added as usual.
func TestNarrow(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	edit := restricted("20.0.0.1")
	edit.Allow = append(edit.Allow, securitygroup.Allow{Family: securitygroup.IPv4, Protocol: "Tcp", Sources: []string{"Internet"}, Ports: []string{"80"}, Destinations: []string{"20.0.0.1"}})
	if _, err := e.store.Update(ctx, edit); err != nil {
		t.Fatal(err)
	}
	narrow := securitygroup.Edit{Service: "ns/a", Release: securitygroup.Release{Addresses: []string{"20.0.0.1"}},
		Narrow: func(_ securitygroup.Family, _ string, sources []string) bool {
			return fmt.Sprint(sources) == "[203.0.113.0/24]"
		},
		Deny: []securitygroup.Deny{{Family: securitygroup.IPv4, Destinations: []string{"20.0.0.1"}}}}
	if res, err := e.store.Update(ctx, narrow); err != nil || !res.Changed {
		t.Fatalf("narrow: %+v %v", res, err)
	}
	rules := e.rules(t)
	if r := rules[securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"Internet"}, []string{"80"})]; r != nil {
		t.Errorf("the Internet rule stayed: %+v", *r.Properties)
	}
	if r := rules[securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"203.0.113.0/24"}, []string{"80"})]; r == nil || fmt.Sprint(dests(r)) != "[20.0.0.1]" {
		t.Errorf("the accepted rule = %+v, want it kept", r)
	}
	if rules[securitygroup.DenyRuleName(securitygroup.IPv4)] == nil {
		t.Error("no deny-all")
	}
	// Narrowing again changes nothing.
	if res, err := e.store.Update(ctx, narrow); err != nil || res.Changed || res.Written {
		t.Fatalf("narrow again: %+v %v", res, err)
	}
	// Drop takes an address out of every rule, narrowed or not, the
	// deny-all included.
	both := restricted("203.0.113.20")
	both.Deny = []securitygroup.Deny{{Family: securitygroup.IPv4, Destinations: []string{"203.0.113.20"}}}
	if _, err := e.store.Update(ctx, both); err != nil {
		t.Fatal(err)
	}
	narrow.Drop = []string{"203.0.113.20"}
	if res, err := e.store.Update(ctx, narrow); err != nil || !res.Changed {
		t.Fatalf("narrow with a drop: %+v %v", res, err)
	}
	for name, r := range e.rules(t) {
		if slices.Contains(dests(r), "203.0.113.20") {
			t.Errorf("rule %s kept the dropped address: %v", name, dests(r))
		}
	}
	if r := e.rules(t)[securitygroup.AllowRuleName(securitygroup.IPv4, "Tcp", []string{"203.0.113.0/24"}, []string{"80"})]; r == nil || fmt.Sprint(dests(r)) != "[20.0.0.1]" {
		t.Errorf("the accepted rule = %+v, want 20.0.0.1 kept", r)
	}
}
