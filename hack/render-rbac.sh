#!/usr/bin/env bash
# Prints deploy/rbac.yaml: the chart's ServiceAccounts and RBAC with the
# default controllers, for `kubectl apply` without helm and for the sandbox.
# `make manifests` writes it; test/chart fails when the file drifts.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
cat <<'HEADER'
# Generated from the Helm chart deploy/helm/azlb by `make manifests`
# (hack/render-rbac.sh); edit deploy/helm/azlb/files/identities.yaml instead.
#
# The ServiceAccounts and least-privilege RBAC of azlb-controller-manager with
# its default controllers: the manager's identity (azlb-controller-manager)
# and one identity per controller, used with --use-service-account-credentials.
# The e2e suite runs the controller with exactly these identities.
HEADER
HOME="$home" HELM_CACHE_HOME="$home" HELM_CONFIG_HOME="$home" HELM_DATA_HOME="$home" \
  "$root/bin/helm" template azlb "$root/deploy/helm/azlb" --namespace kube-system \
  --set image.registry=unused \
  --show-only templates/serviceaccounts.yaml --show-only templates/rbac.yaml
