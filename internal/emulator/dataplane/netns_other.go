//go:build !linux

package dataplane

import (
	"errors"
	"net/netip"
	"syscall"
)

// Network namespaces are Linux's.

type nsHandle struct{}

var errNoNetNS = errors.New("data plane network: network namespaces are only served on Linux")

func openNetNS(string) (*nsHandle, error)     { return nil, errNoNetNS }
func (h *nsHandle) close()                    {}
func (h *nsHandle) do(func() error) error     { return errNoNetNS }
func routed(netip.Addr) (bool, error)         { return false, errNoNetNS }
func addMemberRoute(netip.Addr, uint32) error { return errNoNetNS }
func delMemberRoute(netip.Addr, uint32) error { return errNoNetNS }

func sockopts(netip.Addr, uint32) func(string, string, syscall.RawConn) error {
	return func(string, string, syscall.RawConn) error { return errNoNetNS }
}
