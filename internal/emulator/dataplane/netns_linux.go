package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"syscall"
)

// nsHandle is an open network namespace and the process's own, to switch
// a thread into the first and back.
type nsHandle struct {
	target, host *os.File
}

func openNetNS(path string) (*nsHandle, error) {
	target, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data plane network: %w", err)
	}
	var st syscall.Statfs_t
	const nsfsMagic = 0x6e736673
	if err := syscall.Fstatfs(int(target.Fd()), &st); err != nil || st.Type != nsfsMagic {
		_ = target.Close()
		return nil, fmt.Errorf("data plane network: %s is not a network namespace file", path)
	}
	host, err := os.Open("/proc/self/ns/net")
	if err != nil {
		_ = target.Close()
		return nil, err
	}
	return &nsHandle{target: target, host: host}, nil
}

func (h *nsHandle) close() {
	_ = h.target.Close()
	_ = h.host.Close()
}

func setns(f *os.File) error {
	_, _, e := syscall.RawSyscall(sysSetns, f.Fd(), syscall.CLONE_NEWNET, 0)
	if e != 0 {
		return e
	}
	return nil
}

// do runs fn on a thread switched into the namespace: sockets fn creates
// belong to it for their whole life, whichever thread uses them later.
// The thread is switched back before it serves anything else; if that
// fails, the thread ends with its goroutine (it stays locked).
func (h *nsHandle) do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := setns(h.target); err != nil {
			errc <- fmt.Errorf("enter network namespace %s: %w", h.target.Name(), err)
			return // the thread is discarded
		}
		err := fn()
		if rerr := setns(h.host); rerr != nil {
			errc <- errors.Join(err, fmt.Errorf("leave network namespace: %w", rerr))
			return // the thread is discarded
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// routeGet asks the kernel (RTM_GETROUTE, as `ip route get`) how it
// reaches a: the route's type, output interface and gateway. An address
// with no route is an error.
func routeGet(a netip.Addr) (rtType byte, oif uint32, gw netip.Addr, err error) {
	family, bits := syscall.AF_INET6, 128
	if a.Is4() {
		family, bits = syscall.AF_INET, 32
	}
	rt := make([]byte, syscall.SizeofRtMsg)
	rt[0], rt[1] = byte(family), byte(bits)
	msgs, err := netlinkDo(syscall.RTM_GETROUTE, 0, rt, attr(syscall.RTA_DST, a.AsSlice()))
	if err != nil {
		return 0, 0, netip.Addr{}, err
	}
	for _, m := range msgs {
		if m.Header.Type != syscall.RTM_NEWROUTE || len(m.Data) < syscall.SizeofRtMsg {
			continue
		}
		rtType = m.Data[7]
		for b := m.Data[syscall.SizeofRtMsg:]; len(b) >= syscall.SizeofRtAttr; {
			l := int(binary.NativeEndian.Uint16(b))
			if l < syscall.SizeofRtAttr || l > len(b) {
				break
			}
			v := b[syscall.SizeofRtAttr:l]
			switch binary.NativeEndian.Uint16(b[2:]) {
			case syscall.RTA_OIF:
				if len(v) >= 4 {
					oif = binary.NativeEndian.Uint32(v)
				}
			case syscall.RTA_GATEWAY:
				gw, _ = netip.AddrFromSlice(v)
			}
			b = b[min((l+3)&^3, len(b)):]
		}
		return rtType, oif, gw, nil
	}
	return 0, 0, netip.Addr{}, errors.New("no route in the kernel's answer")
}

// routed reports whether the current namespace has a route to a.
func routed(a netip.Addr) (bool, error) {
	_, _, _, err := routeGet(a)
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return false, nil
	}
	return err == nil, err
}

// Policy routing of floating IP flows (netlink, in the namespace): a rule
// `fwmark M lookup M` and in table M a default route through the member,
// so that a flow marked M reaches the member with the frontend's address
// as its destination.
const (
	memberRulePriority = 200
	fraTable           = 15 // FRA_TABLE
	fraPriority        = 6  // FRA_PRIORITY
	fraFwmark          = 10 // FRA_FWMARK
	fraFwmask          = 16 // FRA_FWMASK
	frActToTbl         = 1  // FR_ACT_TO_TBL
	rtaTable           = 15 // RTA_TABLE
	rtprotStatic       = 4
)

func addMemberRoute(member netip.Addr, mark uint32) error {
	_, oif, gw, err := routeGet(member)
	if err != nil {
		return fmt.Errorf("no route to the member: %w", err)
	}
	if !gw.IsValid() {
		gw = member // on the namespace's own link
	}
	_ = delMemberRoute(member, mark) // idempotent: a rule added twice would be there twice
	family := familyOf(member)
	rt := make([]byte, syscall.SizeofRtMsg)
	rt[0] = family
	rt[5], rt[6], rt[7] = rtprotStatic, syscall.RT_SCOPE_UNIVERSE, syscall.RTN_UNICAST // protocol, scope, type
	oifb := make([]byte, 4)
	binary.NativeEndian.PutUint32(oifb, oif)
	if _, err := netlinkDo(syscall.RTM_NEWROUTE, syscall.NLM_F_CREATE|syscall.NLM_F_REPLACE, rt,
		attr(rtaTable, u32(mark)), attr(syscall.RTA_GATEWAY, gw.AsSlice()), attr(syscall.RTA_OIF, oifb)); err != nil {
		return fmt.Errorf("route: %w", err)
	}
	if _, err := netlinkDo(syscall.RTM_NEWRULE, syscall.NLM_F_CREATE|syscall.NLM_F_EXCL, ruleHdr(family), ruleAttrs(mark)...); err != nil {
		return fmt.Errorf("rule: %w", err)
	}
	return nil
}

func delMemberRoute(member netip.Addr, mark uint32) error {
	family := familyOf(member)
	_, rerr := netlinkDo(syscall.RTM_DELRULE, 0, ruleHdr(family), ruleAttrs(mark)...)
	rt := make([]byte, syscall.SizeofRtMsg)
	rt[0] = family
	rt[6] = syscall.RT_SCOPE_NOWHERE // scope: any
	_, terr := netlinkDo(syscall.RTM_DELROUTE, 0, rt, attr(rtaTable, u32(mark)))
	return errors.Join(rerr, terr)
}

func familyOf(a netip.Addr) byte {
	if a.Unmap().Is4() {
		return syscall.AF_INET
	}
	return syscall.AF_INET6
}

// ruleHdr is a struct fib_rule_hdr: family, lengths, tos, table (in
// FRA_TABLE instead), reserved, action, flags.
func ruleHdr(family byte) []byte {
	h := make([]byte, 12)
	h[0], h[7] = family, frActToTbl
	return h
}

func ruleAttrs(mark uint32) [][]byte {
	return [][]byte{attr(fraPriority, u32(memberRulePriority)), attr(fraFwmark, u32(mark)),
		attr(fraFwmask, u32(0xffffffff)), attr(fraTable, u32(mark))}
}

func u32(v uint32) []byte {
	b := make([]byte, 4)
	binary.NativeEndian.PutUint32(b, v)
	return b
}

// attr encodes one netlink attribute (padded to 4 bytes).
func attr(typ uint16, v []byte) []byte {
	n := syscall.SizeofRtAttr + len(v)
	b := make([]byte, (n+3)&^3)
	binary.NativeEndian.PutUint16(b[0:], uint16(n))
	binary.NativeEndian.PutUint16(b[2:], typ)
	copy(b[syscall.SizeofRtAttr:], v)
	return b
}

// netlinkDo sends one rtnetlink request (with an acknowledgement asked
// for) in the current thread's namespace and returns the answers; a
// negative acknowledgement is returned as its errno.
func netlinkDo(typ uint16, flags uint16, body []byte, attrs ...[]byte) ([]syscall.NetlinkMessage, error) {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, syscall.NETLINK_ROUTE)
	if err != nil {
		return nil, err
	}
	defer func() { _ = syscall.Close(fd) }()
	if err := syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return nil, err
	}
	req := make([]byte, syscall.SizeofNlMsghdr, 256)
	req = append(req, body...)
	for _, a := range attrs {
		req = append(req, a...)
	}
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], typ)
	ne.PutUint16(req[6:], syscall.NLM_F_REQUEST|syscall.NLM_F_ACK|flags)
	ne.PutUint32(req[8:], 1)
	if err := syscall.Sendto(fd, req, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return nil, err
	}
	var out []syscall.NetlinkMessage
	for {
		// A buffer per read: the messages kept point into it, and the
		// next read (the acknowledgement) must not overwrite them.
		buf := make([]byte, 1<<16)
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if m.Header.Type == syscall.NLMSG_ERROR {
				if len(m.Data) >= 4 {
					if errno := int32(ne.Uint32(m.Data)); errno != 0 {
						return out, syscall.Errno(-errno)
					}
				}
				return out, nil // the acknowledgement ends the answer
			}
			out = append(out, m)
		}
	}
}

// sockopts sets what a socket of the namespace needs: IP_TRANSPARENT (to
// bind an address that is not the namespace's: a frontend, a client, the
// probe source), SO_REUSEADDR (flows of one client port to several
// frontends each bind it), and the packet mark.
func sockopts(a netip.Addr, mark uint32) func(string, string, syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			level, opt := syscall.SOL_IP, syscall.IP_TRANSPARENT
			if a.IsValid() && !a.Unmap().Is4() {
				level, opt = syscall.SOL_IPV6, ipv6Transparent
			}
			if serr = syscall.SetsockoptInt(int(fd), level, opt, 1); serr != nil {
				serr = fmt.Errorf("transparent socket: %w", serr)
				return
			}
			if serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); serr != nil {
				return
			}
			if mark != 0 {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_MARK, int(mark))
			}
		})
		if err != nil {
			return err
		}
		return serr
	}
}

// ipv6Transparent is IPV6_TRANSPARENT (linux/in6.h).
const ipv6Transparent = 75
