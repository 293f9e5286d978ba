"""The queue's admission decision: which queued tasks may start now.

One global queue across namespaces, ordered by priority (higher first), then creation
time, then namespace/name. A task is admitted while fewer than ``max_running`` tasks run
and the worker nodes have its ``nnodes * nGpusPerNode`` GPUs free.

Policy for tasks that do not fit (docs/queue.md):
- A task that needs more GPUs than the worker nodes have *in total* can never run: it is
  marked Unschedulable and skipped, so it blocks nobody.
- A task that could fit but not yet *blocks the tasks behind it* (no backfill): a big
  task is never starved by a stream of small ones. The price is idle GPUs while it waits.

Free GPUs are the workers' total minus what running Argus tasks reserved (a verl driver
holds no GPU itself until its workers start, so Ray's live "available" figure would
over-admit), and never more than Ray reports available.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class QueuedTask:
    namespace: str
    name: str
    priority: int
    created: str  # RFC 3339, compares in time order
    gpus: int

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    def order(self) -> tuple[int, str, str, str]:
        return (-self.priority, self.created, self.namespace, self.name)


@dataclass(frozen=True)
class Capacity:
    """GPUs on the worker nodes (nodes carrying the worker resource) only."""

    total_gpus: float
    available_gpus: float


@dataclass
class Admission:
    admit: list[QueuedTask] = field(default_factory=list)
    # key -> 1-based position in the queue, for every task still queued
    positions: dict[tuple[str, str], int] = field(default_factory=dict)
    # key -> why it can never run as things are
    unschedulable: dict[tuple[str, str], str] = field(default_factory=dict)
    # key -> why it waits (the first blocked task only; the rest wait behind it)
    waiting: dict[tuple[str, str], str] = field(default_factory=dict)


def decide(
    queued: list[QueuedTask],
    *,
    running: int,
    reserved_gpus: int,
    max_running: int,
    capacity: Capacity | None,
    not_ready: frozenset[tuple[str, str]] = frozenset(),
) -> Admission:
    """Admit from the head of the queue. ``capacity`` None means Ray could not be read:
    nothing is admitted, positions are still given. Tasks in ``not_ready`` (created but
    not validated yet) hold their place: nothing behind them is admitted before they are
    queued, so a task does not lose its turn to a validation that happened to run later."""
    result = Admission()
    ordered = sorted(queued, key=QueuedTask.order)
    slots = max_running - running
    free = 0.0
    if capacity is not None:
        free = min(capacity.total_gpus - reserved_gpus, capacity.available_gpus)
    blocked = capacity is None
    position = 0
    for task in ordered:
        if task.key in not_ready:
            blocked = True
            continue
        if capacity is not None and task.gpus > capacity.total_gpus:
            result.unschedulable[task.key] = (
                f"needs {task.gpus} GPUs (nnodes x nGpusPerNode) but the worker nodes have "
                f"{capacity.total_gpus:g} in total; it will run only if the cluster grows"
            )
            position += 1
            result.positions[task.key] = position
            continue
        if not blocked and slots > 0 and task.gpus <= free:
            result.admit.append(task)
            slots -= 1
            free -= task.gpus
            continue
        if not blocked and capacity is not None:
            result.waiting[task.key] = (
                f"waiting for {task.gpus} free GPUs ({free:g} free)" if slots > 0
                else f"waiting for a free slot ({max_running} tasks may run at once)"
            )
        blocked = True
        position += 1
        result.positions[task.key] = position
    return result
