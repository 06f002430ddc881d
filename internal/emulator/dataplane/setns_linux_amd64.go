package dataplane

// sysSetns is setns(2) on linux/amd64 (package syscall does not name it
// there).
const sysSetns = 308
