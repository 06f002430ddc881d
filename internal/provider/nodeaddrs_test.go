package provider

import (
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/azlb/azlb/internal/testutil"
)

// The book gives canonical addresses per family, skips what is not an
// address, keeps every address seen, and shares its list of them until a
// new one arrives.
func TestNodeAddressBook(t *testing.T) {
	var b nodeAddressBook
	n1 := testutil.Node("n1", testutil.InternalIPs("10.0.0.1", "2001:DB8::0:1"))
	n2 := testutil.Node("n2", testutil.InternalIPs("10.0.0.2", "not-an-ip"))
	n2.Status.Addresses = append(n2.Status.Addresses, v1.NodeAddress{Type: v1.NodeExternalIP, Address: "20.0.0.2"})
	got := b.addresses([]*v1.Node{n1, n2})
	if !slices.Equal(got[v1.IPv4Protocol], []string{"10.0.0.1", "10.0.0.2"}) || !slices.Equal(got[v1.IPv6Protocol], []string{"2001:db8::1"}) {
		t.Fatalf("addresses: %v", got)
	}
	known := b.known(nil, []*v1.Node{n1})
	if len(known[v1.IPv4Protocol]) != 2 || len(known[v1.IPv6Protocol]) != 1 {
		t.Fatalf("known after n1 and n2: %v", known)
	}
	// Nothing new: the same list, not a rebuilt one.
	again := b.known([]*v1.Node{n1, n2})
	if &again[v1.IPv4Protocol][0] != &known[v1.IPv4Protocol][0] {
		t.Error("known was rebuilt with nothing new")
	}
	// A deleted node's address stays known; a new one joins.
	n3 := testutil.Node("n3", testutil.InternalIPs("10.0.0.3"))
	known = b.known([]*v1.Node{n3})
	v4 := slices.Sorted(slices.Values(known[v1.IPv4Protocol]))
	if !slices.Equal(v4, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}) {
		t.Fatalf("known after n3: %v", v4)
	}
	// Past the bound the memory starts again from the nodes given.
	b.max = 4
	for i := range 5 {
		b.known([]*v1.Node{testutil.Node(fmt.Sprintf("m%d", i), testutil.InternalIPs(fmt.Sprintf("10.1.0.%d", i)))})
	}
	if known = b.known([]*v1.Node{n3}); len(known[v1.IPv4Protocol]) > 4 {
		t.Fatalf("known past the bound: %v", known)
	}
}

// An address seen before costs no allocation of its own: a Service
// reconcile on 5,000 nodes allocates only the lists.
func TestNodeAddressBookAllocations(t *testing.T) {
	var b nodeAddressBook
	nodes := make([]*v1.Node, 5000)
	for i := range nodes {
		nodes[i] = testutil.Node(fmt.Sprintf("n%d", i), testutil.InternalIPs(fmt.Sprintf("10.%d.%d.%d", i/62500, i/250%250, 4+i%250)))
	}
	b.known(nodes)
	if n := testing.AllocsPerRun(10, func() { b.addresses(nodes) }); n > 3 {
		t.Errorf("addresses of 5,000 known nodes: %v allocations, want at most 3 (the map and its list)", n)
	}
	if n := testing.AllocsPerRun(10, func() { b.known(nodes) }); n != 0 {
		t.Errorf("known with nothing new: %v allocations, want 0", n)
	}
}
