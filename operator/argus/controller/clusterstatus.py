"""The ArgusClusters' side of a tick, as the leader: each one's status (``core.clusters.
cluster_status``: reachable or not, the address used, Ray version, worker nodes, GPUs, running
and queued tasks, argus doctor's last verdict), written at most once per poll interval and only when it changed; and its finalizer.

The finalizer (``CLUSTER_FINALIZER``) is on an ArgusCluster while tasks are on it (admitted
there and not ended): deleting it then waits, its Deleting condition naming the tasks, and
no new task is placed there; once they have ended the finalizer goes and so does the
object. An idle cluster is deleted at once, and uninstalling Argus never leaves one stuck.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from ..core.clock import Clock
from ..core.clusters import CLUSTER_FINALIZER, ArgusClusterStatus, ClusterDoctor, ClusterReport, cluster_status
from ..core.queue import Claim, free_per_node
from ..core.store import store_message
from ..core.times import format_time
from ..core.vocabulary import END_PHASES, ClusterReason
from .fleet import Fleet
from .ports import ClusterStore
from .rayclusters import Cluster, NodeCache
from .view import TaskView, in_queue

log = logging.getLogger(__name__)
VERSION_REREAD_SECONDS = 600.0
_ENDED = frozenset(p.value for p in END_PHASES)


class ClusterReports:
    def __init__(self, fleet: Fleet, store: ClusterStore, clock: Clock, poll_interval: float,
                 doctor: Mapping[str, ClusterDoctor] | None = None):
        self.fleet = fleet
        self.doctor = doctor if doctor is not None else {}  # argus doctor's last verdict per cluster
        self.store = store
        self.clock = clock
        self.poll_interval = poll_interval
        self._written_at: float | None = None
        self._versions: dict[str, tuple[str, float]] = {}  # cluster -> (Ray version, when read)

    async def write(self, views: Callable[[], list[TaskView]], claims: Callable[[list[TaskView], NodeCache], list[Claim]],
                    clusters_for: Callable[[TaskView], tuple[str, ...] | None],
                    armed: Callable[[TaskView], bool]) -> None:
        """Every ArgusCluster's status and finalizer, at most once per poll interval (the
        clusters themselves are read as often): the tasks are looked through only then.
        ``claims``: the GPUs of a cluster's active tasks that Ray does not show yet
        (``QueueSnapshot.claims``); ``clusters_for``: the clusters a queued task may use;
        ``armed``: a queued task given the finalizer ahead of its start
        (``JobSync.never_submitted``): not on its cluster yet, and not holding it."""
        if not self.fleet.named:
            return
        now = self.clock.monotonic()
        if self._written_at is not None and now - self._written_at < self.poll_interval:
            return
        self._written_at = now
        on: dict[str, list[TaskView]] = {}
        may: dict[str, int] = {}  # queued tasks that may go to each cluster (each task's clusters worked out once)
        anywhere = 0
        for v in views():
            ahead = armed(v)  # a queued task like any other, its cluster not yet chosen for good
            if v.holds_finalizer and v.phase not in _ENDED and not ahead:
                on.setdefault(v.job_cluster, []).append(v)
            elif in_queue(v):
                names = clusters_for(v)
                if names is None:
                    anywhere += 1
                for name in names or ():
                    may[name] = may.get(name, 0) + 1
        for cluster in list(self.fleet.named.values()):
            mine = on.get(cluster.name, [])
            try:
                await self._finalizer(cluster, bool(mine))
                await self._status(cluster, mine, may.get(cluster.name, 0) + anywhere, claims([v for v in mine if v.active], cluster.nodes))
            except Exception as exc:  # noqa: BLE001 - one cluster's write must not stop the others
                log.warning("cannot update ArgusCluster %s: %s", cluster.name, store_message(exc))

    async def _finalizer(self, cluster: Cluster, in_use: bool) -> None:
        held = CLUSTER_FINALIZER in cluster.finalizers
        if in_use and not held and not cluster.config.deleting:
            after = [*cluster.finalizers, CLUSTER_FINALIZER]
        elif not in_use and held:
            after = [f for f in cluster.finalizers if f != CLUSTER_FINALIZER]
        else:
            return
        if await self.store.set_cluster_finalizers(cluster.name, list(cluster.finalizers), after):
            cluster.finalizers = tuple(after)
            if not in_use and cluster.config.deleting:
                log.info("ArgusCluster %s: no task is on it any more; released for deletion", cluster.name)

    async def _status(self, cluster: Cluster, on_it: list[TaskView], queued: int, claims: list[Claim]) -> None:
        capacity, error = await cluster.nodes.capacity()
        version = await self._version(cluster, error is None)
        reason = ClusterReason.RayClusterRefUnresolved if cluster.unresolved is not None else ClusterReason(cluster.nodes.error_reason)
        report = ClusterReport(
            error=cluster.unresolved or error, error_reason=reason, version=version, doctor=self.doctor.get(cluster.name),
            worker_nodes=len(capacity.workers) if capacity is not None else None,
            gpus=capacity.total_gpus if capacity is not None else None,
            free_gpus=sum(free_per_node(capacity, claims)) if capacity is not None else None,
            running=len(on_it),
            queued=queued,
            deleting=cluster.config.deleting,
            holding=tuple(f"{v.namespace}/{v.name}" for v in on_it),
        )
        previous = ArgusClusterStatus.model_validate(cluster.status or {})
        status = cluster_status(previous, report, address=cluster.config.address, now=format_time(self.clock.now()),
                                generation=cluster.config.generation)
        document = status.model_dump(by_alias=True, exclude_none=True, mode="json")
        before = previous.model_dump(by_alias=True, exclude_none=True, mode="json")
        if document != before:
            # A merge patch: a field that went (the address of a reference that no longer
            # resolves) is removed by naming it with null.
            patch = {**document, **{k: None for k in before if k not in document}}
            if await self.store.patch_cluster_status(cluster.name, patch):
                cluster.status = document

    async def _version(self, cluster: Cluster, reachable: bool) -> str | None:
        kept = self._versions.get(cluster.name)
        now = self.clock.monotonic()
        if not reachable or (kept is not None and now - kept[1] < VERSION_REREAD_SECONDS):
            return kept[0] if kept else None
        try:
            version = await cluster.ray.cluster_version()
        except Exception:  # noqa: BLE001 - the version is a nicety; the next pass asks again
            return kept[0] if kept else None
        self._versions[cluster.name] = (version, now)
        return version

