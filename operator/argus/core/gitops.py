"""Whether a GitOps tool keeps an ArgusTask in the cluster from Git: read from the object's own
labels and annotations. Pure: the lifecycle (``core.lifecycle``) asks it before a task's time
to live deletes it, because Argo CD creates a deleted object again from Git (``selfHeal``):
a new UID, a new Ray job, the training run over again, after every TTL.

Argo CD marks what it applies in one of three ways (``application.resourceTrackingMethod``):

- ``annotation`` (the default since Argo CD 3.0): ``argocd.argoproj.io/tracking-id:
  <app>:<group>/<kind>:<namespace>/<name>``. Only Argo CD writes it; it names the object, so
  a copy of it on another object (``kubectl get -o yaml | kubectl apply``) is told apart, as
  Argo CD itself tells it apart;
- ``annotation+label``: the same annotation, and the label (informational);
- ``label`` (the default before 3.0): the label ``application.instanceLabelKey`` of
  ``argocd-cm``, ``app.kubernetes.io/instance`` unless changed, set to the application's name.

The label is not Argo CD's alone: ``helm install`` charts set ``app.kubernetes.io/instance``
too. An object installed by Helm itself carries Helm's release annotation
(``meta.helm.sh/release-name``), which Argo CD never writes (it renders charts with ``helm
template``); with it, the label is taken to be Helm's. A label key set to "" turns label
tracking off (for sites that use annotation tracking only).
"""

from __future__ import annotations

from collections.abc import Mapping

from .spec import GROUP, KIND

TRACKING_ID = "argocd.argoproj.io/tracking-id"
HELM_RELEASE = "meta.helm.sh/release-name"
DEFAULT_TRACKING_LABEL = "app.kubernetes.io/instance"  # Argo CD's application.instanceLabelKey default


def tracked_by(namespace: str, name: str, labels: Mapping[str, str], annotations: Mapping[str, str],
               label_key: str = DEFAULT_TRACKING_LABEL) -> str | None:
    """What keeps the task ``namespace/name`` in the cluster from Git, in words for an Event
    ("Argo CD application X (annotation ...)"), or None when nothing marks it."""
    tracking_id = annotations.get(TRACKING_ID)
    if tracking_id:
        app = _tracking_app(tracking_id, namespace, name)
        # A tracking id of another object: a copy; Argo CD does not re-create this one.
        return f"Argo CD application {app} (annotation {TRACKING_ID})" if app else None
    app = labels.get(label_key) if label_key else None
    if app and HELM_RELEASE not in annotations:
        return f"Argo CD application {app} (label {label_key}, Argo CD's label tracking)"
    return None


def _tracking_app(tracking_id: str, namespace: str, name: str) -> str | None:
    """The application named by a tracking id of this ArgusTask; None for another object's."""
    parts = tracking_id.split(":")
    if len(parts) != 3:
        return None
    app, group_kind, where = parts
    group, _, kind = group_kind.partition("/")
    obj_namespace, _, obj_name = where.rpartition("/")
    if (group, kind, obj_name) != (GROUP, KIND, name) or obj_namespace not in ("", namespace) or not app:
        return None
    return app
