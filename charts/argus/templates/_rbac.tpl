{{/* The operator's RBAC rules, used by rbac.yaml. */}}
{{- define "argus.taskRules" -}}
# The ArgusTasks: the task cache lists and watches them; patch puts the finalizer
# argus.io/stop-ray-job on (before a task reaches Ray) and takes it off; delete removes an
# ended task whose ttlSecondsAfterFinished (or --ttl-seconds-after-finished) ran out.
- apiGroups: [argus.io]
  resources: [argustasks]
  verbs: [list, watch, patch, delete]
# Their status: phase, conditions, Ray job (the status writer's merge patches).
- apiGroups: [argus.io]
  resources: [argustasks/status]
  verbs: [patch]
# Events on the tasks (kubectl describe): one per phase change, from the status writer.
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- if .Values.rbac.taskSecrets }}
# Secrets: a task's spec.env names keys of Secrets in its own namespace (W&B, MLflow, Hugging
# Face credentials); the operator reads each by name (get) when the task starts, and puts the
# values into its Ray job's runtime env. No list or watch; but get on secrets lets the operator
# read any Secret in the namespaces it watches (every namespace when it watches all).
- apiGroups: [""]
  resources: [secrets]
  verbs: [get]
{{- end }}
{{- end }}
{{- define "argus.clusterRules" -}}
# Namespaces: get: the operator reads a task's namespace for its argus.io/user label (who
# the task runs as), live, when it validates the task (controller and webhook); list: the
# queue reads the onboarded namespaces' argus.io/gpu-quota annotations (at most once per poll
# interval). No watch: kopf runs cluster-wide for the webhook and follows no namespaces.
- apiGroups: [""]
  resources: [namespaces]
  verbs: [get, list]
# The ArgusTask and ArgusCluster CRDs, read at start and every --crd-check-interval: is each served schema the
# one this operator was built with (its argus.io/schema-hash annotation)? Helm never
# upgrades crds/ (docs/deploy.md, "Upgrading").
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  resourceNames: [argustasks.argus.io, argusclusters.argus.io]
  verbs: [get]
{{- if .Values.rbac.watchCRDs }}
# kopf re-scans the served resources when a CRD appears or changes (read-only), so the
# webhook knows the ArgusTask CRD even when it came after the operator.
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [list, watch]
{{- end }}
{{- end }}

{{- define "argus.argusClusterRules" -}}
# The ArgusClusters (cluster-scoped, so a ClusterRole in every mode): the Ray clusters tasks
# are placed on. list: the operator reads them all (at most once per poll interval); patch:
# it puts its finalizer argus.io/tasks-on-cluster on while tasks are active on a cluster
# (deleting the cluster then waits for them) and takes it off (JSON patches that test the
# list first). Nothing else: it neither watches nor writes them by name.
- apiGroups: [argus.io]
  resources: [argusclusters]
  verbs: [list, patch]
# Their status: RayReachable, Ray version, worker nodes, GPUs, running and queued tasks, and
# the Deleting condition (the leader's merge patches, at most once per poll interval).
- apiGroups: [argus.io]
  resources: [argusclusters/status]
  verbs: [patch]
{{- if .Values.rbac.rayClusterRefs }}
# An ArgusCluster's spec.rayClusterRef: the KubeRay RayCluster it names and that cluster's head
# Service (its dashboard port), read by name (get) in the RayCluster's namespace, at most every
# 30 s per such ArgusCluster while its Ray answers. No list or watch.
- apiGroups: [ray.io]
  resources: [rayclusters]
  verbs: [get]
- apiGroups: [""]
  resources: [services]
  verbs: [get]
{{- end }}
{{- end }}

{{- define "argus.tokenSecretRules" -}}
# An ArgusCluster's spec.tokenSecret names a Secret in the operator's namespace (the release's)
# holding that Ray cluster's token: read by name when the cluster appears and again after Ray
# refuses it (a rotated token counts). get only: no list or watch, and in this namespace only.
- apiGroups: [""]
  resources: [secrets]
  verbs: [get]
{{- end }}

{{- define "argus.leaseRules" -}}
# Leader election: the <fullname>-leader Lease in the release's namespace. Created once
# (create cannot be limited to a name), then read and renewed (update) only that one.
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [create]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  resourceNames: [{{ include "argus.leaseName" . | quote }}]
  verbs: [get, update]
{{- end }}
