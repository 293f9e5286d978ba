{{/* Names and labels. */}}
{{- define "argus.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "argus.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "argus.selectorLabels" -}}
app.kubernetes.io/name: {{ include "argus.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "argus.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "argus.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: argus
{{- end }}

{{- define "argus.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "argus.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "argus.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Cluster-wide unless operator.watchNamespaces names namespaces. */}}
{{- define "argus.clusterwide" -}}
{{- if not .Values.operator.watchNamespaces }}true{{ end }}
{{- end }}

{{- define "argus.webhookServiceName" -}}
{{- printf "%s-webhook" (include "argus.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "argus.webhookSecretName" -}}
{{- default (printf "%s-webhook-tls" (include "argus.fullname" .)) .Values.webhook.certificate.secretName }}
{{- end }}

{{/* Does the pod mount a TLS Secret for the webhook? */}}
{{- define "argus.webhookMountsSecret" -}}
{{- if and .Values.webhook.enabled (ne .Values.webhook.certificate.source "self-signed") }}true{{ end }}
{{- end }}

{{/* The operator's command line (argus-operator flags; `argus-operator --help`). */}}
{{- define "argus.args" -}}
{{- $o := .Values.operator -}}
- {{ printf "--ray-address=%v" $o.rayAddress | quote }}
{{- if include "argus.rayTokenSecret" . }}
- "--ray-token-file=/etc/argus/ray-token/token"
{{- end }}
- {{ printf "--worker-resource=%v" $o.workerResource | quote }}
- {{ printf "--root=%v" $o.root | quote }}
{{- with $o.verlCodePath }}
- {{ printf "--verl-code-path=%v" . | quote }}
{{- end }}
{{- with $o.entrypointShell }}
- {{ printf "--entrypoint-shell=%v" . | quote }}
{{- end }}
- {{ printf "--max-running=%v" (int $o.maxRunning) | quote }}
- {{ printf "--poll-interval=%v" $o.pollInterval | quote }}
- {{ printf "--ray-grace=%v" $o.rayGraceSeconds | quote }}
- {{ printf "--delete-grace=%v" $o.deleteGraceSeconds | quote }}
{{- range $o.entrypointAllowlist }}
- {{ printf "--allow-entrypoint=%v" . | quote }}
{{- end }}
{{- range $o.watchNamespaces }}
- {{ printf "--namespace=%v" . | quote }}
{{- end }}
- {{ printf "--liveness=http://0.0.0.0:%v/healthz" (int .Values.liveness.port) | quote }}
{{- if .Values.metrics.enabled }}
- {{ printf "--metrics-port=%v" (int .Values.metrics.port) | quote }}
{{- end }}
{{- if .Values.leaderElection.enabled }}
- --leader-elect
- {{ printf "--leader-election-namespace=%v" .Release.Namespace | quote }}
- {{ printf "--leader-lease-seconds=%v" (int .Values.leaderElection.leaseSeconds) | quote }}
{{- end }}
{{- if .Values.peering.enabled }}
- {{ printf "--peering=%v" .Values.peering.name | quote }}
- {{ printf "--priority=%v" (int .Values.peering.priority) | quote }}
{{- else }}
- --standalone
{{- end }}
{{- if .Values.webhook.enabled }}
- --webhook
- {{ printf "--webhook-service=%v" (include "argus.webhookServiceName" .) | quote }}
- {{ printf "--webhook-service-namespace=%v" .Release.Namespace | quote }}
- --webhook-service-port=443
- {{ printf "--webhook-port=%v" (int .Values.webhook.port) | quote }}
- {{ printf "--webhook-failure-policy=%v" .Values.webhook.failurePolicy | quote }}
- {{ printf "--webhook-timeout=%v" (int .Values.webhook.timeoutSeconds) | quote }}
- {{ printf "--webhook-config-name=%v" .Values.webhook.configName | quote }}
{{- if include "argus.webhookMountsSecret" . }}
- --webhook-cert-file=/etc/argus/webhook-tls/tls.crt
- --webhook-key-file=/etc/argus/webhook-tls/tls.key
{{- if eq .Values.webhook.certificate.source "cert-manager" }}
- --webhook-ca-file=/etc/argus/webhook-tls/ca.crt
{{- else if .Values.webhook.certificate.caKey }}
- {{ printf "--webhook-ca-file=/etc/argus/webhook-tls/%v" .Values.webhook.certificate.caKey | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- if $o.verbose }}
- --verbose
{{- end }}
{{- range $o.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/* The Secret holding the Ray cluster's token (operator.rayToken), if any: mounted at
/etc/argus/ray-token/token and passed as --ray-token-file. */}}
{{- define "argus.rayTokenSecret" -}}
{{- with .Values.operator.rayToken }}{{ .secretName }}{{ end }}
{{- end }}
