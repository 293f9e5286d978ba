{{/* Serving certificates of the operator's two TLS servers, the admission webhook and the log
API. Each has the same three sources (webhook.certificate, logsApi.certificate):
helm (made by the chart), cert-manager (a Certificate), secret (the admin's own). */}}

{{/* The chart-made CA and serving certificate of one server, as YAML {caBundle, crt, key}
(base64): the Secret's own when it holds all three (an upgrade: helm's lookup), else made now.
Made once per render and kept in the render's context, so that the Secret, the caBundle and
the pods' checksum annotation (deployment.yaml) name the same certificate whichever template
asks first. `helm template` (and Argo CD) cannot look up: there every render makes a new pair.
Arguments: root, secretName, caName, commonName, dnsNames, validityDays. */}}
{{- define "argus.chartCertificate" -}}
{{- $root := .root -}}
{{- if not (hasKey $root "argusChartCertificates") -}}
{{- $_ := set $root "argusChartCertificates" (dict) -}}
{{- end -}}
{{- $made := $root.argusChartCertificates -}}
{{- if not (hasKey $made .secretName) -}}
{{- $existing := lookup "v1" "Secret" $root.Release.Namespace .secretName -}}
{{- $pair := dict -}}
{{- if and $existing $existing.data (hasKey $existing.data "ca.crt") (hasKey $existing.data "tls.crt") (hasKey $existing.data "tls.key") -}}
{{- $pair = dict "caBundle" (index $existing.data "ca.crt") "crt" (index $existing.data "tls.crt") "key" (index $existing.data "tls.key") -}}
{{- else -}}
{{- $days := int .validityDays -}}
{{- $ca := genCA .caName $days -}}
{{- $cert := genSignedCert .commonName nil .dnsNames $days $ca -}}
{{- $pair = dict "caBundle" ($ca.Cert | b64enc) "crt" ($cert.Cert | b64enc) "key" ($cert.Key | b64enc) -}}
{{- end -}}
{{- $_ := set $made .secretName $pair -}}
{{- end -}}
{{- index $made .secretName | toYaml -}}
{{- end }}

{{/* The chart-made certificate's Secret. Arguments: root, secretName, component, pair (from
argus.chartCertificate). */}}
{{- define "argus.chartCertificateSecret" -}}
apiVersion: v1
kind: Secret
metadata:
  name: {{ .secretName }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "argus.labels" .root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
type: kubernetes.io/tls
data:
  ca.crt: {{ .pair.caBundle }}
  tls.crt: {{ .pair.crt }}
  tls.key: {{ .pair.key }}
{{- end }}

{{/* A cert-manager Certificate for one server; without certManager.issuerRef it is signed by
the chart's self-signed Issuer (selfsigned-issuer.yaml). Arguments: root, name, secretName,
commonName, dnsNames, certManager (the values' certificate.certManager). */}}
{{- define "argus.certManagerCertificate" -}}
{{- $issuer := .certManager.issuerRef -}}
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "argus.labels" .root | nindent 4 }}
spec:
  secretName: {{ .secretName }}
  duration: {{ .certManager.duration }}
  renewBefore: {{ .certManager.renewBefore }}
  commonName: {{ .commonName }}
  dnsNames:
    {{- toYaml .dnsNames | nindent 4 }}
  privateKey:
    algorithm: ECDSA
    size: 256
    rotationPolicy: Always
  issuerRef:
    {{- if $issuer }}
    name: {{ $issuer.name }}
    kind: {{ default "Issuer" $issuer.kind }}
    group: {{ default "cert-manager.io" $issuer.group }}
    {{- else }}
    name: {{ include "argus.selfSignedIssuerName" .root }}
    kind: Issuer
    group: cert-manager.io
    {{- end }}
{{- end }}

{{- define "argus.selfSignedIssuerName" -}}
{{- printf "%s-selfsigned" (include "argus.fullname" .) }}
{{- end }}

{{/* "true" when an enabled server takes its certificate from cert-manager without an issuerRef. */}}
{{- define "argus.selfSignedIssuerNeeded" -}}
{{- range $server := list .Values.webhook .Values.logsApi }}
{{- if and $server.enabled (eq $server.certificate.source "cert-manager") (not $server.certificate.certManager.issuerRef) }}true{{ end }}
{{- end }}
{{- end }}

{{/* The log API's Service, its DNS names (what its serving certificate must name) and Secret. */}}
{{- define "argus.logsApiServiceName" -}}
{{- printf "%s-logs-api" (include "argus.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "argus.logsApiDnsNames" -}}
{{- $svc := include "argus.logsApiServiceName" . -}}
- {{ $svc }}
- {{ $svc }}.{{ .Release.Namespace }}
- {{ $svc }}.{{ .Release.Namespace }}.svc
- {{ $svc }}.{{ .Release.Namespace }}.svc.cluster.local
{{- end }}

{{- define "argus.logsApiSecretName" -}}
{{- default (printf "%s-logs-api-tls" (include "argus.fullname" .)) .Values.logsApi.certificate.secretName }}
{{- end }}

{{/* The log API's chart-made certificate, {caBundle, crt, key} (source helm only). */}}
{{- define "argus.logsApiChartCertificate" -}}
{{- $svc := include "argus.logsApiServiceName" . -}}
{{- include "argus.chartCertificate" (dict "root" . "secretName" (include "argus.logsApiSecretName" .)
      "caName" (printf "%s-logs-api-ca" (include "argus.fullname" .)) "commonName" (printf "%s.%s.svc" $svc .Release.Namespace)
      "dnsNames" (include "argus.logsApiDnsNames" . | fromYamlArray) "validityDays" .Values.logsApi.certificate.validityDays) }}
{{- end }}

{{/* /metrics over HTTPS (metrics.tls): the metrics Service's names, the Secret, and the chart-made
certificate (when metrics.tls.secretName is empty). */}}
{{- define "argus.metricsTls" -}}
{{- and .Values.metrics.enabled .Values.metrics.tls.enabled -}}
{{- end }}

{{- define "argus.metricsServiceName" -}}
{{- printf "%s-metrics" (include "argus.fullname" .) }}
{{- end }}

{{- define "argus.metricsSecretName" -}}
{{- default (printf "%s-metrics-tls" (include "argus.fullname" .)) .Values.metrics.tls.secretName }}
{{- end }}

{{- define "argus.metricsChartCertificate" -}}
{{- $svc := include "argus.metricsServiceName" . -}}
{{- $names := list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.cluster.local" $svc .Release.Namespace) -}}
{{- include "argus.chartCertificate" (dict "root" . "secretName" (include "argus.metricsSecretName" .)
      "caName" (printf "%s-metrics-ca" (include "argus.fullname" .)) "commonName" (printf "%s.%s.svc" $svc .Release.Namespace)
      "dnsNames" $names "validityDays" .Values.metrics.tls.validityDays) }}
{{- end }}

{{/* A Prometheus Operator endpoint's scheme and tlsConfig with metrics.tls: the CA from the
Secret (ca.crt), the Service's name as the name to verify. */}}
{{- define "argus.scrapeTls" -}}
{{- if eq (include "argus.metricsTls" .) "true" }}
scheme: https
tlsConfig:
  ca:
    secret:
      name: {{ include "argus.metricsSecretName" . }}
      key: ca.crt
  serverName: {{ printf "%s.%s.svc" (include "argus.metricsServiceName" .) .Release.Namespace }}
{{- end }}
{{- end }}
