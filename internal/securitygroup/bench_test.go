package securitygroup

import (
	"fmt"
	"testing"
)

// BenchmarkSecurityGroupLayout: 1,000 public Services (one address each,
// TCP 80 and 443) whose sources are drawn from 20 distinct sets of three
// ranges share rules: the NSG must fit Azure's limits. Reports the rule and
// prefix counts of the resulting NSG and the time to apply the 1,000 edits
// as one round does.
//
//	go test -run '^$' -bench SecurityGroupLayout ./internal/securitygroup/
func BenchmarkSecurityGroupLayout(b *testing.B) {
	const services, sets = 1000, 20
	edits := make([]*Edit, services)
	for i := range edits {
		set := i % sets
		src := []string{fmt.Sprintf("198.%d.0.0/16", set), fmt.Sprintf("10.%d.0.0/24", set), fmt.Sprintf("203.0.%d.0/28", set*16%256)}
		dst := fmt.Sprintf("20.40.%d.%d", i/250, i%250+1)
		edits[i] = &Edit{Service: fmt.Sprintf("ns/svc-%d", i), Release: Release{Addresses: []string{dst}},
			Allow: []Allow{{Family: IPv4, Protocol: "Tcp", Sources: src, Ports: []string{"80", "443"}, Destinations: []string{dst}}}}
	}
	b.ReportAllocs()
	for n := 0; n < b.N; n++ {
		m := newModel(nil, nil)
		for _, e := range edits {
			next := m.clone()
			next.apply(e)
			rules, _, err := next.render(e.Service)
			if err == nil {
				err = checkLimits(e.Service, rules)
			}
			if err != nil {
				b.Fatalf("%s: %v", e.Service, err)
			}
			m = next
		}
		rules, _, err := m.render("")
		if err != nil {
			b.Fatal(err)
		}
		src, dst := 0, 0
		for _, r := range rules {
			src += len(prefixes(r.Properties.SourceAddressPrefix, r.Properties.SourceAddressPrefixes))
			dst += len(prefixes(r.Properties.DestinationAddressPrefix, r.Properties.DestinationAddressPrefixes))
		}
		if len(rules) != sets {
			b.Fatalf("%d rules, want %d", len(rules), sets)
		}
		b.ReportMetric(float64(len(rules)), "rules")
		b.ReportMetric(float64(src), "source-prefixes")
		b.ReportMetric(float64(dst), "destination-prefixes")
	}
}
