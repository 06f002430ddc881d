{{/*
Names are fixed: the controller manager's client identities are
ServiceAccounts the binary names (cmd/azlb-controller-manager), and a cluster
runs one azlb.
*/}}
{{- define "azlb.name" -}}azlb-controller-manager{{- end -}}

{{- define "azlb.labels" -}}
app.kubernetes.io/name: azlb
app.kubernetes.io/component: controller-manager
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "azlb.selectorLabels" -}}
app.kubernetes.io/name: azlb
app.kubernetes.io/component: controller-manager
{{- end -}}

{{/* The identities file: controllers, always and manager (see files/identities.yaml). */}}
{{- define "azlb.identities" -}}
{{- .Files.Get "files/identities.yaml" -}}
{{- end -}}

{{/*
azlb.enabledIdentities: a YAML map name -> identity of every identity that
runs: the selected controllers and the ones that always exist. Fails on an
unknown controller name.
*/}}
{{- define "azlb.enabledIdentities" -}}
{{- $ids := include "azlb.identities" . | fromYaml -}}
{{- $out := dict -}}
{{- range $name := .Values.controllers -}}
{{- $id := get $ids.controllers $name -}}
{{- if not $id -}}
{{- fail (printf "controllers: %q is not a controller azlb knows (known: %s)" $name (keys $ids.controllers | sortAlpha | join ", ")) -}}
{{- end -}}
{{- $_ := set $out $name $id -}}
{{- end -}}
{{- range $name, $id := $ids.always -}}
{{- $_ := set $out $name $id -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{- define "azlb.image" -}}
{{- $registry := required "image.registry is required: the registry you pushed the images to (make push IMAGE_REGISTRY=...)" .Values.image.registry -}}
{{- if .Values.image.digest -}}
{{- printf "%s/%s@%s" (trimSuffix "/" $registry) .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s/%s:%s" (trimSuffix "/" $registry) .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* azlb.validate fails on values the chart cannot honour. */}}
{{- define "azlb.validate" -}}
{{- if ne .Release.Namespace "kube-system" -}}
{{- fail (printf "install azlb into kube-system (helm install --namespace kube-system), not %q: the controllers' ServiceAccounts, the leader-election lease and the API server's authentication ConfigMap live there" .Release.Namespace) -}}
{{- end -}}
{{- if not .Values.controllers -}}
{{- fail "controllers: name at least one controller" -}}
{{- end -}}
{{- if not (has .Values.cloudConfig.source (list "secret" "configMap" "hostPath")) -}}
{{- fail (printf "cloudConfig.source: %q is not one of secret, configMap, hostPath" .Values.cloudConfig.source) -}}
{{- end -}}
{{- if and .Values.workloadIdentity.enabled (not .Values.workloadIdentity.clientId) -}}
{{- fail "workloadIdentity.clientId is required when workloadIdentity.enabled is true" -}}
{{- end -}}
{{- with .Values.loadBalancerClass -}}
{{- if not (regexMatch "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$" .) -}}
{{- fail (printf "loadBalancerClass: %q is not a label-style name such as example.com/azlb (what spec.loadBalancerClass accepts)" .) -}}
{{- end -}}
{{- end -}}
{{- if lt (int .Values.replicas) 1 -}}
{{- fail "replicas: at least 1" -}}
{{- end -}}
{{- end -}}
