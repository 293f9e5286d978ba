"""The Ray clusters the controller drives (issue 23): the ArgusClusters, read at most once per
poll interval, each with its own Ray client and node cache; or, while there is none, the one
*implicit* cluster of ``--ray-address`` (``core.clusters.IMPLICIT_CLUSTER``), so that an
install without ArgusClusters works as before.

Every Ray call about a task goes to the cluster its job is on (``TaskView.job_cluster``):
``ray(name)``. The implicit cluster's client is always kept, for the tasks that ran there
before the first ArgusCluster was created. A name that no ArgusCluster has (any more) gets a
client that answers every call with ``RayUnreachable`` naming the missing cluster, so its
tasks take the outage path (grace, then Failed/RayUnreachable), never a crash.

An ArgusCluster with ``spec.rayClusterRef`` (a KubeRay RayCluster) has its address read from
the RayCluster's head Service (``core.clusters.head_dashboard_address``, reached as
``--kuberay-dashboard-url`` says), at most every ``REF_REREAD_SECONDS`` while its Ray answers and
at every read of the clusters while it does not (a head Service that moved is followed within
a poll interval). While the RayCluster or its head Service does not exist, the cluster's
client answers every call with ``RayUnreachable`` saying so, and its status says it
(``ClusterReason.RayClusterRefUnresolved``); when the API server cannot be read, the address last read is kept.

A cluster's token comes from the Secret its ``spec.tokenSecret`` names, in the operator's
namespace, read when the cluster is first seen, again after Ray refused it, and at least
every ``TOKEN_REREAD_SECONDS`` (a rotated Secret counts without a restart).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import replace

from ..core.clusters import (
    DEFAULT_KUBERAY_URL,
    IMPLICIT_CLUSTER,
    ClusterConfig,
    InvalidCluster,
    UnresolvedRef,
    head_dashboard_address,
    head_service_name,
    missing_raycluster,
    parse_cluster,
    preference_order,
)
from ..core.store import store_message
from .ports import ClusterStore, RayJobs
from .rayclusters import Cluster, NodeCache, NoRay
from .view import TaskView

log = logging.getLogger(__name__)
TOKEN_REREAD_SECONDS = 300.0
REF_REREAD_SECONDS = 30.0

# connect(config, token) -> a Ray client for the cluster; token() is the cluster's token now.
Connect = Callable[[ClusterConfig, Callable[[], str | None]], RayJobs]


class Fleet:
    def __init__(self, implicit: RayJobs, implicit_config: ClusterConfig, *, poll_interval: float, monotonic: Callable[[], float],
                 store: ClusterStore | None = None, connect: Connect | None = None, token_namespace: str | None = None,
                 kuberay_url: str = DEFAULT_KUBERAY_URL):
        assert implicit_config.worker_resource, "the implicit cluster's worker resource is the operator's --worker-resource"
        self.default_worker_resource = implicit_config.worker_resource
        self.poll_interval = poll_interval
        self.monotonic = monotonic
        self.store = store
        self.connect = connect
        self.token_namespace = token_namespace
        self.kuberay_url = kuberay_url
        self.implicit = Cluster(implicit_config, implicit, self._node_cache(implicit, implicit_config))
        self.named: dict[str, Cluster] = {}
        self._placing: list[Cluster] = []  # the named clusters, most preferred first
        self._read_at: float | None = None
        self._reading = asyncio.Lock()
        self._problems: dict[str, str] = {}  # what was said about each object, said again only when it changes
        self._missing: dict[str, NoRay] = {}
        self._tokens: dict[str, dict[str, str | None]] = {}  # each cluster's token, as its client reads it

    def _node_cache(self, ray: RayJobs, config: ClusterConfig) -> NodeCache:
        return NodeCache(ray, config.worker_resource or self.default_worker_resource, self.poll_interval, self.monotonic)

    # -- reading the ArgusClusters -----------------------------------------------------
    async def refresh(self, *, fresh: bool = False) -> None:
        """Read the ArgusClusters (at most once per poll interval); make, keep or drop each
        one's client. A failed read keeps the clusters last read."""
        if self.store is None or self.connect is None:
            return
        # One read at a time: a caller that comes while another reads (the doctor's loop beside
        # the controller's tick) waits for it and then sees its clusters, never an empty fleet.
        async with self._reading:
            await self._refresh(fresh)

    async def _refresh(self, fresh: bool) -> None:
        assert self.store is not None
        now = self.monotonic()
        if not fresh and self._read_at is not None and now - self._read_at < self.poll_interval:
            return
        self._read_at = now
        try:
            objects = await self.store.list_clusters()
        except Exception as exc:  # noqa: BLE001 - keep the clusters last read; say why once
            self._say("list", f"cannot read the ArgusClusters: {store_message(exc)}; using the ones last read")
            return
        self._problems.pop("list", None)
        seen: dict[str, Cluster] = {}
        for obj in objects:
            name = (obj.get("metadata") or {}).get("name") or ""
            try:
                config = parse_cluster(obj)
            except InvalidCluster as exc:
                self._say(name, f"{exc}; not used until fixed")
                continue
            self._problems.pop(name, None)
            kept = self.named.get(name)
            resolved_at = kept.resolved_at if kept is not None else None
            if config.ray_cluster_ref is not None:
                config, unresolved, resolved_at = await self._resolve(config, kept, now)
                if unresolved is not None:
                    if kept is not None and kept.unresolved == unresolved:  # as before: kept (its token's read time too)
                        kept.config, kept.resolved_at = config, resolved_at
                        _keep_object(kept, obj)
                        seen[name] = kept
                    else:
                        seen[name] = self._unusable(config, unresolved, obj, resolved_at)
                    continue
            if kept is None or kept.unresolved is not None or _connection(kept.config) != _connection(config):
                kept = self._make(config)
            else:
                kept.config = config
                kept.nodes.worker_resource = config.worker_resource or self.default_worker_resource
            kept.resolved_at = resolved_at
            _keep_object(kept, obj)
            seen[name] = kept
        for gone in set(self.named) - set(seen):
            log.info("ArgusCluster %s is gone; its tasks' Ray calls now fail as unreachable", gone)
        self.named = seen
        self._placing = [seen[c.name] for c in preference_order([c.config for c in seen.values()])]
        for cluster in seen.values():
            await self._read_token(cluster)

    async def _resolve(self, config: ClusterConfig, kept: Cluster | None, now: float) -> tuple[ClusterConfig, str | None, float | None]:
        """(the config with the address its rayClusterRef gives, why it gives none, when it
        was read). Read again only when due: see the module's docstring."""
        assert self.store is not None and config.ray_cluster_ref is not None
        ref = config.ray_cluster_ref
        known = kept is not None and kept.unresolved is None and kept.config.ray_cluster_ref == ref and bool(kept.config.address)
        if known and kept is not None and kept.resolved_at is not None and now - kept.resolved_at < REF_REREAD_SECONDS \
                and kept.nodes.error is None:
            return replace(config, address=kept.config.address), None, kept.resolved_at
        key = f"ref:{config.name}"
        try:
            raycluster = await self.store.ray_cluster(ref.namespace, ref.name)
            if raycluster is None:
                raise missing_raycluster(ref)
            service_name = head_service_name(ref, raycluster)
            address = head_dashboard_address(ref, service_name, await self.store.service(ref.namespace, service_name), self.kuberay_url)
        except UnresolvedRef as exc:
            self._say(key, f"ArgusCluster {config.name}: {exc}")
            return config, str(exc), now
        except Exception as exc:  # noqa: BLE001 - the API server could not say: keep what was read last
            if known and kept is not None:
                self._say(key, f"ArgusCluster {config.name}: cannot read RayCluster {ref}: {store_message(exc)}; using {kept.config.address}")
                return replace(config, address=kept.config.address), None, kept.resolved_at
            why = f"spec.rayClusterRef: cannot read RayCluster {ref}: {store_message(exc)}"
            self._say(key, f"ArgusCluster {config.name}: {why}")
            return config, why, now
        self._problems.pop(key, None)
        return replace(config, address=address), None, now

    def _unusable(self, config: ClusterConfig, why: str, obj: dict[str, object], resolved_at: float | None) -> Cluster:
        ray = NoRay(why)
        cluster = Cluster(config, ray, self._node_cache(ray, config), unresolved=why, resolved_at=resolved_at)
        _keep_object(cluster, obj)
        return cluster

    def _make(self, config: ClusterConfig) -> Cluster:
        assert self.connect is not None
        holder: dict[str, str | None] = {"token": None}
        ray = self.connect(config, lambda: holder["token"])
        self._tokens[config.name] = holder
        log.info("driving Ray cluster %s at %s", config.name, config.address)
        return Cluster(config, ray, self._node_cache(ray, config))

    async def _read_token(self, cluster: Cluster) -> None:
        ref = cluster.config.token_secret
        if ref is None or self.store is None:
            return
        now = self.monotonic()
        refused = cluster.nodes.refused
        if cluster.token_read_at is not None and now - cluster.token_read_at < TOKEN_REREAD_SECONDS and not refused:
            return
        if refused and cluster.token_read_at is not None and now - cluster.token_read_at < self.poll_interval * 5:
            return  # after a refusal: again, but not at every read
        cluster.token_read_at = now
        namespace = self.token_namespace or "default"
        try:
            token = await self.store.secret_value(namespace, ref.name, ref.key)
        except Exception as exc:  # noqa: BLE001 - the refusal that follows says to check the token
            problem = f"ArgusCluster {cluster.name}: cannot read its token (Secret {namespace}/{ref.name}): {store_message(exc)}"
            if problem != cluster.token_problem:
                log.warning("%s", problem)
            cluster.token_problem = problem
            return
        if token is None:
            problem = f"ArgusCluster {cluster.name}: Secret {namespace}/{ref.name} has no key {ref.key} (or is empty)"
            if problem != cluster.token_problem:
                log.warning("%s", problem)
            cluster.token_problem = problem
            return
        cluster.token_problem = None
        holder = self._tokens.get(cluster.name)
        if holder is not None and holder["token"] != token:
            holder["token"] = token
            reset = getattr(cluster.ray, "reconnect", None)
            if callable(reset):
                reset()  # the next call makes a client with the new token

    def _say(self, key: str, message: str) -> None:
        if self._problems.get(key) != message:
            log.warning("%s", message)
        self._problems[key] = message

    # -- what the controller asks ------------------------------------------------------
    @property
    def has_named(self) -> bool:
        return bool(self.named)

    def placing(self) -> list[Cluster]:
        """The clusters new tasks are placed on, most preferred first: the ArgusClusters, or
        the implicit cluster while there is none (ordered once per read of the clusters)."""
        return self._placing if self.named else [self.implicit]

    def get(self, name: str | None) -> Cluster | None:
        if not name:
            return self.implicit
        return self.named.get(name)

    def ray(self, name: str | None) -> RayJobs:
        cluster = self.get(name)
        if cluster is not None:
            return cluster.ray
        assert name
        return self._missing.setdefault(
            name, NoRay(f"no ArgusCluster named {name} exists (deleted, or never created): its Ray cannot be asked"))

    def nodes(self, name: str | None) -> NodeCache | None:
        cluster = self.get(name)
        return cluster.nodes if cluster is not None else None

    def every(self) -> list[Cluster]:
        return [self.implicit, *self.named.values()]


def _keep_object(cluster: Cluster, obj: dict[str, object]) -> None:
    """What the controller keeps of the object as read: its finalizers and status."""
    meta = obj.get("metadata") or {}
    cluster.finalizers = tuple(meta.get("finalizers") or ()) if isinstance(meta, dict) else ()
    status = obj.get("status") or {}
    cluster.status = dict(status) if isinstance(status, dict) else {}


def _connection(config: ClusterConfig) -> tuple[object, ...]:
    """What a client is made from: a change makes a new one."""
    return (config.address, config.token_secret)


def implicit_cluster(address: str, worker_resource: str, max_running: int | None = None) -> ClusterConfig:
    return ClusterConfig(name=IMPLICIT_CLUSTER, address=address, worker_resource=worker_resource, max_running=max_running)


class LogRouter:
    """The log API's Ray (``servers.logapi``: ``logs`` and ``tail_logs`` by submission id),
    each job's read from the cluster it ran on: the task that owns the id says which (the
    task cache, looked through again only for an id not seen before). Any replica serves
    logs, so it reads the ArgusClusters itself (``Fleet.refresh``, at most once per poll
    interval), leader or not."""

    def __init__(self, fleet: Fleet, views: Callable[[], list[TaskView]]):
        self.fleet = fleet
        self.views = views
        self._clusters: dict[str, str] = {}

    def _cluster(self, submission_id: str) -> str:
        if submission_id not in self._clusters:
            self._clusters = {sid: v.cluster_of_job(sid) for v in self.views() for sid in v.state.submission_ids()}
        return self._clusters.get(submission_id, IMPLICIT_CLUSTER)

    async def logs(self, submission_id: str) -> str:
        await self.fleet.refresh()
        return await self.fleet.ray(self._cluster(submission_id)).logs(submission_id)

    async def tail_logs(self, submission_id: str) -> AsyncIterator[str]:
        await self.fleet.refresh()
        async for chunk in self.fleet.ray(self._cluster(submission_id)).tail_logs(submission_id):
            yield chunk
