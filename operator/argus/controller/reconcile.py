"""The task reconciler (``TaskReconciler``) carries out the lifecycle's decisions for one
task: where the controller acts on the world. ``core.lifecycle.step`` decides;
``TaskReconciler.carry_out`` does what the decision says
(submit to Ray, stop a job, remove Ray's records, release the finalizer, delete the task)
and hands each action's outcome back to the lifecycle; the status and the Events are kept
in a ``Draft`` and written once, by the one writer (``writer.StatusWriter``).

How a Ray job is submitted (``_submit``): the finalizer goes on first, so a task can never
be deleted with its job still running (for the task next in line for an ending job's slot,
a moment ahead: ``arm``); then ``RayJobs.submit`` with the plan the lifecycle
carried in its ``Submit`` action, whose submission id is derived from the task's UID and
attempt, so a submission repeated after a crash adopts the job instead of starting another.

Every task is handled under its own lock (``lock``): a cancel, a deletion, an admission and
a Ray read of the same task never interleave.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..core import lifecycle
from ..core.clock import Clock
from ..core.clusters import PLACEMENT_ANNOTATION, placement_annotation
from ..core.lifecycle import Decision, LifecycleSettings, Observation, PostEvent
from ..core.rayjobs import RayAuthFailed, RayJobUnknown, RayRefused, RayUnreachable
from ..core.spec import ArgusTaskStatus, TaskPath
from ..core.store import StoreError
from ..core.vocabulary import Key, task_log
from .fleet import Fleet
from .jobsync import HistoryRemovals, JobSync
from .metrics import Metrics
from .ports import TaskStore
from .view import TaskView
from .writer import StatusWriter, status_document

log = logging.getLogger(__name__)
# At most this many tasks are handled at once: a few thousand API writes one after the
# other would hold a tick for minutes, all at once would flood the API server.
WRITES_IN_FLIGHT = 16


@dataclass
class Draft:
    """One task's decisions within a tick, written once at the end: ``persisted`` is what
    the API has (as far as this process knows), ``view`` the status decided so far."""

    persisted: TaskView
    view: TaskView
    status: ArgusTaskStatus | None = None  # None: nothing decided, nothing to write
    events: list[PostEvent] = field(default_factory=list)

    @classmethod
    def of(cls, view: TaskView) -> Draft:
        return cls(persisted=view, view=view)

    def take(self, decision: Decision) -> list[lifecycle.Action]:
        """Record the decision's status and events; return the other actions."""
        self.status = decision.status
        self.view = self.view.with_changes(status=status_document(decision.status))
        rest: list[lifecycle.Action] = []
        for action in decision.actions:
            if isinstance(action, PostEvent):
                self.events.append(action)
            else:
                rest.append(action)
        return rest


class TaskReconciler:
    """Asks the lifecycle and carries out its answer, one task at a time."""

    def __init__(self, clusters: Fleet, store: TaskStore, writer: StatusWriter, jobs: JobSync, removals: HistoryRemovals,
                 settings: LifecycleSettings, *, clock: Clock, metrics: Metrics):
        self.clusters = clusters
        self.store = store
        self.writer = writer
        self.jobs = jobs
        self.removals = removals
        self.settings = settings
        self.clock = clock
        self.metrics = metrics
        # Tests hold the transition table complete (an undeclared decision raises); the
        # operator carries such a decision out and reports it (_undeclared).
        self.strict_transitions = False
        self._locks: dict[Key, asyncio.Lock] = {}

    def lock(self, key: Key) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    def forget(self, present: set[Key]) -> None:
        """Drop the locks of tasks that are gone (a held lock stays until released)."""
        for key in [k for k in self._locks if k not in present and not self._locks[k].locked()]:
            del self._locks[key]

    async def each(self, coros: Iterable[Awaitable[Any]]) -> None:
        """Await with at most WRITES_IN_FLIGHT at once. One task's failure (an API error, a
        bug) is logged and counted; the others go on, and the next tick tries it again."""
        gate = asyncio.Semaphore(WRITES_IN_FLIGHT)
        coros = list(coros)

        async def one(coro: Awaitable[Any]) -> None:
            async with gate:
                await coro

        try:
            results = await asyncio.gather(*(one(c) for c in coros), return_exceptions=True)
        finally:
            # Cancelled (a stop) before their turn, or before gather's task for them ran at
            # all: they never start, and are closed quietly (not "never awaited" at exit).
            for coro in coros:
                if inspect.iscoroutine(coro) and inspect.getcoroutinestate(coro) == inspect.CORO_CREATED:
                    coro.close()
        # Failures alike (the API server down fails every task the same way) are said once,
        # with how many tasks they hit: not a traceback per task per tick.
        alike: dict[tuple[str, str], list[Exception]] = {}
        for result in results:
            if isinstance(result, asyncio.CancelledError):
                raise result
            if isinstance(result, Exception):
                self.metrics.reconcile_errors.inc()
                what = f"{result.status} {result.reason}: {result.message}" if isinstance(result, StoreError) else str(result)
                alike.setdefault((type(result).__name__, what), []).append(result)
        for (_, what), errors in alike.items():
            tasks = f" ({len(errors)} tasks)" if len(errors) > 1 else ""
            if isinstance(errors[0], StoreError):
                log.warning("Kubernetes API error, trying again next tick%s: %s", tasks, what)
            else:
                log.error("reconciling a task failed%s; trying again next tick", tasks, exc_info=errors[0])

    def step(self, view: TaskView, seen: Observation) -> Decision:
        """The lifecycle's decision for the task on what was seen."""
        return lifecycle.step(view.state, seen, self.clock.now(), self.settings,
                              undeclared=None if self.strict_transitions else self._undeclared)

    def _undeclared(self, what: str) -> None:
        """A decision the transition table does not declare: carried out all the same (a
        task must not stall on a missing row), logged as the bug it is, and counted."""
        self.metrics.undeclared_transitions.inc()
        log.error("%s: carried out; please report it (the table in argus.core.transitions is incomplete)", what)

    async def decide_and_write(self, draft: Draft, seen: Observation, *, shown: asyncio.Event | None = None) -> None:
        """Step on what was seen, carry it out, write it (the caller holds the task's lock).
        ``shown``: see ``StatusWriter.write``."""
        await self.carry_out(draft, self.step(draft.view, seen))
        await self.write(draft, shown=shown)

    async def carry_out(self, draft: Draft, decision: Decision) -> None:
        """Do what the decision says; an action's outcome goes back to the lifecycle."""
        pending = draft.take(decision)
        while pending:
            action = pending.pop(0)
            if isinstance(action, lifecycle.Submit):
                seen = await self._submit(draft, action)
                if seen is not None:
                    pending += draft.take(self.step(draft.view, seen))
            elif isinstance(action, lifecycle.StopJob):
                await self._stop(draft.view.cluster_of_job(action.submission_id), action.submission_id)
            elif isinstance(action, lifecycle.ReleaseFinalizer):
                if await self.writer.remove_finalizer(draft.view):
                    log.info("released %s/%s", draft.view.namespace, draft.view.name, extra=task_log(draft.view.namespace, draft.view.name))
            elif isinstance(action, lifecycle.RemoveRayJobs):
                jobs = tuple((sid, draft.view.cluster_of_job(sid)) for sid in action.submission_ids)
                if await self.removals.remove(jobs) and not draft.view.deleting:
                    pending += draft.take(self.step(draft.view, lifecycle.RayJobsRemoved()))
            elif isinstance(action, lifecycle.DeleteTask):
                if await self.store.delete_task(draft.view.namespace, draft.view.name):
                    log.info("deleted %s/%s: its ttlSecondsAfterFinished ran out", draft.view.namespace, draft.view.name,
                             extra=task_log(draft.view.namespace, draft.view.name))

    async def write(self, draft: Draft, *, shown: asyncio.Event | None = None) -> None:
        """Write what was decided for the task (the caller holds its lock)."""
        if draft.status is None:
            return
        if draft.view.deleting:  # going away: its status no longer matters, its events still do
            self.writer.post(draft.persisted, tuple(draft.events))
        else:
            await self.writer.write(draft.persisted, draft.status, tuple(draft.events), shown=shown)
        draft.status, draft.events = None, []

    async def write_locked(self, draft: Draft) -> None:
        async with self.lock(draft.persisted.key):
            await self.write(draft)

    async def _submit(self, draft: Draft, action: lifecycle.Submit) -> Observation | None:
        """Put the finalizer on (with the placement, on a named cluster), then submit. None:
        the finalizer could not be added (the object changed or went): the next tick tries again."""
        plan = action.plan
        assert plan.submission_id
        placement = placement_annotation(plan.attempt, plan.cluster) if plan.cluster else None
        with_finalizer = await self.writer.add_finalizer(draft.view, {PLACEMENT_ANNOTATION: placement} if placement else None)
        if with_finalizer is None:
            return None
        draft.view = with_finalizer
        draft.persisted = draft.persisted.with_changes(finalizers=with_finalizer.finalizers, annotations=with_finalizer.annotations)
        cluster = self.clusters.get(plan.cluster)
        started = self.clock.monotonic()
        self.jobs.disarm(draft.view.key)  # from here Ray may have the job: read it if in doubt
        try:
            fresh = await self.clusters.ray(plan.cluster).submit(plan)
        except RayAuthFailed as exc:
            return lifecycle.SubmitResult("auth_failed", plan.submission_id, str(exc))
        except RayUnreachable as exc:
            return lifecycle.SubmitResult("unreachable", plan.submission_id, str(exc))
        except RayRefused as exc:
            return lifecycle.SubmitResult("refused", plan.submission_id, str(exc))
        self.jobs.submitted(draft.view.key)
        log.info("%s %s/%s as Ray job %s (%.0f ms)", "submitted" if fresh else "adopted", draft.view.namespace, draft.view.name,
                 plan.submission_id, 1000 * (self.clock.monotonic() - started), extra=task_log(draft.view.namespace, draft.view.name))
        self.metrics.observe_submit_latency(draft.view.created)
        return lifecycle.SubmitResult("submitted" if fresh else "adopted", plan.submission_id,
                                      job_dir=TaskPath(user_path=plan.for_user(plan.job_dir), job_path=plan.job_dir),
                                      log_file=TaskPath(user_path=plan.for_user(plan.log_file), job_path=plan.log_file),
                                      cluster=plan.cluster, dashboard_url=cluster.config.address if cluster is not None else None)

    async def arm(self, view: TaskView, cluster: str) -> None:
        """Put the finalizer (with the placement, on a named cluster) on a queued task ahead of
        its submission (the caller holds its lock): the task next in line for the slot of a
        job whose log said it ended, so that once Ray says so its start is the submission
        alone (``_submit`` finds the finalizer on). Ray has no job of the attempt until then,
        so the lifecycle's reads of a queued task holding the finalizer pass it by
        (``JobSync.never_submitted``)."""
        placement = placement_annotation(view.state.attempt, cluster) if cluster else None
        self.jobs.arm(view.key, view.state.submission_id)
        armed = None
        try:
            armed = await self.writer.add_finalizer(view, {PLACEMENT_ANNOTATION: placement} if placement else None)
        finally:
            if armed is None:  # not on (the object changed or went), or not known: read as any other
                self.jobs.disarm(view.key)

    async def _stop(self, cluster: str, submission_id: str) -> None:
        try:
            await self.clusters.ray(cluster).stop(submission_id)
        except RayJobUnknown:
            pass
        except (RayUnreachable, RayRefused) as exc:
            log.warning("could not stop Ray job %s: %s; trying again at the next read", submission_id, exc)
