package provider

import (
	"net/netip"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// maxSeenNodeAddresses bounds the memory of node addresses seen: past it
// the memory starts again from the current nodes (deleted nodes' addresses
// are then collected at the next start).
const maxSeenNodeAddresses = 50000

// nodeAddressBook remembers every node InternalIP seen since the start, in
// canonical form. Each Service reconcile needs the addresses of every node
// (5,000 in docs/reliability.md's scale run); with the book it neither
// parses nor allocates them again, it shares the book's strings, and the
// list of every address seen is rebuilt only when a new one arrives. What
// it returns is shared: callers never modify it.
type nodeAddressBook struct {
	mu sync.Mutex
	// spelled maps an address as a Node spells it to its canonical form
	// and family (an empty canonical form: not an address).
	spelled map[string]bookEntry
	// families holds each canonical address seen, with its family.
	families map[string]v1.IPFamily
	// all is every address of families by family; nil when stale.
	all map[v1.IPFamily][]string
	// max is maxSeenNodeAddresses (smaller in tests).
	max int
}

type bookEntry struct {
	canonical string
	family    v1.IPFamily
}

// lookup is the canonical form and family of an address as spelled,
// remembered (lock held).
func (b *nodeAddressBook) lookup(spelling string) bookEntry {
	if e, ok := b.spelled[spelling]; ok {
		return e
	}
	var e bookEntry
	if ip, err := netip.ParseAddr(spelling); err == nil {
		e.canonical, e.family = ip.String(), v1.IPv4Protocol
		if e.canonical == spelling {
			e.canonical = spelling // share the Node's string
		}
		if !ip.Is4() {
			e.family = v1.IPv6Protocol
		}
		if _, ok := b.families[e.canonical]; !ok {
			b.families[e.canonical] = e.family
			b.all = nil
		}
	}
	b.spelled[spelling] = e
	return e
}

// begin readies the maps (lock held): on first use, and anew once past
// the bound.
func (b *nodeAddressBook) begin() {
	limit := b.max
	if limit == 0 {
		limit = maxSeenNodeAddresses
	}
	if b.spelled == nil || len(b.spelled) > limit {
		b.spelled, b.families, b.all = map[string]bookEntry{}, map[string]v1.IPFamily{}, nil
	}
}

// addresses are the InternalIPs of the nodes, per family, canonical.
func (b *nodeAddressBook) addresses(nodes []*v1.Node) map[v1.IPFamily][]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.begin()
	out := map[v1.IPFamily][]string{}
	for _, n := range nodes {
		for _, a := range n.Status.Addresses {
			if a.Type != v1.NodeInternalIP {
				continue
			}
			if e := b.lookup(a.Address); e.canonical != "" {
				if out[e.family] == nil {
					out[e.family] = make([]string, 0, len(nodes))
				}
				out[e.family] = append(out[e.family], e.canonical)
			}
		}
	}
	return out
}

// known is every node address seen since the start (or since the bound
// was passed), those of the nodes given included.
func (b *nodeAddressBook) known(lists ...[]*v1.Node) map[v1.IPFamily][]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.begin()
	for _, nodes := range lists {
		for _, n := range nodes {
			for _, a := range n.Status.Addresses {
				if a.Type == v1.NodeInternalIP {
					b.lookup(a.Address)
				}
			}
		}
	}
	if b.all == nil {
		b.all = map[v1.IPFamily][]string{}
		for a, fam := range b.families {
			b.all[fam] = append(b.all[fam], a)
		}
	}
	return b.all
}
