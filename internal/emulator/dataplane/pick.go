package dataplane

import (
	"encoding/binary"
	"hash/fnv"
	"net/netip"
)

// memberRT is a member as the data plane uses it: its entry and, when the
// rule has a probe and the member is reachable, its health under that
// probe.
type memberRT struct {
	Member
	health *target
	stats  *memberStats
	// net is the network namespace the member is reached in (nil:
	// loopback); unreach marks a member the rule's network cannot reach
	// (outside its namespace's prefixes).
	net     *netNS
	unreach bool
}

// reach reports whether the data plane may connect to the member.
func (m *memberRT) reach() bool {
	return !m.unreach && (m.net != nil || reachable(m.dialAddr()))
}

// eligible reports whether m may take a new flow of a rule (probed says
// whether the rule has a probe). Azure applies admin states only on rules
// with a probe; without one every member takes new flows.
func (m *memberRT) eligible(probed bool) bool {
	if !m.reach() {
		return false
	}
	if !probed {
		return true
	}
	switch m.AdminState {
	case AdminUp:
		return true
	case AdminDown:
		return false
	}
	return m.health != nil && m.health.healthy()
}

// pick chooses the member of a new flow from src to dst: among the
// eligible members, the one with the highest hash of the flow's fields
// (as the rule's distribution mode selects them) and the member's address
// (rendezvous hashing, so a flow's choice moves only when its member
// leaves). allProbedUp lets every member that is not Down take flows when
// none is probed up.
func pick(members []memberRT, probed, allProbedUp bool, dist Distribution, proto byte, src, dst netip.AddrPort) (int, bool) {
	h := fnv.New64a()
	_, _ = h.Write(flowKey(dist, proto, src, dst))
	key := h.Sum64()
	best, bestScore := -1, uint64(0)
	consider := func(i int) {
		s := score(key, members[i].Addr)
		if best < 0 || s > bestScore {
			best, bestScore = i, s
		}
	}
	for i := range members {
		if members[i].eligible(probed) {
			consider(i)
		}
	}
	if best < 0 && probed && allProbedUp {
		for i := range members {
			if members[i].reach() && members[i].AdminState != AdminDown {
				consider(i)
			}
		}
	}
	return best, best >= 0
}

// IP protocol numbers, as hashed.
const (
	protoTCP = 6
	protoUDP = 17
)

// flowKey serializes the fields of a flow the distribution mode hashes.
func flowKey(dist Distribution, proto byte, src, dst netip.AddrPort) []byte {
	b := make([]byte, 0, 2*16+2*2+1)
	b = append(b, src.Addr().AsSlice()...)
	b = append(b, dst.Addr().AsSlice()...)
	switch dist {
	case DistributionSourceIP:
	case DistributionSourceIPProtocol:
		b = append(b, proto)
	default:
		b = append(b, byte(src.Port()>>8), byte(src.Port()), byte(dst.Port()>>8), byte(dst.Port()), proto)
	}
	return b
}

// score is the rendezvous weight of a member for a flow hash.
func score(key uint64, member netip.Addr) uint64 {
	a := member.As16()
	return mix(key ^ mix(binary.BigEndian.Uint64(a[:8])^mix(binary.BigEndian.Uint64(a[8:]))))
}

// mix is the splitmix64 finalizer: every input bit affects every output bit.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
