"""Preemption by lost work: the running tasks a waiting one may take GPUs from, and which it
takes; issue 38. Pure: the scheduler gives it a cluster's free GPUs per node,
the running tasks there with what each holds and where, and the policy; it decides.

**Who may preempt whom** (``may_preempt``).
- A waiting task may preempt running tasks of *strictly lower* priority, never of equal or
  higher priority.
- Under fair share, and only when the policy turns it on (``fair_share_ratio``), a task may
  also preempt a task of its *own* priority whose user is far above their share while its
  own user is below it: the victim's user's recent usage at least ``fair_share_ratio`` times
  the mean, the preemptor's below the mean. A ratio above 1 is the hysteresis: after the
  preemption the two users cannot swap places at once, so nothing thrashes; and a task that
  has run less than ``fair_share_min_runtime`` is not taken this way.
- A task with ``spec.preemptible: false`` is never a victim.

**What a set of victims costs** (``lost_steps``). verl checkpoints when
``trainer.save_freq > 0`` and the step is a multiple of it (and at the last step), and with
``trainer.resume_mode=auto`` a new attempt resumes from the newest checkpoint
(``verl/trainer/ppo/ray_trainer.py``, ``verl/trainer/sft_trainer.py``). A stopped task so loses the steps since its last
checkpoint: ``step mod save_freq`` (since the step it resumed from, if no checkpoint came
after). Without checkpoints (``save_freq <= 0``) or with resuming off
(``resume_mode=disable``) it loses every step of the attempt, and such a task is taken
last: only when no set of resumable tasks would do. A set costs its victims' lost steps
times their GPUs (GPU-steps).

**Which set** (``choose_victims``). Among the sets of preemptible running tasks whose GPUs
would make the waiting task fit (node by node, as the queue fits: ``core.queue``), the one
that loses least: fewest tasks that cannot resume, then fewest GPU-steps lost, then fewest
victims, then the lowest priorities, then the newest tasks. The search is best-first over
the sets in that order, so the first set that fits is the cheapest; it gives up after
``SEARCH_LIMIT`` sets (a pathological cluster: hundreds of victims, none enough alone) and
says so, and the task then waits as it would without preemption.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .times import parse_time
from .vocabulary import Key

# Sets of victims examined at most for one waiting task (see the module's docstring).
SEARCH_LIMIT = 20_000


@dataclass(frozen=True)
class PreemptionPolicy:
    """The chart's ``preemption`` values, as the operator's flags give them."""

    enabled: bool = False
    fair_share_ratio: float | None = None  # None: no preemption for fair share (the default)
    fair_share_min_runtime: float = 600.0  # seconds a task runs before fair share may take it


@dataclass(frozen=True)
class RunningTask:
    """A running task as preemption sees it: what it holds where, and what stopping it loses.

    ``holds``: GPUs per worker node id (the nodes of its placement groups, or its torchrun
    driver's node). ``step``: the last step verl reported (None: none yet); ``save_freq``
    and ``resumable`` from its composed configuration (``trainer.save_freq``,
    ``trainer.resume_mode != disable``); ``resumed_from``: the step this attempt resumed
    from. ``started``: RFC 3339, when this attempt started."""

    key: Key
    priority: int
    user: str
    started: str
    holds: tuple[tuple[str, float], ...]
    step: int | None = None
    save_freq: int | None = None
    resumable: bool = True
    resumed_from: int | None = None
    preemptible: bool = True

    @property
    def gpus(self) -> float:
        return sum(g for _, g in self.holds)

    @property
    def can_resume(self) -> bool:
        """Whether a new attempt resumes from a checkpoint rather than from scratch."""
        return self.resumable and (self.save_freq or 0) > 0

    @property
    def lost_steps(self) -> int:
        return lost_steps(self.step, self.save_freq, resumable=self.resumable, resumed_from=self.resumed_from)


def lost_steps(step: int | None, save_freq: int | None, *, resumable: bool = True, resumed_from: int | None = None) -> int:
    """The steps a task loses when stopped after ``step``: those since its last checkpoint
    (verl's rule: a checkpoint at every multiple of ``save_freq``), or every step of the
    attempt when it checkpoints never or does not resume."""
    if step is None:
        return 0
    start = resumed_from or 0
    if not resumable or not save_freq or save_freq <= 0:
        return max(0, step - start)
    last_checkpoint = max(start, step - step % save_freq)
    return max(0, step - last_checkpoint)


@dataclass(frozen=True)
class Waiting:
    """The waiting task: its priority and user, and its shape (``nnodes`` bundles of
    ``gpus_per_node`` GPUs, each on a node of its own)."""

    key: Key
    priority: int
    user: str
    nnodes: int
    gpus_per_node: int


@dataclass(frozen=True)
class Preemption:
    """The victims chosen, and what they lose: GPU-steps in all, and whether any of them
    cannot resume (it starts again from scratch)."""

    victims: tuple[RunningTask, ...]
    gpu_steps: float
    from_scratch: tuple[Key, ...]


def may_preempt(task: Waiting, victim: RunningTask, policy: PreemptionPolicy, *, usage: Mapping[str, float] | None = None,
                now_seconds: float | None = None) -> bool:
    """Whether ``task`` may take ``victim``'s GPUs (module docstring: who may preempt whom)."""
    if not policy.enabled or not victim.preemptible or victim.key == task.key:
        return False
    if victim.priority < task.priority:
        return True
    if victim.priority != task.priority or policy.fair_share_ratio is None or usage is None or now_seconds is None:
        return False
    started = parse_time(victim.started)
    if started is None or now_seconds - started.timestamp() < policy.fair_share_min_runtime:
        return False
    users = [u for u, v in usage.items() if v > 0] or [task.user]
    mean = sum(usage.get(u, 0.0) for u in users) / len(users)
    return victim.user != task.user and usage.get(task.user, 0.0) < mean and usage.get(victim.user, 0.0) >= policy.fair_share_ratio * mean


def _fits(free: list[float], nnodes: int, per_node: float) -> bool:
    return sum(1 for f in free if f >= per_node) >= nnodes


def choose_victims(task: Waiting, free: Mapping[str, float], running: Sequence[RunningTask], policy: PreemptionPolicy, *,
                   usage: Mapping[str, float] | None = None, now_seconds: float | None = None) -> Preemption | None:
    """The cheapest set of victims whose GPUs make ``task`` fit (module docstring), or None:
    it fits already, no set would make it fit, or the search gave up. ``free``: each worker
    node's free GPUs now (after the claims Ray does not show yet)."""
    nodes = list(free)
    base = [free[n] for n in nodes]
    if _fits(base, task.nnodes, task.gpus_per_node):
        return None
    index = {n: i for i, n in enumerate(nodes)}
    candidates = [v for v in running if v.gpus > 0 and may_preempt(task, v, policy, usage=usage, now_seconds=now_seconds)]
    # Cheapest first: the search adds victims in this order, so every set is met once.
    candidates.sort(key=lambda v: (not v.can_resume, v.lost_steps * v.gpus, v.priority, _newest(v), v.key))
    if not candidates:
        return None
    if not _fits(_freed(base, index, candidates), task.nnodes, task.gpus_per_node):
        return None  # even all of them would not do
    # Best-first over the sets: from a set whose last victim is candidate i, the next ones
    # are "add i+1" and "i+1 instead of i"; neither is cheaper (the candidates are sorted by
    # the same terms), and every set is reached once, from {0}.
    heap: list[tuple[tuple[object, ...], tuple[int, ...]]] = [(_cost([candidates[0]]), (0,))]
    examined = 0
    while heap and examined < SEARCH_LIMIT:
        _, chosen = heapq.heappop(heap)
        examined += 1
        victims = [candidates[i] for i in chosen]
        if _fits(_freed(base, index, victims), task.nnodes, task.gpus_per_node):
            return Preemption(tuple(victims), sum(v.lost_steps * v.gpus for v in victims), tuple(v.key for v in victims if not v.can_resume))
        last = chosen[-1]
        if last + 1 < len(candidates):
            for more in ((*chosen, last + 1), (*chosen[:-1], last + 1)):
                heapq.heappush(heap, (_cost([candidates[j] for j in more]), more))
    return None


def _freed(base: list[float], index: Mapping[str, int], victims: Iterable[RunningTask]) -> list[float]:
    out = list(base)
    for v in victims:
        for node, gpus in v.holds:
            if node in index:
                out[index[node]] += gpus
    return out


def _newest(v: RunningTask) -> float:
    started = parse_time(v.started)
    return -(started.timestamp() if started else 0.0)


def _cost(vs: list[RunningTask]) -> tuple[object, ...]:
    """A set's place in the order (module docstring: which set); adding a victim, or putting
    a later candidate in place of one, never lowers it: that makes the best-first search exact."""
    return (sum(1 for v in vs if not v.can_resume), sum(v.lost_steps * v.gpus for v in vs), len(vs),
            tuple(sorted((v.priority for v in vs), reverse=True)), tuple(sorted(_newest(v) for v in vs)))
