//go:build linux && !amd64

package dataplane

import "syscall"

// sysSetns is setns(2).
const sysSetns = syscall.SYS_SETNS
