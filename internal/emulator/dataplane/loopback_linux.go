package dataplane

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"syscall"
)

// ipv6FreeBind is IPV6_FREEBIND (linux/in6.h), which package syscall
// does not name.
const ipv6FreeBind = 78

func setFreeBind(fd uintptr) error {
	return syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IPV6, ipv6FreeBind, 1)
}

// routeLocal asks the kernel (rtnetlink RTM_GETROUTE, as `ip route get`)
// whether it delivers packets to a locally: a route of type local.
func routeLocal(a netip.Addr) (bool, error) {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, syscall.NETLINK_ROUTE)
	if err != nil {
		return false, err
	}
	defer func() { _ = syscall.Close(fd) }()
	if err := syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return false, err
	}
	family, bits := syscall.AF_INET6, 128
	if a.Is4() {
		family, bits = syscall.AF_INET, 32
	}
	dst := a.AsSlice()
	attrLen := syscall.SizeofRtAttr + len(dst)
	req := make([]byte, syscall.SizeofNlMsghdr+syscall.SizeofRtMsg+attrLen)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], syscall.RTM_GETROUTE)
	ne.PutUint16(req[6:], syscall.NLM_F_REQUEST)
	ne.PutUint32(req[8:], 1) // sequence number
	rt := req[syscall.SizeofNlMsghdr:]
	rt[0], rt[1] = byte(family), byte(bits) // rtm_family, rtm_dst_len
	attr := rt[syscall.SizeofRtMsg:]
	ne.PutUint16(attr[0:], uint16(attrLen))
	ne.PutUint16(attr[2:], syscall.RTA_DST)
	copy(attr[syscall.SizeofRtAttr:], dst)
	if err := syscall.Sendto(fd, req, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return false, err
	}
	buf := make([]byte, 1<<16)
	n, _, err := syscall.Recvfrom(fd, buf, 0)
	if err != nil {
		return false, err
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return false, err
	}
	for _, m := range msgs {
		switch m.Header.Type {
		case syscall.NLMSG_ERROR:
			if len(m.Data) >= 4 {
				if errno := int32(ne.Uint32(m.Data)); errno != 0 {
					// No route at all (ENETUNREACH and the like): not local.
					return false, nil
				}
			}
		case syscall.RTM_NEWROUTE:
			if len(m.Data) < syscall.SizeofRtMsg {
				return false, fmt.Errorf("short route message (%d bytes)", len(m.Data))
			}
			return m.Data[7] == syscall.RTN_LOCAL, nil // rtm_type
		}
	}
	return false, fmt.Errorf("no route in the kernel's answer")
}
