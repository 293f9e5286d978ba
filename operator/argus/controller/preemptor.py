"""The preemptor (``Preemptor``) stops running tasks for a waiting one of higher priority: once
per queue pass, with ``--preemption``; ``core.preemption`` chooses the victims, the lifecycle
moves them (``core.preempted``).

After the queue's decision (``scheduler``), the first task in queue order that waits for
GPUs some set of running tasks would free on a cluster it may use gets that set: each
victim is told ``Preempt`` (its job is stopped; it goes back to the queue and resumes), and
the waiting task's message says whose GPUs it waits for, and its ``status.preempts`` names
them (``preempts``: the scheduler writes it with the rest of its waiting status). It is then
admitted by a later pass, once Ray shows them free; it is ahead of its victims in the queue
(higher priority), so they cannot take them back. One preemption at a time per cluster: while
a victim there is still stopping, nothing more is taken there (its GPUs are on their way;
until the task it was stopped for is admitted, as Ray's GPU use lags: USAGE_LAG_SECONDS).
A new process (after a restart) learns what is on its way from the victims: those still
stopping (``status.preemptedBy``), and those back in the queue whose preempted attempt's
workers Ray still shows, or that ended less than USAGE_LAG_SECONDS ago (their attempt
record's ``preemptedBy`` names whom the GPUs go to).

What each candidate loses comes from its status (the last step verl reported, the step it
resumed from) and from how its run checkpoints: ``trainer.save_freq`` and
``trainer.resume_mode`` as its configuration composed when it started (remembered by the
scheduler; composed again after an operator restart). Where it holds GPUs comes from Ray:
its verl workers' placement groups, or the node its torchrun driver runs on. A task Ray does
not show holding GPUs yet (just submitted) is no candidate.

Preemption frees GPUs, not slots: a task that waits for ``--max-running`` is not helped by
it, and preempts nobody.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from ..core import lifecycle
from ..core.config import PlatformConfig
from ..core.plan import validate_spec
from ..core.preempted import victim_message
from ..core.preemption import Preemption, PreemptionPolicy, RunningTask, Waiting, choose_victims
from ..core.queue import Admission, QueuedTask, Room, free_per_node
from ..core.rayjobs import RayJobUnknown, RayRefused, RayUnreachable
from ..core.times import parse_time
from ..core.verlchoice import Composers
from ..core.vocabulary import Key, Reason
from .fleet import Fleet
from .jobsync import JobSync
from .metrics import Metrics
from .queuesnapshot import QueueSnapshot
from .reconcile import Draft, TaskReconciler
from .view import TaskView, composed_with

log = logging.getLogger(__name__)
# Ray's GPU use per node (the dashboard's cluster status, what the queue's capacity reads) lags
# the removal of a stopped job's placement groups by seconds. For this long after a victim's
# groups are gone, while the task it was stopped for still waits, its GPUs count as on their
# way: a capacity read that still shows them in use must not look like a cluster where nothing
# is being freed, or a second victim would be taken (the chaos benchmark's preempt-restart).
USAGE_LAG_SECONDS = 20.0


@dataclass(frozen=True)
class Checkpointing:
    """How a task's run checkpoints, as composed: verl's trainer.save_freq and resume_mode."""

    save_freq: int | None
    resume_mode: str | None

    @property
    def resumable(self) -> bool:
        return self.resume_mode != "disable"

    @property
    def can_resume(self) -> bool:
        """Whether a new attempt resumes from a checkpoint (as ``RunningTask.can_resume``)."""
        return self.resumable and (self.save_freq or 0) > 0


@dataclass(frozen=True)
class _Freeing:
    """A victim whose GPUs are on their way to the task that preempted it: until it has
    stopped and Ray no longer shows its verl workers' placement groups."""

    cluster: str
    by: Key
    victim: Key
    job_id: str | None
    resumes: bool = True  # False: its next attempt starts over (no checkpoint, or resume_mode=disable)
    gone_at: float | None = None  # when it was first seen stopped with its groups gone (seconds since the epoch)

    @property
    def victim_name(self) -> str:
        return f"{self.victim[0]}/{self.victim[1]}"


class Preemptor:
    def __init__(self, policy: PreemptionPolicy, snapshot: QueueSnapshot, fleet: Fleet, jobs: JobSync, task_reconciler: TaskReconciler,
                 platform_on: Callable[[str], PlatformConfig], composers: Composers | None, *, metrics: Metrics,
                 steps: Callable[[Key], tuple[int | None, int | None]] = lambda key: (None, None)):
        self.policy = policy
        self.snapshot = snapshot
        self.fleet = fleet
        self.jobs = jobs
        self.task_reconciler = task_reconciler
        self.platform_on = platform_on
        self.composers = composers
        self.metrics = metrics
        self.steps = steps  # the log followers' latest step and resume point of a running task
        self._checkpointing: dict[tuple[str, int], Checkpointing] = {}  # (uid, attempt) -> as composed
        self._freeing: list[_Freeing] = []
        self._asked: set[tuple[str, int]] = set()  # (uid, attempt): preempted attempts Ray was asked about (_requeued_before)

    def remember(self, view: TaskView, save_freq: int | None, resume_mode: str | None) -> None:
        """How an attempt that starts now checkpoints (the scheduler's validation composed it)."""
        self._checkpointing[(view.uid, view.state.attempt)] = Checkpointing(save_freq, resume_mode)

    def forget(self, present: set[str]) -> None:
        """Drop what is remembered of tasks that are gone (by UID)."""
        for key in [k for k in self._checkpointing if k[0] not in present]:
            del self._checkpointing[key]
        self._asked = {k for k in self._asked if k[0] in present}

    async def run(self, decision: Admission, active: list[TaskView], now_seconds: float, queued: list[TaskView]) -> None:
        """Preempt for the first waiting task that some victims would make fit, and say so in
        the waiting messages of ``decision`` (the tasks that wait for victims still stopping)."""
        if not self.policy.enabled:
            return
        preempting = {v.key for v in active if v.state.preempting}
        self._freeing = [kept for f in self._freeing if (kept := self._still_freeing(f, preempting, set(decision.waiting), now_seconds))]
        for v in active:  # victims this process did not preempt (before a restart) still stop
            if v.key in preempting and not any(f.victim == v.key for f in self._freeing):
                namespace, _, name = (v.state.status.preempted_by or "").partition("/")
                self._freeing.append(_Freeing(v.job_cluster, (namespace, name), v.key, self.jobs.job_ids.get(v.key),
                                              self._checkpointing_of(v).can_resume))
        await self._requeued_before(queued, set(decision.waiting), now_seconds)
        self._tell(decision)
        busy = {f.cluster for f in self._freeing}  # one preemption at a time per cluster
        rooms = [r for r in self.snapshot.rooms if r.capacity is not None and r.name not in busy]
        by_key = {t.key: t for t in self.snapshot.queued}
        # Per cluster, made once per pass when first needed: its free GPUs per node and the running tasks there.
        seen: dict[str, tuple[dict[str, float], list[RunningTask]]] = {}
        for key, (reason, _) in sorted(decision.waiting.items(), key=lambda kv: decision.positions.get(kv[0], 1 << 30)):
            task = by_key.get(key)
            if reason != Reason.Queued or task is None or any(f.by == key for f in self._freeing):
                continue
            for room in rooms:
                if task.clusters is not None and room.name not in task.clusters:
                    continue
                if room.name not in seen:
                    seen[room.name] = (_free(room), self._candidates(room, active))
                free, candidates = seen[room.name]
                chosen = choose_victims(_waiting(task), free, candidates, self.policy, usage=self.snapshot.usage, now_seconds=now_seconds)
                if chosen is not None:
                    await self._preempt(task, room.name, chosen, active)
                    self._tell(decision)
                    return

    async def _requeued_before(self, queued: list[TaskView], waiting: set[Key], now_seconds: float) -> None:
        """Victims back in the queue, preempted by an earlier process (a restart), whose GPUs
        are still on their way: Ray still shows their workers' groups, or they ended less than
        USAGE_LAG_SECONDS ago and the task they were stopped for still waits. The cluster is
        then busy; without this a new process would take a second victim. Ray is asked once
        per preempted attempt."""
        for v in queued:
            records = v.state.status.attempts or []
            record = records[-1] if records else None
            if (v.state.status.reason != Reason.Preempted or record is None or record.outcome != Reason.Preempted
                    or not record.preempted_by or (v.uid, record.attempt) in self._asked or any(f.victim == v.key for f in self._freeing)):
                continue
            cluster = v.cluster_of_job(record.submission_id)
            try:
                job_id = (await self.fleet.ray(cluster).job(record.submission_id)).job_id
            except RayJobUnknown:
                job_id = None  # Ray forgot it: nothing of it holds GPUs
            except (RayUnreachable, RayRefused):
                continue  # asked again at the next pass
            self._asked.add((v.uid, record.attempt))
            nodes = self.fleet.nodes(cluster)
            namespace, _, name = record.preempted_by.partition("/")
            ended = parse_time(record.end_time)
            gone_at = None if job_id and nodes is not None and nodes.placed_on(job_id) else ended.timestamp() if ended else now_seconds
            if gone_at is None or ((namespace, name) in waiting and now_seconds - gone_at < USAGE_LAG_SECONDS):
                self._freeing.append(_Freeing(cluster, (namespace, name), v.key, job_id, self._checkpointing_of(v, record.attempt).can_resume,
                                              gone_at))

    def preempts(self, key: Key) -> tuple[str, ...]:
        """The tasks (namespace/name) stopped for ``key`` whose GPUs are still on their way to
        it: its ``status.preempts`` while it waits (nothing once they are free, or none was)."""
        return tuple(sorted(f.victim_name for f in self._freeing if f.by == key))

    def _tell(self, decision: Admission) -> None:
        """Each task that victims stop for waits for their GPUs: its message says whose."""
        for by in {f.by for f in self._freeing}:
            if by in decision.waiting and decision.waiting[by][0] == Reason.Queued:
                names = ", ".join(f.victim_name for f in self._freeing if f.by == by)
                over = [f.victim_name for f in self._freeing if f.by == by and not f.resumes]
                why = f"; {', '.join(over)} cannot resume and start(s) over from the first step" if over else ""
                decision.waiting[by] = (Reason.Queued, f"waiting for the GPUs of {names}, stopped for it (preemption){why}")

    def _candidates(self, room: Room, active: list[TaskView]) -> list[RunningTask]:
        nodes = self.fleet.nodes(room.name)
        out = []
        for v in active:
            if v.job_cluster != room.name or v.state.preempting or nodes is None:
                continue
            holds = self.snapshot.placed(v, nodes)
            if not holds:
                continue  # Ray does not show it holding GPUs yet: stopping it frees nothing known
            status = v.state.status
            progress = status.progress
            step, resumed_from = self.steps(v.key)  # fresher than the status (written at most every --progress-interval)
            if step is None and progress is not None:
                step, resumed_from = progress.step, progress.resumed_from_step
            ckpt = self._checkpointing_of(v)
            out.append(RunningTask(v.key, v.as_queued().priority, status.user or "", (status.ray_job.start_time if status.ray_job else None)
                                   or status.admitted_at or v.created, tuple(sorted(holds.items())),
                                   step=step, save_freq=ckpt.save_freq, resumable=ckpt.resumable, resumed_from=resumed_from,
                                   preemptible=v.spec.get("preemptible") is not False))
        return out

    def _still_freeing(self, freeing: _Freeing, preempting: set[Key], waiting: set[Key], now_seconds: float) -> _Freeing | None:
        """``freeing`` as it stands now, or None once its GPUs are no longer on their way: the
        victim has stopped, Ray shows none of its groups, and the task it was stopped for was
        admitted (or no longer waits), or USAGE_LAG_SECONDS have passed since."""
        nodes = self.fleet.nodes(freeing.cluster)
        if freeing.victim in preempting or (nodes is not None and freeing.job_id and nodes.placed_on(freeing.job_id)):
            return replace(freeing, gone_at=None)
        gone_at = now_seconds if freeing.gone_at is None else freeing.gone_at
        return replace(freeing, gone_at=gone_at) if freeing.by in waiting and now_seconds - gone_at < USAGE_LAG_SECONDS else None

    def _checkpointing_of(self, v: TaskView, attempt: int | None = None) -> Checkpointing:
        """How its current attempt (or ``attempt``) checkpoints: as remembered at its start,
        else composed again (after an operator restart)."""
        key = (v.uid, attempt or v.state.attempt)
        if key not in self._checkpointing:
            verdict = validate_spec(v.spec, v.state.status.user or "", self.platform_on(v.job_cluster), namespace=v.namespace, name=v.name,
                                    uid=v.uid, attempt=key[1], composer=composed_with(self.composers, v))
            self._checkpointing[key] = Checkpointing(verdict.save_freq, verdict.resume_mode)
        return self._checkpointing[key]

    async def _preempt(self, task: QueuedTask, cluster: str, chosen: Preemption, active: list[TaskView]) -> None:
        by = f"{task.namespace}/{task.name}"
        views = {v.key: v for v in active}
        for victim in chosen.victims:
            view = views[victim.key]
            lost = victim.lost_steps
            message = victim_message(by, task.priority, victim.priority, lost, resumes=victim.can_resume)
            async with self.task_reconciler.lock(view.key):
                await self.task_reconciler.decide_and_write(Draft.of(view), lifecycle.Preempt(by, message))
            self._freeing.append(_Freeing(cluster, task.key, view.key, self.jobs.job_ids.get(view.key), victim.can_resume))
            self.metrics.preemptions.labels(cluster=cluster).inc()
            self.metrics.preemption_lost_gpu_steps.labels(cluster=cluster).inc(lost * victim.gpus)
            log.info("preempted %s/%s for %s: %s", *view.key, by, message)


def _waiting(task: QueuedTask) -> Waiting:
    return Waiting(task.key, task.priority, task.user, task.nnodes, task.gpus_per_node)


def _free(room: Room) -> dict[str, float]:
    """Each worker node's free GPUs as the queue counts them (Ray's, minus the claims)."""
    assert room.capacity is not None
    free = free_per_node(room.capacity, room.claims)
    return {w.node_id: f for w, f in zip(room.capacity.workers, free, strict=True)}
