{{/* The operator's RBAC rules, used by rbac.yaml. */}}
{{- define "argus.taskRules" -}}
# The ArgusTasks: kopf (the handlers) and the task cache list and watch them; kopf patches the
# object itself for its finalizer and its bookkeeping annotations.
- apiGroups: [argus.io]
  resources: [argustasks]
  verbs: [list, watch, patch]
# Their status: phase, conditions, Ray job (kopf's handler results and the reconciler).
- apiGroups: [argus.io]
  resources: [argustasks/status]
  verbs: [patch]
# Events on the tasks (kubectl describe): posted by the reconciler (core/v1 Events through
# the kubernetes client) and by kopf.
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- end }}
{{- define "argus.clusterRules" -}}
# Namespaces: kopf lists/watches them to follow the namespaces it serves; the operator reads
# a task's namespace for its argus.io/user label (who the task runs as), live, when it
# validates the task (handler and webhook).
- apiGroups: [""]
  resources: [namespaces]
  verbs: [get, list, watch]
{{- if .Values.rbac.watchCRDs }}
# kopf re-scans the served resources when a CRD appears or changes (read-only).
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [list, watch]
{{- end }}
{{- if .Values.webhook.enabled }}
# The admission webhook writes its ValidatingWebhookConfiguration (service, caBundle, failure policy):
# create it once (create cannot be limited to a name), then read and replace only that one.
- apiGroups: [admissionregistration.k8s.io]
  resources: [validatingwebhookconfigurations]
  verbs: [create]
- apiGroups: [admissionregistration.k8s.io]
  resources: [validatingwebhookconfigurations]
  resourceNames: [{{ .Values.webhook.configName | quote }}]
  verbs: [get, update]
{{- end }}
{{- end }}

{{- define "argus.leaseRules" -}}
# Leader election: the argus-operator Lease in the release's namespace. Created once (create
# cannot be limited to a name), then read and renewed (update) only that one.
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [create]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  resourceNames: [argus-operator]
  verbs: [get, update]
{{- end }}
