package dataplane

import (
	"errors"
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
	typ, _, _, err := routeGet(a)
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return false, nil // no route at all (ENETUNREACH and the like): not local
	}
	if err != nil {
		return false, err
	}
	return typ == syscall.RTN_LOCAL, nil
}
