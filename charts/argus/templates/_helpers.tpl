{{/* Kubernetes 1.28 or newer (Chart.yaml says why it is checked here). `helm template`
(Argo CD passes the cluster's version; CI often does not) assumes v1.20.0 unless told. */}}
{{- define "argus.kubeVersion" -}}
{{- $version := .Capabilities.KubeVersion.Version -}}
{{- if semverCompare "<1.28.0-0" $version -}}
{{- fail (printf "Kubernetes %s is older than this chart needs (1.28 or newer: the webhook configuration's matchConditions). helm template does not ask a cluster and assumes v1.20.0: pass the cluster's version with --kube-version (e.g. --kube-version 1.30)" $version) -}}
{{- end -}}
{{- end }}

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

{{/* The uninstall hook's labels: the release's, but another app.kubernetes.io/name, so that
no selector of the chart's (the Services, the PodDisruptionBudget, the NetworkPolicy, the
monitors, the topology spread: argus.selectorLabels) takes the hook's pod for an operator. */}}
{{- define "argus.uninstallLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ printf "%s-uninstall" (include "argus.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: argus
app.kubernetes.io/component: uninstall
{{- end }}

{{- define "argus.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "argus.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image, registry included: a short name would be resolved by the container runtime
(docker.io, or a search list), so it might pull someone else's image of that name. */}}
{{- define "argus.image" -}}
{{- $repo := .Values.image.repository }}
{{- $host := index (splitList "/" $repo) 0 }}
{{- if or (eq $host $repo) (not (or (eq $host "localhost") (contains "." $host) (contains ":" $host))) }}
{{- fail (printf "image.repository=%s is a short name: a container runtime would pick the registry it is pulled from (docker.io or a search list); name the registry: registry.example.com/argus-operator (localhost/argus-operator for an image loaded on the nodes)" $repo) }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* Cluster-wide unless operator.watchNamespaces names namespaces. */}}
{{- define "argus.clusterwide" -}}
{{- if not .Values.operator.watchNamespaces }}true{{ end }}
{{- end }}

{{/* Replicas: replicaCount, else 2 with leader election and 1 without. */}}
{{- define "argus.replicas" -}}
{{- if kindIs "invalid" .Values.replicaCount }}
{{- ternary 2 1 .Values.leaderElection.enabled }}
{{- else }}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) }}
{{- fail "replicaCount > 1 needs leaderElection.enabled: without it every replica would act" }}
{{- end }}
{{- int .Values.replicaCount }}
{{- end }}
{{- end }}

{{- define "argus.leaseName" -}}
{{- printf "%s-leader" (include "argus.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "argus.webhookServiceName" -}}
{{- printf "%s-webhook" (include "argus.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The ValidatingWebhookConfiguration's name: per release (name and namespace). */}}
{{- define "argus.webhookConfigName" -}}
{{- printf "%s.%s.argus.io" (include "argus.fullname" .) .Release.Namespace }}
{{- end }}

{{- define "argus.webhookSecretName" -}}
{{- default (printf "%s-webhook-tls" (include "argus.fullname" .)) .Values.webhook.certificate.secretName }}
{{- end }}

{{/* The Service's DNS names: what the serving certificate must name. */}}
{{- define "argus.webhookDnsNames" -}}
{{- $svc := include "argus.webhookServiceName" . -}}
- {{ $svc }}
- {{ $svc }}.{{ .Release.Namespace }}
- {{ $svc }}.{{ .Release.Namespace }}.svc
- {{ $svc }}.{{ .Release.Namespace }}.svc.cluster.local
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
{{- with $o.verlConfig }}
- {{ printf "--verl-config=%v" . | quote }}
{{- end }}
{{- if kindIs "string" $o.hfHome }}
- {{ printf "--hf-home=%v" $o.hfHome | quote }}
{{- end }}
{{- with $o.entrypointShell }}
- {{ printf "--entrypoint-shell=%v" . | quote }}
{{- end }}
- {{ printf "--max-running=%v" (int $o.maxRunning) | quote }}
- {{ printf "--poll-interval=%v" $o.pollInterval | quote }}
- {{ printf "--ray-grace=%v" $o.rayGraceSeconds | quote }}
- {{ printf "--delete-grace=%v" $o.deleteGraceSeconds | quote }}
- {{ printf "--doctor-interval=%v" $o.doctorIntervalSeconds | quote }}
- {{ printf "--kuberay-dashboard-url=%v" $o.kuberayDashboardUrl | quote }}
- {{ printf "--gitops-tracking-label=%v" $o.gitopsTrackingLabel | quote }}
- {{ printf "--crd-check-interval=%v" $o.crdCheckIntervalSeconds | quote }}
- {{ printf "--queue-policy=%v" $o.queuePolicy | quote }}
- {{ printf "--fair-share-half-life=%v" $o.fairShare.halfLifeSeconds | quote }}
- {{ printf "--fair-share-max-wait=%v" $o.fairShare.maxWaitSeconds | quote }}
{{- if $o.preemption.enabled }}
- "--preemption"
- {{ printf "--preemption-min-runtime=%v" $o.preemption.minRuntimeSeconds | quote }}
{{- if not (kindIs "invalid" $o.preemption.fairShareRatio) }}
- {{ printf "--preemption-fair-share-ratio=%v" $o.preemption.fairShareRatio | quote }}
{{- end }}
{{- end }}
{{- if not $o.preemption.optOut }}
- "--no-preemption-opt-out"
{{- end }}
{{- if not (kindIs "invalid" $o.defaultGpuQuota) }}
- {{ printf "--default-gpu-quota=%v" $o.defaultGpuQuota | quote }}
{{- end }}
{{- if not (kindIs "invalid" $o.ttlSecondsAfterFinished) }}
- {{ printf "--ttl-seconds-after-finished=%v" $o.ttlSecondsAfterFinished | quote }}
{{- end }}
{{- if not (kindIs "invalid" $o.rayJobRetentionSeconds) }}
- {{ printf "--ray-job-retention=%v" $o.rayJobRetentionSeconds | quote }}
{{- end }}
{{- if and (eq $o.progress.source "file") (not (include "argus.sharedTreeVolume" .)) }}
{{- fail "operator.progress.source=file reads the jobs' log files from the shared tree: set sharedTree.volume (mounted read-only at operator.root)" }}
{{- end }}
- {{ printf "--progress-source=%v" $o.progress.source | quote }}
- {{ printf "--progress-interval=%v" $o.progress.intervalSeconds | quote }}
- {{ printf "--progress-metrics=%v" (join "," $o.progress.metrics) | quote }}
- {{ printf "--log-format=%v" $o.logFormat | quote }}
- {{ printf "--log-level=%v" $o.logLevel | quote }}
{{- range $o.entrypointAllowlist }}
- {{ printf "--allow-entrypoint=%v" . | quote }}
{{- end }}
{{- range $o.watchNamespaces }}
- {{ printf "--namespace=%v" . | quote }}
{{- end }}
- {{ printf "--health-port=%v" (int .Values.probes.port) | quote }}
- {{ printf "--watch-stale-seconds=%v" .Values.probes.watchStaleSeconds | quote }}
{{- if .Values.metrics.enabled }}
- {{ printf "--metrics-port=%v" (int .Values.metrics.port) | quote }}
{{- if .Values.metrics.tls.enabled }}
- --metrics-cert-file=/etc/argus/metrics-tls/tls.crt
- --metrics-key-file=/etc/argus/metrics-tls/tls.key
{{- end }}
{{- end }}
{{- if .Values.leaderElection.enabled }}
- --leader-elect
- {{ printf "--leader-election-namespace=%v" .Release.Namespace | quote }}
- {{ printf "--leader-election-name=%v" (include "argus.leaseName" .) | quote }}
- {{ printf "--leader-lease-seconds=%v" (int .Values.leaderElection.leaseSeconds) | quote }}
{{- end }}
{{- if .Values.webhook.enabled }}
- --webhook
- {{ printf "--webhook-port=%v" (int .Values.webhook.port) | quote }}
- --no-webhook-manage-config
- --webhook-cert-file=/etc/argus/webhook-tls/tls.crt
- --webhook-key-file=/etc/argus/webhook-tls/tls.key
{{- end }}
{{- if .Values.logsApi.enabled }}
- --logs-api
- {{ printf "--logs-api-port=%v" (int .Values.logsApi.port) | quote }}
- --logs-api-cert-file=/etc/argus/logs-api-tls/tls.crt
- --logs-api-key-file=/etc/argus/logs-api-tls/tls.key
- {{ printf "--logs-api-max-followers=%v" (int .Values.logsApi.maxFollowersPerUser) | quote }}
{{- if include "argus.sharedTreeVolume" . }}
- --logs-api-shared-tree
{{- end }}
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

{{/* The shared tree's Volume source (sharedTree.volume; logsApi.sharedTree.volume, the older
place, still counts), as YAML; empty: not mounted. */}}
{{- define "argus.sharedTreeVolume" -}}
{{- with (.Values.sharedTree.volume | default .Values.logsApi.sharedTree.volume) }}
{{- toYaml . }}
{{- end }}
{{- end }}
