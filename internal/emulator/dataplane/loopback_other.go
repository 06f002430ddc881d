//go:build !linux

package dataplane

import (
	"errors"
	"net/netip"
)

// Only Linux makes a whole IPv6 prefix local (a route of type local on
// lo): elsewhere IPv6 is served on ::1 only.

func setFreeBind(uintptr) error { return nil }

func routeLocal(netip.Addr) (bool, error) {
	return false, errors.New("IPv6 prefixes routed to loopback are only looked up on Linux")
}
