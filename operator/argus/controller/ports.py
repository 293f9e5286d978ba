"""The small protocols the controller depends on. The operator passes the real adapters
(``adapters.ray.RayJobsClient``, ``adapters.kube.KubeTaskStore``, ``adapters.taskcache.TaskCache``,
``adapters.logfiles.LocalLogFiles``, ``adapters.sharedtree.LocalSharedTree``);
the unit tests pass in-memory fakes of the same shape (tests/unit/fakes.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

from ..core.doctor import ProbeJob
from ..core.rayjobs import PlacementGroup, RayJob, RayNode
from ..core.submission import SubmissionPlan
from ..core.vocabulary import Key
from .view import TaskView


class RayJobs(Protocol):
    """Ray's job and node APIs. Raises ``core.rayjobs``' RayUnreachable (RayAuthFailed for
    refused credentials), RayRefused and (for a submission id Ray does not know) RayJobUnknown."""

    async def submit(self, plan: SubmissionPlan) -> bool: ...  # False: Ray already had the id (adopted)
    async def job(self, submission_id: str) -> RayJob: ...
    async def stop(self, submission_id: str) -> bool: ...
    async def delete(self, submission_id: str) -> bool: ...  # from Ray's job history (an ended job)
    def tail_logs(self, submission_id: str) -> AsyncIterator[str]: ...
    async def nodes(self) -> list[RayNode]: ...
    async def placement_groups(self) -> list[PlacementGroup]: ...
    async def submit_probe(self, probe: ProbeJob) -> str: ...  # argus doctor: "label" or "ip", how it was pinned
    async def logs(self, submission_id: str) -> str: ...
    async def cluster_version(self) -> str: ...


class LogFiles(Protocol):
    """The jobs' files, where the shared tree is mounted: their exit markers, and their
    logs for ``--progress-source file``.
    Raises OSError (FileNotFoundError before the job has written its first line)."""

    # At most `limit` bytes from `offset`, of a file under `users_root` (None: the operator's --root's users folder).
    async def read(self, path: str, offset: int, limit: int, users_root: str | None = None) -> bytes: ...
    def mounted(self, users_root: str | None) -> bool: ...  # whether that users folder is here to read
    # Which of these files (path, its users folder) exist, as files reached without a link (one
    # look for all the jobs followed: the exit markers, core.jobscript).
    async def present(self, files: list[tuple[str, str | None]]) -> set[str]: ...


class SharedTree(Protocol):
    """The clusters' shared trees, where the operator mounts them at the roots their jobs see
    (``adapters.sharedtree.LocalSharedTree``): whether a file a task reads exists
    (``core.inputs``)."""

    def mounted(self, root: str) -> bool: ...  # whether the tree at `root` is here to read
    # For each path under `root`: True or False, or None when it cannot tell (unreadable, or
    # reached through a link out of the tree). One look per path.
    async def exists(self, root: str, paths: Sequence[str]) -> dict[str, bool | None]: ...


class TaskStore(Protocol):
    """The Kubernetes writes the controller makes, and the namespace read it needs. A refusal
    of the API server is raised as ``core.store``'s StoreError (``adapters.kube.KubeTaskStore``
    translates the kubernetes client's refusals)."""

    async def patch_status(self, namespace: str, name: str, patch: dict[str, Any]) -> bool: ...
    # The finalizer (and, when placing on a named cluster, the placement annotation) in one patch.
    async def add_finalizer(self, namespace: str, name: str, finalizers: list[str], annotations: dict[str, str] | None = None,
                            *, resource_version: str | None = None, annotated: bool = True) -> bool: ...
    async def remove_finalizer(self, namespace: str, name: str, finalizers: list[str]) -> bool: ...
    async def event(self, namespace: str, name: str, uid: str, type_: str, reason: str, message: str) -> None: ...
    async def namespace_labels(self, namespace: str) -> dict[str, str] | None: ...
    async def delete_task(self, namespace: str, name: str) -> bool: ...
    async def user_namespaces(self) -> dict[str, tuple[str, int | None, dict[str, str]]]: ...  # namespace -> (user, GPU quota, labels)


class ClusterStore(Protocol):
    """The ArgusClusters (cluster-scoped), the Secrets their tokens are in and the KubeRay
    RayClusters they refer to (``adapters.kube.KubeClusterStore``; tests/unit/fakes.py). Raises
    ``core.store``'s StoreError."""

    async def list_clusters(self) -> list[dict[str, Any]]: ...
    async def patch_cluster_status(self, name: str, patch: dict[str, Any]) -> bool: ...  # False: gone
    async def set_cluster_finalizers(self, name: str, before: list[str], after: list[str]) -> bool: ...  # False: changed or gone
    async def secret_value(self, namespace: str, name: str, key: str) -> str | None: ...  # None: no such key, or empty
    # A rayClusterRef's KubeRay RayCluster (ray.io/v1) and its head Service, as the API server
    # returns them (camelCase); None: no such object.
    async def ray_cluster(self, namespace: str, name: str) -> dict[str, Any] | None: ...
    async def service(self, namespace: str, name: str) -> dict[str, Any] | None: ...


class TaskSecrets(Protocol):
    """The Secrets of the tasks' namespaces that ``spec.env`` names (``adapters.secrets.KubeTaskSecrets``;
    tests/unit/fakes.py). ``data``: the Secret's keys, decoded (None: no such Secret); raises
    ``core.store``'s StoreError (a 403 when the operator may not read Secrets there)."""

    async def data(self, namespace: str, name: str) -> dict[str, str] | None: ...


class CrdReader(Protocol):
    """The served CustomResourceDefinition's annotations (None: no such CRD). Raises
    ``core.crd.CrdUnreadable`` when the API server refuses or cannot be reached."""

    async def crd_annotations(self, name: str) -> dict[str, str] | None: ...


class TaskSource(Protocol):
    """Every ArgusTask in scope, as the watch last showed it."""

    synced: asyncio.Event

    def views(self) -> list[TaskView]: ...
    def get(self, key: Key) -> TaskView | None: ...
