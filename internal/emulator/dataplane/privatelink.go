package dataplane

import (
	"encoding/binary"
	"net/netip"
	"strings"
)

// PrivateLink is one approved private endpoint connection to a Private
// Link Service: connections to the endpoint's address reach the members of
// the load balancing rules on the service's frontend, from the service's
// NAT address.
type PrivateLink struct {
	// ID names the connection (the private endpoint's id); derived rules
	// are named after it.
	ID string
	// Endpoint is the private endpoint's address (where consumers connect).
	Endpoint netip.Addr
	// Frontend is the address of the load balancer frontend the service
	// serves.
	Frontend netip.Addr
	// NAT is the service's (primary) NAT address: the source members see.
	NAT netip.Addr
	// ProxyProtocol: members get a PROXY protocol v2 header first.
	ProxyProtocol bool
	// LinkID is the connection's linkIdentifier, sent in the header's
	// Azure TLV.
	LinkID uint32
}

// UnservedPrivateLinkUDP is why a UDP rule reached through a private
// endpoint is not served: the data plane's private link relay is TCP only.
const UnservedPrivateLinkUDP = "UDP through a private endpoint is not served by the emulator's data plane (TCP is)"

// PrivateEndpointRules derives, for every link and every rule on the
// link's frontend, a rule listening on the endpoint's address and frontend
// port with the same members, probe and settings, whose flows come from
// the NAT address (SourceNAT). Rule ids are <rule id>|<link id>.
func PrivateEndpointRules(rules []Rule, links []PrivateLink) []Rule {
	var out []Rule
	for _, l := range links {
		if !l.Endpoint.IsValid() || !l.Frontend.IsValid() {
			continue
		}
		for _, r := range rules {
			if r.Frontend.Addr() != l.Frontend {
				continue
			}
			d := r
			d.ID = r.ID + "|" + strings.ToLower(l.ID)
			d.Frontend = netip.AddrPortFrom(l.Endpoint, r.Frontend.Port())
			d.SourceNAT, d.ProxyProtocol, d.LinkID = l.NAT, l.ProxyProtocol, l.LinkID
			d.Members = append([]Member(nil), r.Members...)
			if !l.NAT.IsValid() {
				d.Unserved = "the private link service has no NAT address"
			} else if r.Protocol == ProtocolUDP && d.Unserved == "" {
				d.Unserved = UnservedPrivateLinkUDP
			}
			out = append(out, d)
		}
	}
	return out
}

// PROXY protocol v2 (haproxy's proxy-protocol.txt): the signature, version
// 2 / PROXY, TCP over IPv4 or IPv6, the addresses, then TLVs. Azure adds
// a TLV of type 0xEE (subtype 0x01: the private endpoint's link id, a
// little-endian uint32).
var proxyV2Sig = []byte{0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A}

const (
	pp2TypeAzure          = 0xEE
	pp2SubtypeAzureLinkID = 0x01
)

// ProxyV2Header is the header a member gets first when proxy protocol is
// on: the consumer's address and port (src) and the endpoint's (dst).
func ProxyV2Header(src, dst netip.AddrPort, linkID uint32) []byte {
	sa, da := src.Addr().Unmap(), dst.Addr().Unmap()
	v6 := sa.Is6() || da.Is6()
	fam := byte(0x11) // AF_INET, STREAM
	alen := 12
	if v6 {
		fam, alen = 0x21, 36
		sa, da = netip.AddrFrom16(sa.As16()), netip.AddrFrom16(da.As16())
	}
	tlv := []byte{pp2TypeAzure, 0, 5, pp2SubtypeAzureLinkID, 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(tlv[4:], linkID)
	b := make([]byte, 0, 16+alen+len(tlv))
	b = append(b, proxyV2Sig...)
	b = append(b, 0x21, fam)
	b = binary.BigEndian.AppendUint16(b, uint16(alen+len(tlv)))
	b = append(b, sa.AsSlice()...)
	b = append(b, da.AsSlice()...)
	b = binary.BigEndian.AppendUint16(b, src.Port())
	b = binary.BigEndian.AppendUint16(b, dst.Port())
	return append(b, tlv...)
}
