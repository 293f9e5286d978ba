"""The controller loop: level-triggered, one for the whole operator. Each tick it gathers
what is new about each task, asks the lifecycle (``core.lifecycle.step``) what that means,
and carries out the answer; the status writer (``writer``) writes it.

A tick (when a followed job is due for a read, at the latest every poll interval, or at
once when the watch shows a change):
1. read the Ray jobs that are due (``jobsync``): active tasks, and tasks that may have
   reached Ray and are being cancelled, deleted or were closed while Ray was unreachable;
2. validate new tasks (the namespace's user, then ``core.plan.validate_task``);
3. close what needs no Ray (a cancelled task that never reached Ray);
4. admit from the head of the queue (``core.queue.decide`` over Ray's worker capacity) and
   submit; tell the others their place.
A new task is written once, after step 4: admitted at once, it goes from nothing to
Submitted in one status patch.

Every step is idempotent and the process may die at any line: the finalizer is on a task
before its first submission, and the submission id is derived from the object's UID, so a
restarted operator finds the job again (``lifecycle.needs_ray``) and never starts a second.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.exceptions import ApiException

from ..adapters.kube import api_error
from ..core import lifecycle
from ..core.clock import Clock
from ..core.lifecycle import Decision, LifecycleSettings, Observation, PostEvent
from ..core.patch import merge_patch
from ..core.plan import validate_spec, validate_task
from ..core.rayjobs import RayAuthFailed, RayJobUnknown, RayRefused, RayUnreachable
from ..core.spec import API_VERSION, KIND, ArgusTaskStatus, Phase, TaskPath
from ..core.times import parse_time
from ..core.user import USER_LABEL, user_from_label
from ..core.verlconfig import Composer
from ..core.vocabulary import Key, Reason
from .admission import AdmissionInputs, in_use
from .jobsync import HistoryRemovals, JobSync, NodeCache
from .logfollow import LogFollowers
from .metrics import Metrics
from .ports import RayJobs, TaskSource, TaskStore
from .settings import OperatorConfig
from .view import TaskView
from .writer import StatusWriter, status_document

log = logging.getLogger(__name__)
# A queued task whose place merely moved up is rewritten at most this often. Every admission
# moves every task behind it, so writing each move at once meant one patch per queued task
# per admission (bench/run.py: ~100 patches a second that slowed Ray on a small machine).
# A task's first place, and any change of its reason or message, are written at once.
POSITION_REFRESH_SECONDS = 30.0
# A new task whose namespace cannot be read (RBAC, an API hiccup) is tried again this much later.
RETRY_SECONDS = 10.0
# A task not yet validated keeps its place in the queue this long at most.
HOLD_PLACE_SECONDS = 60.0
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


class Reconciler:
    def __init__(self, config: OperatorConfig, ray: RayJobs, store: TaskStore, tasks: TaskSource, *,
                 clock: Clock, metrics: Metrics, leads: Callable[[], bool] = lambda: True, composer: Composer | None = None):
        self.config = config
        self.composer = composer  # composes each task's configuration with verl's config tree
        self.ray = ray
        self.store = store
        self.tasks = tasks
        self.leads = leads
        self.clock = clock
        self.metrics = metrics
        # Tests hold the transition table complete (an undeclared decision raises); the
        # operator carries such a decision out and reports it (_undeclared).
        self.strict_transitions = False
        self.now = clock.now
        self.monotonic = monotonic = clock.monotonic
        self.wake = asyncio.Event()
        self.writer = StatusWriter(store, metrics, monotonic)
        self.nodes = NodeCache(ray, config.platform.worker_resource, config.poll_interval, monotonic)
        self.jobs = JobSync(ray, self.nodes, config.poll_interval, monotonic)
        self.removals = HistoryRemovals(ray, monotonic)
        self.settings = LifecycleSettings(ray_grace_seconds=config.ray_grace_seconds, delete_grace_seconds=config.delete_grace_seconds,
                                          dashboard_url=config.ray_address, worker_resource=config.platform.worker_resource,
                                          ray_job_retention_seconds=config.ray_job_retention_seconds,
                                          default_ttl_seconds=config.default_ttl_seconds,
                                          gitops_tracking_label=config.gitops_tracking_label)
        self.logs = LogFollowers(ray, config.progress_metrics, config.progress_interval, clock.now, monotonic)
        self._next_timer: dt.datetime | None = None  # the earliest TTL or retention due among ended tasks
        self.admission = AdmissionInputs(config, self.nodes, self.jobs, store, monotonic)
        self._locks: dict[Key, asyncio.Lock] = {}
        self._retry_at: dict[Key, float] = {}
        self._positions_at = monotonic()
        self._position_writer: asyncio.Task[None] | None = None
        self.last_admission_seconds = 0.0

    # -- the loop ---------------------------------------------------------------------
    async def run(self) -> None:
        # The first tick waits for the full LIST: over a partial view it would not count
        # running tasks it has not seen yet and admit past --max-running.
        await self.tasks.synced.wait()
        while True:
            if self.leads():
                try:
                    await self.tick()
                except asyncio.CancelledError:
                    raise
                except Exception:  # noqa: BLE001 - the loop must survive anything; the next tick retries
                    self.metrics.reconcile_errors.inc()
                    log.exception("reconcile tick failed; retrying next tick")
            else:
                self.jobs.forget_all()
                self.logs.close()
            try:
                await asyncio.wait_for(self.wake.wait(), timeout=self.next_wait())
            except TimeoutError:
                pass
            self.wake.clear()

    async def idle(self) -> None:
        """Wait for the background work started so far (tests, and a clean stop)."""
        if self._position_writer is not None:
            await asyncio.gather(self._position_writer, return_exceptions=True)
        await self.writer.drain()

    def lock(self, key: Key) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    def views(self) -> list[TaskView]:
        now = self.monotonic()
        return [self.writer.overlay(v, now) for v in self.tasks.views()]

    def view(self, key: Key) -> TaskView | None:
        v = self.tasks.get(key)
        return self.writer.overlay(v) if v else None

    def next_wait(self) -> float:
        """Seconds until the next followed job is due (only those are looked at: this runs
        before each tick, up to several times a second)."""
        now = self.now()
        followed = [v for v in (self.view(k) for k in self.jobs.followed()) if v and lifecycle.needs_ray(v.state)]
        waits = [self.jobs.due_in(v, now, len(followed)) for v in followed]
        if self._next_timer is not None:
            waits.append((self._next_timer - now).total_seconds())
        removal = self.removals.due_in()
        if removal is not None:
            waits.append(removal)
        return max(0.05, min([self.config.poll_interval, *waits]))

    async def tick(self) -> None:
        views = self.views()
        self._prune(views)
        self.metrics.observe_phases(views)
        now = self.now()
        # 1. Ray reads that are due.
        following = [v for v in views if lifecycle.needs_ray(v.state)]
        due = [v for v in following if self.jobs.due_in(v, now, len(following)) <= 0.01]
        await self._each(self._follow(v.key) for v in due)
        # 2.-3. New tasks are validated; nothing else needs more than a look.
        views = self.views()
        drafts: dict[Key, Draft] = {}
        for v in views:
            if v.phase is None and not v.deleting and self._retry_at.get(v.key, 0.0) <= self.monotonic():
                drafts[v.key] = Draft.of(v)
        labels = await self._namespace_labels({d.view.namespace for d in drafts.values()})
        await self._each(self._validate(d, labels) for d in drafts.values() if d.view.namespace in labels)
        timers, looks = [], []
        for v in views:
            if v.key in drafts or v.deleting:
                continue
            timer = lifecycle.timer_due(v.state, self.settings)
            if timer is not None:
                timers.append(timer[0])
            if lifecycle.needs_look(v.state, now, self.settings):
                looks.append(v.key)
        await self._each(self._reconcile(key) for key in looks)
        self._next_timer = min((t for t in timers if t > now), default=None)
        await self._each(self._final_progress(key) for key in self.logs.finished())
        await self.removals.check()
        # 4. The queue.
        queued = [d.view for d in drafts.values() if d.view.phase == Phase.Queued.value and not d.view.cancel]
        queued += [v for v in views if v.key not in drafts and v.phase == Phase.Queued.value and not v.cancel and not v.deleting]
        unvalidated = [v for v in views if v.phase is None and not v.deleting and not v.cancel and v.key not in drafts
                       and (now - (parse_time(v.created) or now)).total_seconds() < HOLD_PLACE_SECONDS]
        unvalidated += [d.view for d in drafts.values() if d.view.phase is None]
        active = [v for v in views if v.active]
        if queued:
            await self._admit(queued, active, unvalidated, drafts)
        self.metrics.observe_users(in_use(active), queued, self.admission.quotas)
        await self._each(self._write_locked(d) for d in drafts.values())
        self.logs.follow({v.key: v.state.submission_id for v in self.views() if v.phase == Phase.Running.value and not v.deleting})

    async def _each(self, coros: Iterable[Awaitable[Any]]) -> None:
        """Await with at most WRITES_IN_FLIGHT at once (a few thousand writes one after the
        other would hold a tick for minutes). One task's failure (an API error, a bug) is
        logged and counted; the others go on, and the next tick tries it again."""
        gate = asyncio.Semaphore(WRITES_IN_FLIGHT)

        async def one(coro: Awaitable[Any]) -> None:
            async with gate:
                await coro

        for result in await asyncio.gather(*(one(c) for c in coros), return_exceptions=True):
            if isinstance(result, asyncio.CancelledError):
                raise result
            if isinstance(result, Exception):
                self.metrics.reconcile_errors.inc()
                if isinstance(result, ApiException):
                    log.warning("Kubernetes API error, trying again next tick: %s %s: %s", result.status, result.reason, api_error(result))
                else:
                    log.error("reconciling a task failed; trying again next tick", exc_info=result)

    def _prune(self, views: list[TaskView]) -> None:
        """Forget what was kept for tasks that are gone."""
        present = {v.key for v in views}
        for key in [k for k in self._locks if k not in present and not self._locks[k].locked()]:
            del self._locks[key]
        for key in [k for k in self._retry_at if k not in present]:
            del self._retry_at[key]
        for key in self.jobs.followed():
            if key not in present:
                self.jobs.forget(key)
                self.writer.forget(key)

    # -- one task ---------------------------------------------------------------------
    def _step(self, view: TaskView, seen: Observation) -> Decision:
        return lifecycle.step(view.state, seen, self.now(), self.settings,
                              undeclared=None if self.strict_transitions else self._undeclared)

    def _undeclared(self, what: str) -> None:
        """A decision the transition table does not declare: carried out all the same (a
        task must not stall on a missing row), logged as the bug it is, and counted."""
        self.metrics.undeclared_transitions.inc()
        log.error("%s: carried out; please report it (the table in argus.core.transitions is incomplete)", what)

    async def _carry_out(self, draft: Draft, decision: Decision) -> None:
        """Do what the decision says; an action's outcome goes back to the lifecycle."""
        pending = draft.take(decision)
        while pending:
            action = pending.pop(0)
            if isinstance(action, lifecycle.Submit):
                seen = await self._submit(draft, action)
                if seen is not None:
                    pending += draft.take(self._step(draft.view, seen))
            elif isinstance(action, lifecycle.StopJob):
                await self._stop(action.submission_id)
            elif isinstance(action, lifecycle.ReleaseFinalizer):
                if await self.writer.remove_finalizer(draft.view):
                    log.info("released %s/%s", draft.view.namespace, draft.view.name)
            elif isinstance(action, lifecycle.RemoveRayJobs):
                if await self.removals.remove(action.submission_ids) and not draft.view.deleting:
                    pending += draft.take(self._step(draft.view, lifecycle.RayJobsRemoved()))
            elif isinstance(action, lifecycle.DeleteTask):
                if await self.store.delete_task(draft.view.namespace, draft.view.name):
                    log.info("deleted %s/%s: its ttlSecondsAfterFinished ran out", draft.view.namespace, draft.view.name)

    async def _write(self, draft: Draft) -> None:
        """Write what was decided for the task (the caller holds its lock)."""
        if draft.status is None:
            return
        if draft.view.deleting:  # going away: its status no longer matters, its events still do
            self.writer.post(draft.persisted, tuple(draft.events))
        else:
            await self.writer.write(draft.persisted, draft.status, tuple(draft.events))
        draft.status, draft.events = None, []

    async def _write_locked(self, draft: Draft) -> None:
        async with self.lock(draft.persisted.key):
            await self._write(draft)

    async def _follow(self, key: Key) -> None:
        """Read the task's job and act on what Ray says."""
        async with self.lock(key):
            view = self.view(key)
            if view is None or not lifecycle.needs_ray(view.state):
                return
            seen = await self.jobs.observe(view.state)
            draft = Draft.of(view)
            ended = isinstance(seen, (lifecycle.JobUnknown,)) or (isinstance(seen, lifecycle.JobObserved) and not seen.active)
            progress = self.logs.progress_due(key, view.state.status.progress, final=ended)
            if progress is not None:
                draft.take(self._step(view, lifecycle.ProgressObserved(progress)))
            try:
                await self._carry_out(draft, self._step(draft.view, seen))
                await self._write(draft)
            except Exception:
                if progress is not None:
                    self.logs.not_written(key)  # the next look takes it again
                raise

    async def _reconcile(self, key: Key) -> None:
        """A task that needs a look without anything new from Ray (cancelled while it never
        reached Ray; its time to live or its Ray jobs' retention ran out)."""
        async with self.lock(key):
            view = self.view(key)
            if view is None:
                return
            draft = Draft.of(view)
            await self._carry_out(draft, self._step(view, lifecycle.Reconcile()))
            await self._write(draft)

    async def _final_progress(self, key: Key) -> None:
        """The last lines of an ended job's log: its final progress."""
        async with self.lock(key):
            view = self.view(key)
            progress = self.logs.progress_due(key, view.state.status.progress, final=True) if view else None
            if view is not None and progress is not None and not view.deleting:
                draft = Draft.of(view)
                try:
                    await self._carry_out(draft, self._step(view, lifecycle.ProgressObserved(progress)))
                    await self._write(draft)
                except Exception:
                    # The follower stays (finished again next tick): a failed write of the
                    # job's last progress must not lose it.
                    self.logs.not_written(key)
                    raise
            self.logs.drop(key)

    async def _namespace_labels(self, namespaces: set[str]) -> dict[str, dict[str, str] | None]:
        """The labels of each namespace with new tasks, read live once per tick (a label
        changed a moment ago counts at once; a thousand new tasks in one namespace cost one
        read). A namespace that cannot be read is left out: its tasks are tried again later."""
        found: dict[str, dict[str, str] | None] = {}

        async def read(namespace: str) -> None:
            try:
                found[namespace] = await self.store.namespace_labels(namespace)
            except Exception as exc:  # noqa: BLE001 - RBAC or an API hiccup: say which, retry later
                log.warning("cannot read namespace %s to find the user of its tasks: %s; retrying in %d s",
                            namespace, api_error(exc), RETRY_SECONDS)
                for v in self.tasks.views():
                    if v.namespace == namespace and v.phase is None:
                        self._retry_at[v.key] = self.monotonic() + RETRY_SECONDS
        await asyncio.gather(*(read(ns) for ns in namespaces))
        return found

    async def _validate(self, draft: Draft, labels: dict[str, dict[str, str] | None]) -> None:
        """A new task: its user, then validation: Queued or Rejected (not written yet)."""
        view = draft.view
        user, reason, message = user_from_label(view.namespace, (labels.get(view.namespace) or {}).get(USER_LABEL))
        if user is None:
            seen: Observation = lifecycle.Refused(reason, message)
        else:
            verdict = validate_task(self._manifest(view), user, self.config.platform, self.composer)
            verl = (verdict.verl["version"], verdict.verl["source"]) if verdict.verl else None
            seen = (lifecycle.Validated(user, verdict.expanded_command or "", tuple(verdict.warning_lines()), verl) if verdict.valid
                    else lifecycle.Refused(Reason.InvalidSpec, "\n".join(verdict.error_lines()), user))
        await self._carry_out(draft, self._step(view, seen))

    @staticmethod
    def _manifest(view: TaskView) -> dict[str, Any]:
        return {"apiVersion": API_VERSION, "kind": KIND, "spec": view.spec,
                "metadata": {"name": view.name, "namespace": view.namespace, "uid": view.uid}}

    async def _submit(self, draft: Draft, action: lifecycle.Submit) -> Observation | None:
        """Put the finalizer on, then submit. None: the finalizer could not be added (the
        object changed or went): the next tick tries again."""
        with_finalizer = await self.writer.add_finalizer(draft.view)
        if with_finalizer is None:
            return None
        draft.view = with_finalizer
        draft.persisted = draft.persisted.with_changes(finalizers=with_finalizer.finalizers)
        plan = action.plan
        assert plan.submission_id
        started = self.monotonic()
        try:
            fresh = await self.ray.submit(plan)
        except RayAuthFailed as exc:
            return lifecycle.SubmitResult("auth_failed", plan.submission_id, str(exc))
        except RayUnreachable as exc:
            return lifecycle.SubmitResult("unreachable", plan.submission_id, str(exc))
        except RayRefused as exc:
            return lifecycle.SubmitResult("refused", plan.submission_id, str(exc))
        self.jobs.submitted(draft.view.key)
        log.info("%s %s/%s as Ray job %s (%.0f ms)", "submitted" if fresh else "adopted", draft.view.namespace, draft.view.name,
                 plan.submission_id, 1000 * (self.monotonic() - started))
        self.metrics.observe_submit_latency(draft.view.created)
        return lifecycle.SubmitResult("submitted" if fresh else "adopted", plan.submission_id,
                                      job_dir=TaskPath(user_path=plan.for_user(plan.job_dir), job_path=plan.job_dir),
                                      log_file=TaskPath(user_path=plan.for_user(plan.log_file), job_path=plan.log_file))

    async def _stop(self, submission_id: str) -> None:
        try:
            await self.ray.stop(submission_id)
        except RayJobUnknown:
            pass
        except (RayUnreachable, RayRefused) as exc:
            log.warning("could not stop Ray job %s: %s; trying again at the next read", submission_id, exc)

    # -- the queue --------------------------------------------------------------------
    async def _admit(self, queued: list[TaskView], active: list[TaskView], unvalidated: list[TaskView], drafts: dict[Key, Draft]) -> None:
        started = self.monotonic()
        decision, ray_error = await self.admission.decide(queued, active, unvalidated, self.tasks.views(), self.now())
        self.last_admission_seconds = self.monotonic() - started
        self.metrics.admission_pass.observe(self.last_admission_seconds)
        by_key = {v.key: v for v in queued}
        await self._each(self._start(drafts, by_key[t.key]) for t in decision.admit)
        moved: dict[Key, int] = {}
        for key, position in decision.positions.items():
            if key not in by_key:
                continue
            view = by_key[key]
            reason, message = decision.waiting[key]
            result = self._step(view, lifecycle.Waiting(position, reason, message, ray_error, self.nodes.error_reason))
            if key not in drafts and view.status.get("queuePosition") is not None and \
                    merge_patch(view.status, status_document(result.status)).keys() <= {"queuePosition"}:
                moved[key] = position  # only the place moved: written by the periodic refresh
                continue
            drafts.setdefault(key, Draft.of(view)).take(result)
        self._refresh_positions(moved)

    async def _start(self, drafts: dict[Key, Draft], view: TaskView) -> None:
        """Submit an admitted task (under its lock: a cancel or delete may race it)."""
        async with self.lock(view.key):
            draft = drafts.get(view.key)
            if draft is None:
                current = self.view(view.key)
                if current is None or current.phase != Phase.Queued.value or current.deleting:
                    return
                draft = drafts[view.key] = Draft.of(current)
            # The second validation of the attempt, on purpose: the plan that runs is made
            # now, from the spec and the platform configuration in force when the task
            # starts (a path root or verl snapshot changed while it waited applies to it),
            # with this attempt's submission id; intake's validation only admitted it to the
            # queue. A task that no longer passes is Rejected with the reason (docs/lifecycle.md).
            verdict = validate_spec(draft.view.spec, draft.view.status.get("user") or "", self.config.platform,
                                    namespace=view.namespace, name=view.name, uid=view.uid, attempt=draft.view.state.attempt,
                                    composer=self.composer)
            if not verdict.valid or verdict.plan is None:
                seen: Observation = lifecycle.Refused(Reason.InvalidSpec, "\n".join(verdict.error_lines()), draft.view.status.get("user"))
            else:
                seen = lifecycle.Admitted(verdict.plan)
            await self._carry_out(draft, self._step(draft.view, seen))
            await self._write(draft)  # under the lock: a position refresh must not overtake it

    def _refresh_positions(self, moved: dict[Key, int]) -> None:
        """Write the places that merely moved, at most every POSITION_REFRESH_SECONDS, in
        the background (an admission never waits for them)."""
        if not moved or self.monotonic() - self._positions_at < POSITION_REFRESH_SECONDS:
            return
        if self._position_writer is not None and not self._position_writer.done():
            return
        self._positions_at = self.monotonic()
        self._position_writer = asyncio.create_task(self._write_positions(moved), name="argus queue positions")

    async def _write_positions(self, moved: dict[Key, int]) -> None:
        async def one(key: Key, position: int) -> None:
            async with self.lock(key):  # never races a submission of the same task
                view = self.view(key)  # read under the lock: it may have been admitted meanwhile
                if view is None or view.phase != Phase.Queued.value or view.deleting:
                    return
                await self.writer.write(view, view.state.status.model_copy(update={"queue_position": position}))
        try:
            await self._each(one(k, p) for k, p in moved.items())
        except Exception:  # noqa: BLE001 - the next refresh writes them again
            log.exception("writing queue positions failed; retrying at the next refresh")
