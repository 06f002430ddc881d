package emulator

import (
	"net/netip"
)

// publicIPs allocates public addresses and prefixes from the configured
// ranges. Single addresses are taken upwards from the start of a range,
// prefixes downwards from its end. Guarded by the emulator's state lock.
type publicIPs struct {
	v4, v6 addrPool
}

type addrPool struct {
	prefix   netip.Prefix
	next     netip.Addr          // cursor for single addresses
	used     map[netip.Addr]bool // addresses held by public IPs
	reserved []netip.Prefix      // prefixes held by public IP prefixes
}

func newPublicIPs(v4, v6 netip.Prefix) *publicIPs {
	return &publicIPs{
		v4: addrPool{prefix: v4, next: v4.Addr().Next(), used: map[netip.Addr]bool{}},
		v6: addrPool{prefix: v6, next: v6.Addr().Next(), used: map[netip.Addr]bool{}},
	}
}

func (p *publicIPs) pool(v6 bool) *addrPool {
	if v6 {
		return &p.v6
	}
	return &p.v4
}

// maxScan bounds allocation scans so a full range fails fast.
const maxScan = 1 << 17

func (a *addrPool) inReserved(x netip.Addr) bool {
	for _, r := range a.reserved {
		if r.Contains(x) {
			return true
		}
	}
	return false
}

// alloc takes the next free address of the range.
func (a *addrPool) alloc() (netip.Addr, bool) {
	x := a.next
	for i := 0; i < maxScan; i++ {
		if !x.IsValid() || !a.prefix.Contains(x) {
			x = a.prefix.Addr().Next()
		}
		if !a.used[x] && !a.inReserved(x) && !isBroadcast(a.prefix, x) {
			a.used[x] = true
			a.next = x.Next()
			return x, true
		}
		x = x.Next()
	}
	return netip.Addr{}, false
}

// allocIn takes a free address inside block (a public IP prefix).
func (a *addrPool) allocIn(block netip.Prefix) (netip.Addr, bool) {
	x := block.Addr()
	for i := 0; i < maxScan && block.Contains(x); i++ {
		if !a.used[x] {
			a.used[x] = true
			return x, true
		}
		x = x.Next()
	}
	return netip.Addr{}, false
}

func (a *addrPool) release(x netip.Addr) { delete(a.used, x) }

// allocPrefix takes an aligned free block of the given length from the end
// of the range.
func (a *addrPool) allocPrefix(bits int) (netip.Prefix, bool) {
	if bits < a.prefix.Bits() || bits > a.prefix.Addr().BitLen() {
		return netip.Prefix{}, false
	}
	size := a.prefix.Addr().BitLen() - bits
	if size > 16 {
		return netip.Prefix{}, false
	}
	// Walk aligned blocks downward from the last one.
	last := lastAddr(a.prefix)
	cand, err := last.Prefix(bits)
	if err != nil {
		return netip.Prefix{}, false
	}
	for i := 0; i < maxScan>>size+1; i++ {
		if !a.prefix.Contains(cand.Addr()) {
			return netip.Prefix{}, false
		}
		if a.blockFree(cand) {
			a.reserved = append(a.reserved, cand)
			return cand, true
		}
		prev := cand.Addr().Prev()
		if !prev.IsValid() {
			return netip.Prefix{}, false
		}
		cand, err = prev.Prefix(bits)
		if err != nil {
			return netip.Prefix{}, false
		}
	}
	return netip.Prefix{}, false
}

func (a *addrPool) blockFree(b netip.Prefix) bool {
	for _, r := range a.reserved {
		if r.Overlaps(b) {
			return false
		}
	}
	x := b.Addr()
	for b.Contains(x) {
		if a.used[x] {
			return false
		}
		x = x.Next()
		if !x.IsValid() {
			break
		}
	}
	return true
}

func (a *addrPool) releasePrefix(b netip.Prefix) {
	for i, r := range a.reserved {
		if r == b {
			a.reserved = append(a.reserved[:i:i], a.reserved[i+1:]...)
			return
		}
	}
}

// lastAddr is the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	bits := p.Bits()
	for i := range b {
		for j := 0; j < 8; j++ {
			if i*8+j >= bits {
				b[i] |= 0x80 >> j
			}
		}
	}
	x, _ := netip.AddrFromSlice(b)
	return x
}

func isBroadcast(p netip.Prefix, x netip.Addr) bool {
	return x.Is4() && x == lastAddr(p)
}

// privateAlloc picks the lowest free host address of subnet prefix sp,
// skipping the five addresses Azure reserves (network, .1-.3, broadcast).
func privateAlloc(sp netip.Prefix, used map[netip.Addr]bool) (netip.Addr, bool) {
	x := sp.Masked().Addr()
	for i := 0; i < 4; i++ {
		x = x.Next()
	}
	last := lastAddr(sp)
	for i := 0; i < maxScan && sp.Contains(x) && x != last; i++ {
		if !used[x] {
			return x, true
		}
		x = x.Next()
	}
	return netip.Addr{}, false
}
