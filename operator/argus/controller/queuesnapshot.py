"""The queue snapshot (``QueueSnapshot``) holds what the queue's decision needs from the
world: gathered for one admission pass (``core.queue.decide``), each Ray cluster's worker nodes and
the GPUs in use on each (``rayclusters.NodeCache``, one per cluster: ``fleet.Fleet``), the GPUs of admitted tasks that
Ray does not show yet (claims, on the cluster of each), each user's quota and each
namespace's labels (from the users' namespaces, read at most once per poll interval), the
files each task reads that are not in the shared tree (``inputcheck``), the clusters each
task may use, the GPUs each user holds, and, for the fair policy, each user's
decayed usage (from the tasks' own attempts)."""

from __future__ import annotations

import datetime as dt
import logging
import math
from collections.abc import Callable, Mapping

from pydantic import ValidationError

from ..core.clusters import ClusterDoctor, placed_on
from ..core.queue import Admission, Capacity, Claim, QueuedTask, QueueSettings, Room, UsageRecord, decayed_usage, decide
from ..core.store import store_message
from ..core.times import parse_time
from ..core.user import quotas_by_user
from ..core.verlchoice import Composers, VerlChoice, choose_verl
from ..core.vocabulary import Key, Reason, task_shape
from .fleet import Fleet
from .inputcheck import InputChecks
from .jobsync import JobSync
from .ports import TaskStore
from .rayclusters import Cluster, NodeCache
from .settings import OperatorConfig
from .view import TaskView

log = logging.getLogger(__name__)


def in_use(active: list[TaskView]) -> dict[str, int]:
    """GPUs each user's admitted (Submitted or Running) tasks hold."""
    held: dict[str, int] = {}
    for v in active:
        user = v.state.status.user or ""
        held[user] = held.get(user, 0) + v.gpus
    return held


def queue_settings(c: OperatorConfig) -> QueueSettings:
    """The queue's settings from the operator's flags (the admission pass and the queue view)."""
    return QueueSettings(max_running=c.max_running, policy="fair" if c.queue_policy == "fair" else "fifo",
                         half_life=c.fair_share_half_life, max_wait=c.fair_share_max_wait, default_quota=c.default_gpu_quota)


class QueueSnapshot:
    """The world as one queue pass sees it, with the reads it caches between passes, and the
    decision made over it (``decide``)."""

    def __init__(self, config: OperatorConfig, fleet: Fleet, jobs: JobSync, store: TaskStore, monotonic: Callable[[], float], *,
                 doctor: Mapping[str, ClusterDoctor] | None = None, composers: Composers | None = None,
                 input_checks: InputChecks | None = None):
        """``doctor``: argus doctor's last verdict on each ArgusCluster (the verl its snapshot
        runs); ``composers``: the verl releases Argus composes tasks for (None: no config tree);
        ``input_checks``: whether the files each task reads are in the shared tree (None: not checked)."""
        self.input_checks = input_checks
        self.doctor = doctor if doctor is not None else {}
        self.composers = composers
        self.config = config
        self.fleet = fleet
        self.jobs = jobs
        self.store = store
        self.monotonic = monotonic
        self.quotas: dict[str, int | None] = {}
        self.namespace_labels: dict[str, dict[str, str]] = {}  # the users' namespaces' labels (namespaceSelector)
        self.rooms: list[Room] = []  # the last pass's clusters, as the queue saw them
        self.usage: dict[str, float] = {}  # the last pass's recent usage per user (fair), and its tasks
        self.queued: list[QueuedTask] = []
        self._quotas_read_at: float | None = None
        self._usage: dict[Key, tuple[TaskView, list[UsageRecord]]] = {}  # each task's attempts, read once per view
        self.decide_seconds = 0.0  # the last decision's own time (no waiting on Ray or the API server)
        self.next_up: dict[Key, str] = {}  # the last pass's tasks next in line for an ending job's slot, and their clusters

    @property
    def settings(self) -> QueueSettings:
        return queue_settings(self.config)

    async def decide(self, queued: list[TaskView], active: list[TaskView], unvalidated: list[TaskView],
                     every_task: list[TaskView], now: dt.datetime,
                     ending: frozenset[Key] = frozenset()) -> tuple[Admission, dict[Key, tuple[str, Reason]]]:
        """The queue's decision, and for each waiting task whose clusters could not be read
        why (the error and its reason: RayUnreachable or RayAuthFailed). ``ending``: active
        tasks whose log said their job ended; the tasks their slots would go to are ``next_up``."""
        await self.fleet.refresh()
        placing = self.fleet.placing()
        capacities = [await c.nodes.capacity() for c in placing]
        await self._read_quotas()
        held, narrowed = await self.input_checks.check(queued, self.clusters_for) if self.input_checks is not None else ({}, {})
        started = self.monotonic()  # the pass's own work from here: the reads above wait on Ray and the API server
        room_capacities = [capacity for capacity, _ in capacities]
        self.rooms = self._rooms(placing, room_capacities, active)
        errors = {c.name: (error, c.nodes.error_reason) for c, (_, error) in zip(placing, capacities, strict=True) if error is not None}
        usage = decayed_usage(self._usage_records(every_task), now, self.config.fair_share_half_life) if self.config.queue_policy == "fair" else {}
        tasks = [v.as_queued(narrowed.get(v.key) or self.clusters_for(v), self._composed_for(v)) for v in queued] + [v.as_queued() for v in unvalidated]
        not_ready = frozenset(v.key for v in unvalidated)
        decision = decide(tasks, running=len(active), settings=self.settings, quotas=self.quotas, in_use=in_use(active),
                          usage=usage, now=now, not_ready=not_ready, rooms=self.rooms, held_back=held)
        self.usage, self.queued = usage, tasks  # the preemptor's view of the same pass
        self.next_up = {}
        still = [v for v in active if v.key not in ending]
        if len(still) < len(active) and decision.waiting:
            # The same pass as if the ending jobs had ended: the tasks that would take their
            # slots (the scheduler puts their finalizer on now, off the refill's path).
            after = decide(tasks, running=len(still), settings=self.settings, quotas=self.quotas, in_use=in_use(still),
                           usage=usage, now=now, not_ready=not_ready, rooms=self._rooms(placing, room_capacities, still), held_back=held)
            self.next_up = {t.key: after.placed.get(t.key, "") for t in after.admit if t.key in decision.waiting}
        ray_errors: dict[Key, tuple[str, Reason]] = {}
        if errors:
            for task in tasks:
                if task.key not in decision.waiting or task.key in held:  # its own missing files say more than Ray
                    continue
                waits_for = decision.unreadable.get(task.key)
                if waits_for is None:  # a task whose every cluster is unreadable waits for them, whatever else it waits for
                    mine = [r.name for r in self.rooms if task.clusters is None or r.name in task.clusters]
                    waits_for = mine[0] if mine and all(name in errors for name in mine) else None
                if waits_for is not None and waits_for in errors:
                    ray_errors[task.key] = errors[waits_for]
        self.decide_seconds = self.monotonic() - started
        return decision, ray_errors

    def _rooms(self, placing: list[Cluster], capacities: list[Capacity | None], active: list[TaskView]) -> list[Room]:
        """Each cluster the queue may place on, as the decision sees it with ``active`` running."""
        on: dict[str, list[TaskView]] = {}
        for v in active:
            on.setdefault(v.job_cluster, []).append(v)
        return [Room(c.name, capacity, tuple(self.claims(on.get(c.name, []), c.nodes)), len(on.get(c.name, [])),
                     c.config.max_running, c.config.accepting, *self._verl_of(c.name))
                for c, capacity in zip(placing, capacities, strict=True)]

    def _composed_for(self, v: TaskView) -> str | None:
        """The verl release a queued task is composed for (its status.verl), the default one when
        Argus has no tree for that (an earlier operator's); None: no config tree at all."""
        if self.composers is None:
            return None
        had = v.state.status.verl.version if v.state.status.verl is not None else None
        return had if had in self.composers.supported else self.composers.default.tree.version

    def verl_choice(self, v: TaskView, labels: Mapping[str, str] | None = None) -> VerlChoice:
        """The verl release to compose a task for (core.verlchoice): the one the clusters it
        may use run, as argus doctor last read them; the default before any is known.
        ``labels``: its namespace's, when read a moment ago (intake)."""
        if self.composers is None:
            return VerlChoice(None)
        names = self.clusters_for(v, labels)
        names = tuple(c.name for c in self.fleet.placing()) if names is None else names
        return choose_verl(names, {n: self._verl_of(n)[0] for n in names}, self.composers.supported, self.composers.default.tree.version)

    def _verl_of(self, cluster: str) -> tuple[tuple[str, ...], str | None]:
        """The verl versions argus doctor last read in the cluster's snapshot (none: not known)
        and the release a task with no status.verl counts as composed for (core.queue.Room.verl_drift).
        Before this process's first doctor run there (a restart, a new leader), the verdict its
        status keeps: a drifted cluster is not opened by the restart."""
        verdict = self.doctor.get(cluster)
        if verdict is None:
            found = self.fleet.get(cluster)
            kept = found.status.get("doctor") if found is not None else None
            try:
                verdict = ClusterDoctor.model_validate(kept) if isinstance(kept, dict) else None
            except ValidationError:  # a status written by hand, or by another version
                verdict = None
        default = self.composers.default.tree.version if self.composers is not None else None
        if verdict is None:
            return (), default
        return tuple(verdict.verl_versions or ()), default or next(iter(verdict.supported_verl or ()), None)

    def clusters_for(self, v: TaskView, labels: Mapping[str, str] | None = None) -> tuple[str, ...] | None:
        """The clusters a queued task may go to (None: any; the implicit cluster while there
        is no ArgusCluster): those whose namespaceSelector takes its namespace, narrowed to
        its spec.cluster, to the cluster its attempt may have been submitted to (the placement
        written before the submission; not one written ahead by ``Scheduler._arm``), and, for a new attempt without spec.moveOnRetry, to
        the last attempt's cluster (its checkpoints are in that cluster's shared tree)."""
        if not self.fleet.has_named:
            return None
        labels = labels if labels is not None else self.namespace_labels.get(v.namespace)
        names = [c.name for c in self.fleet.placing() if c.config.admits(labels)]
        pinned = v.spec.get("cluster")
        if isinstance(pinned, str) and pinned:
            names = [n for n in names if n == pinned]
        # An armed task's placement says where it was to go, not where its job is: this
        # process has not submitted it, so it may go where the queue finds room (its start
        # writes the placement again), and a cluster being deleted or drained meanwhile
        # does not keep it.
        placed = None if self.jobs.never_submitted(v) else placed_on(v.annotations, v.state.attempt)
        last = v.state.status.cluster
        if placed is not None:
            names = [n for n in names if n == placed]
        elif v.state.attempt > 1 and v.spec.get("moveOnRetry") is not True and last:
            names = [n for n in names if n == last]
        return tuple(names)

    def _usage_records(self, tasks: list[TaskView]) -> list[UsageRecord]:
        """``usage_records`` of every task, each task's read again only when it changed."""
        kept: dict[Key, tuple[TaskView, list[UsageRecord]]] = {}
        out: list[UsageRecord] = []
        for v in tasks:
            last = self._usage.get(v.key)
            records = last[1] if last is not None and last[0] is v else usage_records([v])
            kept[v.key] = (v, records)
            out += records
        self._usage = kept
        return out

    def claims(self, active: list[TaskView], nodes: NodeCache) -> list[Claim]:
        """GPUs of admitted tasks that Ray does not show in use yet (their verl workers'
        placement groups do not exist yet): the queue holds them back. GPUs Ray has placed
        (a torchrun driver's, or a placement group's bundles) are claimed on their node
        (core.queue: Ray counts them there too, but its usage report may lag)."""
        claims = []
        for v in active:
            # Where Ray has placed its GPUs: in use there at least (Ray's usage report lags a
            # placement group's creation by seconds; core.queue takes the larger).
            claims += [Claim(bundles=1, gpus_per_node=math.ceil(gpus), node_id=node) for node, gpus in self.placed(v, nodes).items()]
            if self._driver(v) is not None:
                continue  # a torchrun driver holds its GPUs itself: all of them are placed once it is
            per_node = task_shape(v.spec)[1]
            pending = v.gpus - nodes.placed_gpus(self.jobs.job_ids.get(v.key))
            if pending > 0:
                claims.append(Claim(bundles=math.ceil(pending / per_node), gpus_per_node=per_node))
        return claims

    def placed(self, v: TaskView, nodes: NodeCache) -> dict[str, float]:
        """Where Ray shows an active task's GPUs, per node: its torchrun driver's node, else its
        verl workers' placement groups' (empty: none placed yet). The queue's claims and the
        preemptor's victims read it."""
        driver = self._driver(v)
        return {driver[0]: driver[1]} if driver is not None else nodes.placed_on(self.jobs.job_ids.get(v.key))

    def _driver(self, v: TaskView) -> tuple[str, float] | None:
        """The node and GPUs of the task's current torchrun driver, once Ray has placed it."""
        driver = self.jobs.gpu_drivers.get(v.key)
        return (driver[1], driver[2]) if driver is not None and driver[0] == v.state.submission_id else None

    async def _read_quotas(self) -> None:
        """Each user's GPU quota from their namespaces (read at most once per poll interval)."""
        if self._quotas_read_at is not None and self.monotonic() - self._quotas_read_at < self.config.poll_interval:
            return
        try:
            namespaces = await self.store.user_namespaces()
            self.quotas = quotas_by_user(namespaces)
            self.namespace_labels = {ns: labels for ns, (_, _, labels) in namespaces.items()}
            self._quotas_read_at = self.monotonic()
        except Exception as exc:  # noqa: BLE001 - keep the last quotas; say why
            log.warning("cannot read the users' namespaces for their GPU quotas: %s; using the last ones read", store_message(exc))


def usage_records(tasks: list[TaskView]) -> list[UsageRecord]:
    """Every attempt's GPU time, from the tasks' status (so it survives an operator restart)."""
    records = []
    for v in tasks:
        user = v.state.status.user
        for attempt in v.state.status.attempts or []:
            start = parse_time(attempt.start_time)
            if user and start is not None:
                records.append(UsageRecord(user, v.gpus, start, parse_time(attempt.end_time)))
    return records
