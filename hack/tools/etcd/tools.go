//go:build tools

// Package tools pins the etcd server command in this wrapper module.
package tools

import _ "go.etcd.io/etcd/server/v3"
