package dataplane

import (
	"net/netip"
	"strconv"
	"testing"
)

// Rendezvous hashing: removing a member moves only the flows it had.
func TestPickMovesOnlyTheFlowsOfALeavingMember(t *testing.T) {
	members := func(n int) []memberRT {
		var ms []memberRT
		for i := 1; i <= n; i++ {
			ms = append(ms, memberRT{Member: Member{Name: strconv.Itoa(i), Addr: netip.AddrFrom4([4]byte{127, 0, 9, byte(i)})}})
		}
		return ms
	}
	all, fewer := members(4), members(3)
	dst := netip.MustParseAddrPort("127.0.9.250:80")
	counts := map[string]int{}
	for port := 1000; port < 3000; port++ {
		src := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
		i, ok := pick(all, false, false, DistributionDefault, protoTCP, src, dst)
		j, ok2 := pick(fewer, false, false, DistributionDefault, protoTCP, src, dst)
		if !ok || !ok2 {
			t.Fatal("no member picked")
		}
		counts[all[i].Name]++
		if all[i].Name != "4" && all[i].Name != fewer[j].Name {
			t.Fatalf("flow from %v moved from %s to %s though its member stayed", src, all[i].Name, fewer[j].Name)
		}
	}
	for _, m := range all {
		if c := counts[m.Name]; c < 300 {
			t.Errorf("member %s got %d of 2000 flows: %v", m.Name, c, counts)
		}
	}
}
