"""The Ray clusters as the control loop's rooms see them: one ``Cluster`` per Ray cluster (its
configuration, client and ``NodeCache``), the ``NoRay`` client of a cluster that cannot be
asked, and ``Clusters``, the protocol by which ``jobsync`` and the others find a cluster by
name (``fleet.Fleet`` keeps them). Its own module so that the fleet, which makes clusters,
and the job reads, which use them, need not import each other."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Protocol

from ..core.clusters import ClusterConfig
from ..core.doctor import ProbeJob
from ..core.queue import Capacity, WorkerNode
from ..core.rayjobs import PlacementGroup, RayAuthFailed, RayJob, RayNode, RayRefused, RayUnreachable
from ..core.submission import SubmissionPlan
from ..core.vocabulary import Reason
from .ports import RayJobs

log = logging.getLogger(__name__)


def ray_error_reason(exc: Exception) -> Reason:
    """The condition reason a failed Ray read shows: refused credentials or an outage."""
    return Reason.RayAuthFailed if isinstance(exc, RayAuthFailed) else Reason.RayUnreachable


class NodeCache:
    """Ray's alive nodes, read at most once per ``max_age`` seconds: ticks come as often as
    young jobs are due; node sets change rarely."""

    def __init__(self, ray: RayJobs, worker_resource: str, max_age: float, monotonic: Callable[[], float]):
        self.ray = ray
        self.worker_resource = worker_resource
        self.max_age = max_age
        self.monotonic = monotonic
        self._read_at: float | None = None
        self._nodes: list[RayNode] | None = None
        self._groups: list[PlacementGroup] = []
        self._error: str | None = None
        self._warned_no_usage = False
        self.error_reason = Reason.RayUnreachable  # or RayAuthFailed: why the last read failed

    async def read(self, *, fresh: bool = False) -> tuple[list[RayNode] | None, str | None]:
        now = self.monotonic()
        if fresh or self._read_at is None or now - self._read_at >= self.max_age:
            self._read_at = now
            try:
                self._nodes, self._error = await self.ray.nodes(), None
                self._groups = await self.ray.placement_groups()
            except (RayUnreachable, RayRefused) as exc:
                self._nodes, self._error = None, str(exc)
                self.error_reason = ray_error_reason(exc)
        return self._nodes, self._error

    @property
    def refused(self) -> bool:
        """Whether the last read failed because Ray refused the credentials."""
        return self._error is not None and self.error_reason == Reason.RayAuthFailed

    @property
    def error(self) -> str | None:
        """Why the last read failed (None: it did not)."""
        return self._error

    def workers(self, nodes: list[RayNode]) -> list[RayNode]:
        return [n for n in nodes if self.worker_resource in n.resources_total]

    async def capacity(self) -> tuple[Capacity | None, str | None]:
        """The alive worker nodes (those carrying the worker resource): their GPUs and how
        many are in use, as Ray reports them."""
        nodes, error = await self.read()
        if nodes is None:
            return None, error
        workers = self.workers(nodes)
        if any(n.gpus_used is None for n in workers) and not self._warned_no_usage:
            self._warned_no_usage = True
            log.warning("this Ray reports no GPU use per node: free GPUs are counted as the workers' totals minus what Argus "
                        "admitted (GPUs held by jobs outside Argus are not seen)")
        return Capacity(tuple(WorkerNode(n.node_id, n.resources_total.get("GPU", 0.0), n.gpus_used or 0.0) for n in workers)), None

    def placed_gpus(self, job_id: str | None) -> float:
        """GPUs Ray shows in use for a job (its created placement groups)."""
        return sum(g.gpus for g in self._groups if job_id and g.creator_job_id == job_id)

    def placed_on(self, job_id: str | None) -> dict[str, float]:
        """Where a job's placement groups hold GPUs: GPUs per node id (empty: none placed,
        or this Ray does not say)."""
        out: dict[str, float] = {}
        for g in self._groups:
            if job_id and g.creator_job_id == job_id:
                for node, gpus in g.nodes:
                    out[node] = out.get(node, 0.0) + gpus
        return out

    async def on_worker(self, node_id: str) -> bool | None:
        """Whether ``node_id`` carries the worker resource (None: Ray's nodes cannot be read)."""
        nodes, _ = await self.read()
        if nodes is not None and any(n.node_id == node_id for n in nodes):
            return any(n.node_id == node_id for n in self.workers(nodes))
        nodes, _ = await self.read(fresh=True)  # a node that joined since the last read
        if nodes is None:
            return None
        return any(n.node_id == node_id for n in self.workers(nodes))


class NoRay:
    """The Ray client of a cluster that cannot be asked (no ArgusCluster of that name, or its
    rayClusterRef names no head Service): every call is ``RayUnreachable`` saying why."""

    def __init__(self, why: str):
        self.why = why

    async def submit(self, plan: SubmissionPlan) -> bool:
        raise RayUnreachable(self.why)

    async def job(self, submission_id: str) -> RayJob:
        raise RayUnreachable(self.why)

    async def stop(self, submission_id: str) -> bool:
        raise RayUnreachable(self.why)

    async def delete(self, submission_id: str) -> bool:
        raise RayUnreachable(self.why)

    async def tail_logs(self, submission_id: str) -> AsyncIterator[str]:
        raise RayUnreachable(self.why)
        yield ""  # pragma: no cover - makes this an async generator

    async def nodes(self) -> list[RayNode]:
        raise RayUnreachable(self.why)

    async def placement_groups(self) -> list[PlacementGroup]:
        raise RayUnreachable(self.why)

    async def submit_probe(self, probe: ProbeJob) -> str:
        raise RayUnreachable(self.why)

    async def logs(self, submission_id: str) -> str:
        raise RayUnreachable(self.why)

    async def cluster_version(self) -> str:
        raise RayUnreachable(self.why)


@dataclass
class Cluster:
    """One Ray cluster the operator drives: its configuration, client and node cache."""

    config: ClusterConfig
    ray: RayJobs
    nodes: NodeCache
    token_read_at: float | None = None
    token_problem: str | None = None
    unresolved: str | None = None  # why its rayClusterRef gives no address (its client is a NoRay then)
    resolved_at: float | None = None  # when its rayClusterRef was last read
    finalizers: tuple[str, ...] = ()
    status: dict[str, object] = field(default_factory=dict)  # the object's status as last read

    @property
    def name(self) -> str:
        return self.config.name


class Clusters(Protocol):
    """Each cluster's Ray client and node cache, by name (``fleet.Fleet``)."""

    def ray(self, name: str | None) -> RayJobs: ...
    def nodes(self, name: str | None) -> NodeCache | None: ...
    def get(self, name: str | None) -> Cluster | None: ...  # None: no such cluster
