"""The queue's admission decision: which queued tasks may start now, and what every other
one waits for. Pure: the controller gives it Ray's worker nodes, the tasks, the users'
quotas and recent usage; it decides.

**What fits.** verl places one bundle of ``nGpusPerNode`` GPUs on each of ``nnodes``
distinct nodes. A task fits when that many *worker* nodes (those with the worker resource)
each have that many GPUs free. Free is what Ray reports (so GPUs that jobs outside Argus
hold count as used), minus what Argus admitted that Ray does not show yet (a verl driver
holds no GPU until its workers' placement groups exist: ``Claim``). Chosen nodes are the
fullest that still fit (best fit), to keep whole nodes free for whole-node tasks.

A torchrun launch is one driver that holds its GPUs itself (the Jobs API's
``entrypoint_num_gpus``): Ray picks its node. Until Ray has placed it, its claim floats
like any other; once its driver's node is known, the claim is *on that node* (``node_id``)
and means "at least this many GPUs are in use there": Ray counts them too, and its usage
report may lag, so the node's use is the larger of the two, never their sum.

**Order.** ``fifo``: priority (higher first), then creation time, then namespace/name.
``fair``: priority, then the user's recent GPU usage (GPU-seconds, halving every
``half_life`` seconds: Kueue's admission fair sharing and Volcano's fairshare are the
anchors), then creation time. A task that has waited longer than ``max_wait`` goes first in
its priority band (oldest first), whatever its user's usage: fairness never starves it.

**Waiting.**
- A task that can never fit (fewer worker nodes with ``nGpusPerNode`` GPUs in total than
  ``nnodes``) is ``Unschedulable`` and skipped: it blocks nobody.
- A task that would take its user over their GPU quota waits (``QuotaExceeded``) and blocks
  nobody: other users' tasks behind it go on.
- A task that fits the cluster but not yet *free GPUs* gets the nodes closest to holding it
  reserved (nothing new starts there, so they only drain); the tasks behind it may start on
  the other nodes. A big task is never starved by a stream of small ones, and the GPUs of
  the other nodes do not sit idle while it waits.
- A task that waits for a *slot* (``max_running``) holds back every task behind it.

**Verl drift.** A cluster whose verl snapshot argus doctor last read at a version other than
the one the task is composed for takes no new task (``Room.verl_drift``): the tasks that
could only go there wait (``VerlDrift``) and block nobody; running tasks are left alone.
Tasks are composed for the release their clusters run (``core.verlchoice``), so this holds
a task back only until it is composed again, or for a cluster at a release Argus lacks.

**Missing inputs.** A task whose data files, reward function or model folders are not in
the shared tree (``core.inputs``, asked by the controller) waits (``InputMissing``, in
``held_back``) and blocks nobody: it goes once they exist.

**Clusters** (``Room``, issue 23). With several Ray clusters the queue is still one: one
order, one ``max_running`` over all, quotas counted across clusters. Each task goes to the
first cluster, in preference order, that it may use (``QueuedTask.clusters``: its
``spec.cluster``, its namespace's clusters, the cluster of its last attempt) and that can
hold it now, with each cluster's own per-node fit, claims and cap. A cluster that cannot be
read admits nothing, and holds only the tasks that could go nowhere else.

Each waiting message names what the task waits for, never a figure that moves while it
waits (free GPUs now, GPUs its user holds, its place): the message goes into the task's
status, and a waiting task must cost a bounded number of status writes however long it
waits (issue 26). Its place is served on demand (``positions``).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from .times import parse_time
from .vocabulary import Key, Reason, task_gpus

Policy = Literal["fifo", "fair"]
# A task created but not validated yet keeps its place in the queue this long at most: a
# batch applied at once is ordered as applied even when intake validates it over several
# ticks, and a task whose namespace cannot be read does not hold the queue for ever.
HOLD_PLACE_SECONDS = 60.0


def holds_place(created: dt.datetime | None, now: dt.datetime) -> bool:
    """Whether a task not validated yet holds its place (``decide``'s ``not_ready``)."""
    return (now - (created or now)).total_seconds() < HOLD_PLACE_SECONDS


@dataclass(frozen=True)
class QueuedTask:
    namespace: str
    name: str
    priority: int
    created: str  # RFC 3339, compares in time order
    gpus_per_node: int = 1
    nnodes: int = 1
    user: str = ""
    clusters: tuple[str, ...] | None = None  # the clusters it may go to (None: any)
    verl: str | None = None  # the verl release it is composed for (None: the one each cluster's Room.composes)

    @property
    def key(self) -> Key:
        return (self.namespace, self.name)

    @property
    def gpus(self) -> int:
        return task_gpus(self.nnodes, self.gpus_per_node)


@dataclass(frozen=True)
class WorkerNode:
    """A Ray worker node: its GPUs, and how many Ray says are in use (by anyone)."""

    node_id: str
    total_gpus: float
    used_gpus: float = 0.0

    @property
    def free_gpus(self) -> float:
        return max(0.0, self.total_gpus - self.used_gpus)


@dataclass(frozen=True)
class Capacity:
    """The alive worker nodes, as Ray reports them."""

    workers: tuple[WorkerNode, ...] = ()

    @property
    def total_gpus(self) -> float:
        return sum(w.total_gpus for w in self.workers)


@dataclass(frozen=True)
class Claim:
    """GPUs Argus admitted that Ray does not show as used yet: ``bundles`` bundles of
    ``gpus_per_node`` GPUs, each on a node of its own. With ``node_id`` (one bundle): GPUs a
    torchrun driver holds on the node Ray placed it on (see the module's docstring)."""

    bundles: int
    gpus_per_node: int
    node_id: str | None = None


@dataclass(frozen=True)
class QueueSettings:
    max_running: int = 4
    policy: Policy = "fifo"
    half_life: float = 3600.0          # fair: usage halves this often (seconds)
    max_wait: float = 24 * 3600.0      # fair: a task waiting longer goes first in its band
    default_quota: int | None = None   # GPUs per user when their namespaces say nothing


@dataclass
class Admission:
    admit: list[QueuedTask] = field(default_factory=list)
    # key -> 1-based position in the queue, for every task still queued
    positions: dict[Key, int] = field(default_factory=dict)
    # key -> (reason, message) for every task still queued
    waiting: dict[Key, tuple[str, str]] = field(default_factory=dict)
    # key -> the cluster each admitted task goes to
    placed: dict[Key, str] = field(default_factory=dict)
    # key -> the cluster (one that cannot be read now) a waiting task waits for
    unreadable: dict[Key, str] = field(default_factory=dict)


# --------------------------------------------------------------------------- usage

@dataclass(frozen=True)
class UsageRecord:
    """A user's task held ``gpus`` GPUs from ``start`` until ``end`` (None: still)."""

    user: str
    gpus: int
    start: dt.datetime
    end: dt.datetime | None = None


def decayed_usage(records: Iterable[UsageRecord], now: dt.datetime, half_life: float) -> dict[str, float]:
    """GPU-seconds per user, each second weighted by 2^(-age/half_life): the integral of
    gpus x 2^(-(now - t)/h) dt over [start, end]."""
    rate = math.log(2) / half_life
    out: dict[str, float] = {}
    for r in records:
        end = min(r.end or now, now)
        if end <= r.start:
            continue
        a, b = (now - end).total_seconds(), (now - r.start).total_seconds()
        out[r.user] = out.get(r.user, 0.0) + r.gpus * (math.exp(-rate * a) - math.exp(-rate * b)) / rate
    return out


# --------------------------------------------------------------------------- fitting

def _place(free: list[float], nnodes: int, per_node: float) -> list[int] | None:
    """The nodes a task's bundles go on (best fit: the fullest nodes that still fit), or None."""
    fitting = sorted((f, i) for i, f in enumerate(free) if f >= per_node)
    if len(fitting) < nnodes:
        return None
    return [i for _, i in fitting[:nnodes]]


def free_per_node(capacity: Capacity, claims: Iterable[Claim]) -> list[float]:
    """Ray's free GPUs per worker node, minus the claims Ray does not show yet: a claim on a
    node there (its use is at least the claims on it), the others placed as verl would
    (biggest first, best fit; a claim that fits nowhere takes from the freest)."""
    claims = list(claims)
    pinned: dict[str, float] = {}
    for c in claims:
        if c.node_id is not None:
            pinned[c.node_id] = pinned.get(c.node_id, 0.0) + c.bundles * c.gpus_per_node
    free = [min(w.free_gpus, max(0.0, w.total_gpus - pinned.get(w.node_id, 0.0))) for w in capacity.workers]
    bundles = sorted((c.gpus_per_node for c in claims if c.node_id is None for _ in range(c.bundles)), reverse=True)
    for per_node in bundles:
        chosen = _place(free, 1, per_node)
        i = chosen[0] if chosen else max(range(len(free)), key=free.__getitem__, default=None)
        if i is not None:
            free[i] = max(0.0, free[i] - per_node)
    return free


def _unschedulable(task: QueuedTask, capacity: Capacity) -> str | None:
    big_enough = sum(1 for w in capacity.workers if w.total_gpus >= task.gpus_per_node)
    if big_enough >= task.nnodes:
        return None
    largest = max((w.total_gpus for w in capacity.workers), default=0)
    n = len(capacity.workers)
    return (f"needs {task.nnodes} worker node(s) with {task.gpus_per_node} GPUs each, but the largest worker node has {largest:g} GPUs "
            f"and there {'is' if n == 1 else 'are'} {n} worker node(s){f' ({big_enough} big enough)' if big_enough else ''}; "
            "it will run only if the cluster grows")


# --------------------------------------------------------------------------- the decision

def positions(queued: Iterable[QueuedTask], settings: QueueSettings, usage: Mapping[str, float], now: dt.datetime) -> dict[Key, int]:
    """Each queued task's 1-based place in the whole queue: what ``decide`` gives the tasks it
    leaves waiting, computed from the tasks alone (no Ray), so any replica can serve it on
    demand (servers/logapi/queueview.py) instead of writing it into every task's status."""
    return {t.key: i for i, t in enumerate(order(queued, settings, usage, now), 1)}


def order(queued: Iterable[QueuedTask], settings: QueueSettings, usage: Mapping[str, float], now: dt.datetime) -> list[QueuedTask]:
    """The queue's order under the policy."""
    def fifo(t: QueuedTask) -> tuple[int, str, str, str]:
        return (-t.priority, t.created, t.namespace, t.name)

    if settings.policy == "fifo":
        return sorted(queued, key=fifo)

    def fair(t: QueuedTask) -> tuple[int, int, float, str, str, str]:
        created = parse_time(t.created)
        aged = created is not None and (now - created).total_seconds() >= settings.max_wait
        return (-t.priority, 0 if aged else 1, 0.0 if aged else usage.get(t.user, 0.0), t.created, t.namespace, t.name)

    return sorted(queued, key=fair)


@dataclass(frozen=True)
class Room:
    """One Ray cluster as the queue sees it: its worker nodes (``capacity``; None: Ray could
    not be read, nothing is admitted there), the claims of the tasks admitted to it, how
    many of them are active, its own cap (None: only the operator's ``max_running``),
    whether it takes new tasks (not when drained or being deleted), the verl versions argus
    doctor last read in its snapshot (empty: not known) and the one a task that says none is
    composed for (Argus's default release)."""

    name: str
    capacity: Capacity | None
    claims: tuple[Claim, ...] = ()
    running: int = 0
    max_running: int | None = None
    accepting: bool = True
    verl: tuple[str, ...] = ()
    composes: str | None = None

    def verl_drift(self, task: QueuedTask) -> tuple[str, ...]:
        """The verl versions this cluster runs that ``task`` was not composed for: such a
        cluster takes no new task (``Reason.VerlDrift``), since verl would refuse the task's
        configuration at start, after the queue's wait. A cluster whose version is not known
        (doctor not run yet, or its probes read none) holds nothing back: argus doctor may be
        off (--doctor-interval 0), and holding every task on a version never read would stop
        the whole queue on a cluster that may be fine; verl's own start still says it."""
        wanted = task.verl or self.composes
        return tuple(v for v in self.verl if v != wanted) if wanted else ()


def decide(
    queued: list[QueuedTask],
    *,
    running: int,
    capacity: Capacity | None = None,
    settings: QueueSettings,
    claims: Iterable[Claim] = (),
    quotas: Mapping[str, int | None] | None = None,
    in_use: Mapping[str, int] | None = None,
    usage: Mapping[str, float] | None = None,
    now: dt.datetime,
    not_ready: frozenset[Key] = frozenset(),
    rooms: Sequence[Room] | None = None,
    held_back: Mapping[Key, tuple[Reason, str]] | None = None,
) -> Admission:
    """Admit from the head of the queue. ``rooms``: the Ray clusters, most preferred first
    (None: one cluster, ``capacity`` and ``claims``); a task goes to the first of those it
    may use (``QueuedTask.clusters``) that can hold it now. A cluster that could not be read
    (capacity None) admits nothing; the tasks that may use only such clusters wait for them
    (``Admission.unreadable``). Tasks in ``not_ready`` (created but not validated yet) hold
    their place: nothing behind them is admitted before they are queued. ``running``: active
    tasks on all clusters (``settings.max_running`` caps them all); ``quotas``: GPUs per
    user (a missing user: ``settings.default_quota``; None: unlimited), counted across
    clusters; ``in_use``: GPUs each user's tasks hold now; ``usage``: recent usage for ``fair``;
    ``held_back``: tasks that wait for something of their own (files they read that are not in
    the shared tree: ``core.inputs``), with the reason and message: they keep their place and
    block nobody."""
    if rooms is None:
        rooms = [Room("", capacity, tuple(claims), running)]
    quotas, in_use = quotas or {}, dict(in_use or {})
    result = Admission()
    slots = settings.max_running - running
    free = {r.name: free_per_node(r.capacity, r.claims) if r.capacity is not None else [] for r in rooms}
    room_slots = {r.name: (r.max_running - r.running) if r.max_running is not None else math.inf for r in rooms}
    blocked = False  # a task ahead holds back every task behind it
    position = 0
    for task in order(queued, settings, usage or {}, now):
        if task.key in not_ready:
            blocked = True
            continue
        position += 1
        result.positions[task.key] = position
        why, usable, fits = _where(task, rooms, held_back or {})
        if why is not None:
            result.waiting[task.key] = why
            continue
        quota = quotas.get(task.user, settings.default_quota)
        held = in_use.get(task.user, 0)
        if quota is not None and held + task.gpus > quota:
            result.waiting[task.key] = (Reason.QuotaExceeded, f"waiting: its {task.gpus} GPUs would take user {task.user} over the "
                                                         f"{quota} GPUs of its quota")
            continue
        placed = _first_fit(task, fits, free, room_slots) if not blocked and slots > 0 else None
        if placed is not None:
            result.admit.append(task)
            result.placed[task.key] = placed.name
            del result.positions[task.key]
            position -= 1
            slots -= 1
            room_slots[placed.name] -= 1
            in_use[task.user] = held + task.gpus
            continue
        if not fits:
            # Every cluster it may use that could hold it cannot be read now: it waits for them.
            result.unreadable[task.key] = next(r.name for r in usable if r.capacity is None)
            message = "waiting behind tasks ahead in the queue" if blocked else "waiting for its Ray cluster to answer"
        elif blocked:
            message = "waiting behind tasks ahead in the queue"
        elif slots <= 0:
            message = f"waiting for a free slot ({settings.max_running} tasks may run at once)"
            blocked = True  # no slot for anyone behind it either
        else:
            message = _wait_for_room(task, fits, free, room_slots, named=len(rooms) > 1)
        result.waiting[task.key] = (Reason.Queued, message + _elsewhere(task, rooms))
    return result


def _where(task: QueuedTask, rooms: Sequence[Room], held_back: Mapping[Key, tuple[Reason, str]]
           ) -> tuple[tuple[Reason, str] | None, list[Room], list[Room]]:
    """Why the task can go nowhere now whatever frees up (its own missing files, no cluster
    it may use, none that could ever hold it), or None; and the clusters it may use now, and
    those of them that could hold it (``decide``)."""
    if task.key in held_back:
        return held_back[task.key], [], []
    eligible = [r for r in rooms if task.clusters is None or r.name in task.clusters]
    usable = [r for r in eligible if r.accepting and not r.verl_drift(task)]
    if not usable:
        return _no_cluster(task, eligible), usable, []
    readable = [r for r in usable if r.capacity is not None]
    fits = [r for r in readable if _unschedulable(task, r.capacity) is None]  # type: ignore[arg-type]
    if readable and not fits and len(readable) == len(usable):
        why = _unschedulable(task, readable[0].capacity)  # type: ignore[arg-type]
        if len(rooms) > 1:
            why = f"on cluster {readable[0].name}: {why}" if len(readable) == 1 else f"on none of clusters {', '.join(r.name for r in readable)}: {why}"
        return (Reason.Unschedulable, why or ""), usable, fits
    return None, usable, fits


def _first_fit(task: QueuedTask, fits: list[Room], free: dict[str, list[float]], room_slots: dict[str, float]) -> Room | None:
    """The first cluster (in preference order) with a slot and the nodes for the task now;
    the nodes it takes are taken from ``free``."""
    for room in fits:
        chosen = _place(free[room.name], task.nnodes, task.gpus_per_node) if room_slots[room.name] > 0 else None
        if chosen is not None:
            for i in chosen:
                free[room.name][i] -= task.gpus_per_node
            return room
    return None


def _wait_for_room(task: QueuedTask, fits: list[Room], free: dict[str, list[float]], room_slots: dict[str, float], *, named: bool) -> str:
    """Why a task that fits some cluster, with the queue's slots free, waits: its clusters'
    own caps (nobody else starts there either, the others go on), or free GPUs."""
    if all(room_slots[r.name] <= 0 for r in fits):
        return "waiting for a free slot on " + ", ".join(f"cluster {r.name} ({r.max_running} tasks may run there)" for r in fits)
    # It fits a cluster, not yet: on the most preferred one with a slot, the nodes closest to
    # holding it are reserved for it (nothing else starts there, so they only drain), and the
    # tasks behind it may use the other nodes. It is never starved by smaller tasks.
    room = next(r for r in fits if room_slots[r.name] > 0)
    _reserve(free[room.name], room.capacity, task)
    on = f" on cluster {room.name}" if named else ""
    return (f"waiting for {task.nnodes} worker node(s) with {task.gpus_per_node} free GPUs each{on}; "
            "the nodes closest to holding it are kept for it as they drain")


def _no_cluster(task: QueuedTask, eligible: list[Room]) -> tuple[Reason, str]:
    """Why a task no cluster may take now waits: the verl its clusters run (it goes when
    argus doctor finds the right one there), or their drain or deletion, or none exists."""
    drifted = [r for r in eligible if r.accepting and r.verl_drift(task)]
    if drifted:
        wanted = task.verl or drifted[0].composes
        runs = "; ".join(f"{'cluster ' + r.name if r.name else 'the Ray cluster of --ray-address'} runs verl "
                         f"{' and '.join(r.verl_drift(task))}" for r in drifted)
        return (Reason.VerlDrift, f"waiting: {runs} (argus doctor read it in the verl snapshot), but the task is composed for "
                f"verl {wanted} (a task is composed for the release its cluster runs when Argus has that release's config tree, "
                "one release per cluster); it goes when argus doctor finds one it has there")
    if eligible:
        return (Reason.NoCluster, "waiting: " + ", ".join(f"cluster {r.name}" for r in eligible) +
                " takes no new tasks now (drained, or being deleted)")
    return (Reason.NoCluster, "waiting: no Ray cluster it may use exists (spec.cluster, and the ArgusClusters' namespaceSelector)")


def _elsewhere(task: QueuedTask, rooms: Sequence[Room]) -> str:
    """What a waiting task's message adds when clusters it may use run a verl other than the one
    it is composed for (core.verlchoice chose the release of the others): it does not go there."""
    other = [r for r in rooms if (task.clusters is None or r.name in task.clusters) and r.accepting and r.verl_drift(task)]
    if not other:
        return ""
    return (f"; composed for verl {task.verl or other[0].composes}, it does not go to "
            + ", ".join(f"cluster {r.name} (verl {' and '.join(r.verl)})" for r in other))


def _reserve(free: list[float], capacity: Capacity | None, task: QueuedTask) -> list[int]:
    """Keep the nodes closest to holding ``task`` (big enough, most free) for it: marked
    unusable for the tasks behind it in this pass."""
    assert capacity is not None
    big = sorted((i for i, w in enumerate(capacity.workers) if w.total_gpus >= task.gpus_per_node and free[i] >= 0),
                 key=lambda i: (-free[i], i))[:task.nnodes]
    for i in big:
        free[i] = -1.0  # reserved
    return big
