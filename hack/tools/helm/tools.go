//go:build tools

// Package tools pins the helm command in this wrapper module.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
