"""The queue and the Ray sync: one loop for the whole operator.

Each tick (when an active task is due for a status read, at the latest every poll
interval, or at once when a handler wakes it):
1. sync each Submitted/Running task that is due with its Ray job (one Ray call per task;
   a young job is due often, an older one every poll interval, within a budget of fast
   reads: ``core.phases.poll_delay``;
   calls grow with running tasks, not with all tasks), stopping jobs that were cancelled
   or ran past their deadline;
2. close queued tasks that were cancelled (they never reach Ray);
3. admit from the head of the queue (``core.queue.decide``; the worker nodes' capacity is
   read from Ray at most once per poll interval) and submit.

Every step is idempotent and the process may die at any line: the submission id is
derived from the object's UID, so a resubmission after a crash adopts the existing job.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import time
from typing import Any, Callable

from ..core.config import PlatformConfig
from ..core.phases import ACTIVE_PHASES, FASTEST_POLL_SECONDS, TERMINAL_PHASES, conditions_for_phase, phase_for_ray, poll_delay, set_condition, status_delta
from ..core.plan import submission_id_for, validate_spec
from ..core.queue import decide
from ..core.spec import Phase
from . import metrics
from .kube import Kube, now_rfc3339
from .cache import TaskCache
from .ray_adapter import RayAdapter, RayJobUnknown, RayRefused, RayUnreachable
from .settings import OperatorConfig
from .view import TaskView, parse_time

log = logging.getLogger(__name__)
# Test-only fault point: die right after Ray accepted a job, before its status is written.
FAULT_AFTER_SUBMIT = "ARGUS_FAULT_AFTER_SUBMIT"
# A queued task whose place merely moved up is rewritten at most this often. Every admission
# moves every task behind it, so writing each move at once meant one patch per queued task
# per admission (bench/run.py: ~100 patches a second that slowed Ray on a small machine;
# every 5 s they were still half of all writes). A task's first place, and any change of its
# reason or message (Unschedulable, RayUnreachable, ...), are written at once.
POSITION_REFRESH_SECONDS = 30.0


def _ms_to_rfc3339(ms: int | None) -> str | None:
    if not ms:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Reconciler:
    def __init__(self, config: OperatorConfig, ray: RayAdapter, kube: Kube, tasks: TaskCache):
        self.config = config
        self.ray = ray
        self.kube = kube
        self.tasks = tasks
        self.leads: Callable[[], bool] = lambda: True  # replaced when leader election is on
        self.wake = asyncio.Event()
        # Status this process wrote that the watch stream may not show yet.
        self._written: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._worker_nodes: set[str] = set()
        self._synced_at: dict[tuple[str, str], float] = {}    # monotonic time of each active task's last status read
        self._submitted_at: dict[tuple[str, str], float] = {}  # monotonic time this process submitted it
        self.last_admission_seconds = 0.0
        self._positions_at = 0.0
        self._capacity: tuple[float, Any, str | None] | None = None  # (read at, capacity, error)
        self._position_writer: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()

    def lock(self, key: tuple[str, str]) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    @property
    def platform(self) -> PlatformConfig:
        return self.config.platform

    # -- the loop -------------------------------------------------------------------
    async def run(self) -> None:
        # The first tick waits for the full LIST: over a partial view it would not count
        # running tasks it has not seen yet and admit past --max-running (found by
        # bench/run.py: 75 running with --max-running 50 after a restart over 1,000 tasks).
        await self.tasks.synced.wait()
        while True:
            if self.leads():
                try:
                    await self.tick()
                except asyncio.CancelledError:
                    raise
                except Exception:  # noqa: BLE001 - the loop must survive anything; the next tick retries
                    metrics.RECONCILE_ERRORS.inc()
                    log.exception("reconcile tick failed; retrying next tick")
            else:  # another replica reads the jobs; read them all afresh if this one leads again
                self._synced_at.clear()
                self._submitted_at.clear()
            try:
                await asyncio.wait_for(self.wake.wait(), timeout=self.next_wait())
            except asyncio.TimeoutError:
                pass
            self.wake.clear()

    @staticmethod
    async def each(coros: list[Any], limit: int = 16) -> None:
        """Await coroutines (status writes) with at most `limit` in flight; a few thousand
        writes one after the other would hold a tick for many minutes. Raises the first error
        once all have finished."""
        gate = asyncio.Semaphore(limit)

        async def one(coro: Any) -> None:
            async with gate:
                await coro

        for result in await asyncio.gather(*(one(c) for c in coros), return_exceptions=True):
            if isinstance(result, BaseException):
                raise result

    def snapshot(self) -> list[TaskView]:
        now = time.monotonic()
        return [self.with_own_writes(view, now) for view in self.tasks.views()]

    def with_own_writes(self, view: TaskView, now: float | None = None) -> TaskView:
        """The view with the status this process wrote that the watch may not show yet."""
        written = self._written.get(view.key)
        if not written:
            return view
        at, status = written
        if not status_delta(view.status, status) or (now or time.monotonic()) - at > 60:
            self._written.pop(view.key, None)
            return view
        return TaskView(**{**view.__dict__, "status": {**view.status, **status}})

    # -- when to read a job's status --------------------------------------------------
    def age(self, view: TaskView) -> float | None:
        """Seconds since the task was admitted (None: not known)."""
        if view.key in self._submitted_at:
            return time.monotonic() - self._submitted_at[view.key]
        admitted = parse_time(view.status.get("admittedAt"))
        return (dt.datetime.now(dt.timezone.utc) - admitted).total_seconds() if admitted else None

    def due_in(self, view: TaskView, now: float, active: int = 1) -> float:
        """Seconds until the task's next status read (<= 0: due now); `active` tasks in all."""
        last = self._synced_at.get(view.key)
        if last is None:
            return 0.0
        if view.cancel or view.deadline_exceeded(dt.datetime.now(dt.timezone.utc)):
            return last + FASTEST_POLL_SECONDS - now  # stopping: read (and stop) again soon
        return last + poll_delay(self.age(view), self.config.poll_interval, active) - now

    def next_wait(self) -> float:
        """Seconds until the next active task is due. Only the tasks read before are looked
        at (every active task is, by its first tick or its submission), not every object:
        this runs before each tick, up to several times a second."""
        now = time.monotonic()
        views = (self.tasks.get(key) for key in list(self._synced_at))
        active = [v for v in (self.with_own_writes(v, now) for v in views if v) if v.phase in ACTIVE_PHASES and not v.deleting]
        waits = [self.due_in(v, now, len(active)) for v in active]
        return max(0.05, min([self.config.poll_interval, *waits]))

    async def tick(self) -> None:
        views = self.snapshot()
        metrics.observe_phases(views)
        now = time.monotonic()
        active = [v for v in views if v.phase in ACTIVE_PHASES and not v.deleting]
        for key in set(self._synced_at) - {v.key for v in active}:
            self._synced_at.pop(key, None)
            self._submitted_at.pop(key, None)
        due = [v for v in active if self.due_in(v, now, len(active)) <= 0.01]
        if due:
            await asyncio.gather(*(self.sync(v) for v in due))
        queued = [v for v in self.snapshot() if v.phase == Phase.Queued.value and not v.deleting]
        await self.each([self.write(v, {"phase": "Stopped", "reason": "Cancelled", "message": "cancelled while queued; it never reached Ray",
                                        "queuePosition": None, "conditions": conditions_for_phase(v.status.get("conditions"), Phase.Stopped, "Cancelled", "cancelled while queued", now=now_rfc3339(), generation=v.generation)})
                         for v in queued if v.cancel])
        queued = [v for v in queued if not v.cancel]
        if queued:
            views = self.snapshot()
            await self.admit(queued, [v for v in views if v.phase in ACTIVE_PHASES], self.not_yet_validated(views))

    # -- writing status ---------------------------------------------------------------
    async def write(self, view: TaskView, desired: dict[str, Any]) -> None:
        """Patch only what changed; post an Event when the phase changes."""
        desired = {**desired, "observedGeneration": view.generation}
        delta = status_delta(view.status, desired)
        if not delta:
            return
        if not await self.kube.patch_status(view.namespace, view.name, delta):
            return
        merged = {**view.status, **delta}
        self._written[view.key] = (time.monotonic(), {k: merged.get(k) for k in desired})
        if "phase" in delta:
            failed = delta["phase"] in ("Failed", "Rejected")
            msg = f"{view.status.get('phase') or 'new'} -> {delta['phase']}"
            detail = desired.get("message")
            # Best effort and off the critical path: the next admission does not wait for it.
            self.in_background(self.kube.event(view.namespace, view.name, view.uid, "Warning" if failed else "Normal",
                                               desired.get("reason") or str(delta["phase"]), f"{msg}: {detail}" if detail else msg))

    def in_background(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)  # a reference, or the task may be collected mid-flight
        task.add_done_callback(self._background.discard)

    # -- admission -----------------------------------------------------------------
    @staticmethod
    def not_yet_validated(views: list[TaskView]) -> list[TaskView]:
        """Tasks the create handler has not marked yet. They keep their place in the queue,
        unless their handler has failed for a minute (then they must not block it)."""
        now = dt.datetime.now(dt.timezone.utc)
        return [v for v in views if not v.phase and not v.deleting and not v.cancel
                and (now - (parse_time(v.created) or now)).total_seconds() < 60]

    async def admit(self, queued: list[TaskView], active: list[TaskView], pending: list[TaskView] = ()) -> None:
        started = time.perf_counter()
        capacity, ray_error = await self.capacity()
        decision = decide([v.as_queued() for v in [*queued, *pending]], running=len(active),
                          reserved_gpus=sum(v.gpus for v in active), max_running=self.config.max_running, capacity=capacity,
                          not_ready=frozenset(v.key for v in pending))
        self.last_admission_seconds = time.perf_counter() - started
        metrics.ADMISSION_PASS.set(self.last_admission_seconds)
        by_key = {v.key: v for v in queued}
        admitted = [by_key[t.key] for t in decision.admit]
        if admitted:
            await asyncio.gather(*(self.submit(v) for v in admitted))
        now = now_rfc3339()
        writes, moved = [], {}
        for key, position in decision.positions.items():
            v = by_key[key]
            if key in decision.unschedulable:
                reason, message = "Unschedulable", decision.unschedulable[key]
            elif ray_error:
                reason, message = "RayUnreachable", f"waiting: cannot read the Ray cluster's capacity ({ray_error[:200]})"
            else:
                reason, message = "Queued", decision.waiting.get(key) or "waiting behind tasks ahead in the queue"
            desired = {"queuePosition": position, "reason": reason, "message": message}
            if ray_error or (capacity and "RayReachable" not in {c.get("type") for c in v.status.get("conditions") or []}):
                desired["conditions"] = set_condition(v.status.get("conditions"), "RayReachable", not ray_error,
                                                      "RayUnreachable" if ray_error else "RayReachable",
                                                      ray_error[:300] if ray_error else "the Ray dashboard answers", now=now, generation=v.generation)
            if v.status.get("queuePosition") is not None and set(status_delta(v.status, desired)) <= {"queuePosition"}:
                moved[key] = position
            else:
                writes.append(self.write(v, desired))
        await self.each(writes)
        self.refresh_positions(moved)

    def refresh_positions(self, moved: dict[tuple[str, str], int]) -> None:
        """Write the places that merely moved, at most every POSITION_REFRESH_SECONDS, in
        the background (an admission never waits for them)."""
        if not moved or time.monotonic() - self._positions_at < POSITION_REFRESH_SECONDS:
            return
        if self._position_writer is not None and not self._position_writer.done():
            return
        self._positions_at = time.monotonic()
        self._position_writer = asyncio.create_task(self._write_positions(moved), name="argus queue positions")

    async def _write_positions(self, moved: dict[tuple[str, str], int]) -> None:
        async def one(key: tuple[str, str], position: int) -> None:
            async with self.lock(key):  # never races a submission of the same task
                view = self.tasks.get(key)  # read under the lock: it may have been admitted meanwhile
                view = self.with_own_writes(view) if view else None
                if view is None or view.phase != Phase.Queued.value or view.deleting:
                    return
                await self.write(view, {"queuePosition": position})
        try:
            await self.each([one(k, p) for k, p in moved.items()])
        except Exception:  # noqa: BLE001 - the next refresh writes them again
            log.exception("writing queue positions failed; retrying at the next refresh")

    async def capacity(self) -> tuple[Any, str | None]:
        """The worker nodes' GPUs (or why they cannot be read), read from Ray at most once per
        poll interval: ticks come as often as young jobs are due, node sets change rarely."""
        now = time.monotonic()
        if self._capacity is None or now - self._capacity[0] >= self.config.poll_interval:
            try:
                self._capacity = (now, await self.ray.capacity(), None)
            except (RayUnreachable, RayRefused) as exc:
                metrics.RAY_ERRORS.labels("capacity").inc()
                self._capacity = (now, None, str(exc))
        return self._capacity[1], self._capacity[2]

    async def submit(self, view: TaskView) -> None:
        async with self.lock(view.key):
            user = view.status.get("user")
            verdict = validate_spec(view.spec, user or "", self.platform, namespace=view.namespace, name=view.name, uid=view.uid)
            now = now_rfc3339()
            if not verdict.valid or verdict.plan is None:
                message = "\n".join(verdict.error_lines())
                await self.write(view, {"phase": "Rejected", "reason": "InvalidSpec", "message": message, "queuePosition": None,
                                         "conditions": conditions_for_phase(view.status.get("conditions"), Phase.Rejected, "InvalidSpec", message, now=now, generation=view.generation)})
                return
            plan = verdict.plan
            started = time.monotonic()
            try:
                fresh = await self.ray.submit(plan)
            except RayUnreachable as exc:
                metrics.RAY_ERRORS.labels("submit").inc()
                await self.write(view, {"reason": "RayUnreachable", "message": f"waiting: Ray is unreachable ({str(exc)[:200]})"})
                return
            except RayRefused as exc:
                metrics.RAY_ERRORS.labels("submit").inc()
                await self.write(view, {"phase": "Failed", "reason": "RaySubmitFailed", "message": f"Ray refused the job: {exc}", "queuePosition": None,
                                         "conditions": conditions_for_phase(view.status.get("conditions"), Phase.Failed, "RaySubmitFailed", str(exc), now=now, generation=view.generation)})
                return
            if os.environ.get(FAULT_AFTER_SUBMIT):
                log.warning("fault point %s: exiting right after submitting %s", FAULT_AFTER_SUBMIT, plan.submission_id)
                os._exit(137)
            self._submitted_at[view.key] = self._synced_at[view.key] = time.monotonic()
            log.info("%s %s/%s as Ray job %s (%.0f ms)", "submitted" if fresh else "adopted", view.namespace, view.name,
                     plan.submission_id, 1000 * (time.monotonic() - started))
            reason = "Admitted" if fresh else "AdoptedExistingJob"
            message = (f"submitted to Ray as {plan.submission_id}" if fresh else
                       f"Ray already had job {plan.submission_id} (submitted before a restart); adopted it, no second job")
            metrics.observe_submit_latency(view.created)
            await self.write(view, {
                "phase": "Submitted", "reason": reason, "message": message, "queuePosition": None, "admittedAt": now,
                "rayJob": {"submissionId": plan.submission_id, "dashboardUrl": self.config.ray_address},
                "conditions": conditions_for_phase(view.status.get("conditions"), Phase.Submitted, reason, message, now=now, generation=view.generation),
            })

    # -- sync ------------------------------------------------------------------------
    async def sync(self, view: TaskView) -> None:
        self._synced_at[view.key] = time.monotonic()
        sid = view.submission_id or submission_id_for(view.namespace, view.name, view.uid)
        now_dt = dt.datetime.now(dt.timezone.utc)
        now = now_rfc3339()
        conditions = view.status.get("conditions")
        try:
            job = await self.ray.job(sid)
        except RayJobUnknown:
            metrics.RAY_ERRORS.labels("lost").inc()
            message = (f"Ray no longer knows job {sid}: the Ray head restarted (it keeps no job history) or the job was removed. "
                       "Argus does not resubmit on its own; create a new task to run it again")
            # Ray answered (it just does not know the job): reachable again, the outage is over.
            conditions = set_condition(conditions, "RayReachable", True, "RayReachable", "the Ray dashboard answers", now=now, generation=view.generation)
            await self.write(view, {"phase": "Failed", "reason": "RayJobLost", "message": message, "rayUnreachableSince": None,
                                    "conditions": conditions_for_phase(conditions, Phase.Failed, "RayJobLost", message, now=now, generation=view.generation)})
            return
        except (RayUnreachable, RayRefused) as exc:
            metrics.RAY_ERRORS.labels("status").inc()
            since = view.status.get("rayUnreachableSince") or now
            elapsed = (now_dt - (parse_time(since) or now_dt)).total_seconds()
            conditions = set_condition(conditions, "RayReachable", False, "RayUnreachable", str(exc)[:300], now=since, generation=view.generation)
            if elapsed >= self.config.ray_grace_seconds:
                message = f"Ray was unreachable for {int(elapsed)} s (grace {int(self.config.ray_grace_seconds)} s): {str(exc)[:200]}"
                await self.write(view, {"phase": "Failed", "reason": "RayUnreachable", "message": message, "rayUnreachableSince": since,
                                        "conditions": conditions_for_phase(conditions, Phase.Failed, "RayUnreachable", message, now=now, generation=view.generation)})
            else:
                await self.write(view, {"rayUnreachableSince": since, "conditions": conditions})
            return

        cancelled, late = view.cancel, view.deadline_exceeded(now_dt)
        if (cancelled or late) and job.status in ("PENDING", "RUNNING"):
            try:
                await self.ray.stop(sid)
            except (RayUnreachable, RayRefused, RayJobUnknown) as exc:
                log.warning("could not stop %s: %s", sid, exc)
            return  # the next poll reads the stopped state
        phase, reason = phase_for_ray(job.status, cancelled=cancelled, deadline_exceeded=late)
        if phase.terminal and view.phase != phase.value and job.end_time_ms:
            log.info("Ray job %s ended %s; seen %.0f ms after its end", sid, job.status, time.time() * 1000 - job.end_time_ms)
        message = job.message or reason
        if reason == "DeadlineExceeded":
            message = f"stopped after activeDeadlineSeconds={view.spec.get('activeDeadlineSeconds')} from admission"
        elif reason == "Cancelled":
            message = "stopped because spec.cancel was set"
        ray_job = {**(view.status.get("rayJob") or {}), "submissionId": sid, "status": job.status,
                   "driverNodeId": job.driver_node_id, "startTime": _ms_to_rfc3339(job.start_time_ms),
                   "endTime": _ms_to_rfc3339(job.end_time_ms), "dashboardUrl": self.config.ray_address}
        conditions = set_condition(conditions, "RayReachable", True, "RayReachable", "the Ray dashboard answers", now=now, generation=view.generation)
        conditions = conditions_for_phase(conditions, phase, reason, message, now=now, generation=view.generation)
        if job.driver_node_id and job.driver_node_id != (view.status.get("rayJob") or {}).get("driverNodeId"):
            await self.check_placement(view, job.driver_node_id)
        await self.write(view, {"phase": phase.value, "reason": reason, "message": message, "rayJob": ray_job,
                                "rayUnreachableSince": None, "conditions": conditions})

    async def check_placement(self, view: TaskView, node_id: str) -> None:
        """The driver must run on a worker node (one carrying the worker resource)."""
        if node_id in self._worker_nodes:
            return
        try:
            self._worker_nodes = await self.ray.worker_node_ids()
        except (RayUnreachable, RayRefused):
            return
        if node_id not in self._worker_nodes:
            await self.kube.event(view.namespace, view.name, view.uid, "Warning", "PlacementViolation",
                                  f"the driver runs on node {node_id}, which lacks the '{self.platform.worker_resource}' resource (the head?)")

    async def stop_for_delete(self, view: TaskView, deleted_at: dt.datetime | None) -> str:
        """Stop the task's Ray job before the object goes. Returns what happened; raises
        RayUnreachable while within the delete grace period."""
        sid = view.submission_id or submission_id_for(view.namespace, view.name, view.uid)
        async with self.lock(view.key):
            try:
                stopped = await self.ray.stop(sid)
                if not stopped:
                    return f"Ray job {sid} had already ended"
                # Ray stops asynchronously; hold the object (a little) until it has, so that
                # "deleted" means "no longer running".
                for _ in range(30):
                    if (await self.ray.job(sid)).status not in ("PENDING", "RUNNING"):
                        return f"stopped Ray job {sid}"
                    await asyncio.sleep(0.5)
                return f"asked Ray to stop job {sid}; it had not stopped within 15 s"
            except RayJobUnknown:
                return f"no Ray job {sid}"
            except RayUnreachable:
                waited = (dt.datetime.now(dt.timezone.utc) - deleted_at).total_seconds() if deleted_at else 0
                if waited < self.config.delete_grace_seconds:
                    raise
                return f"Ray unreachable for {int(waited)} s; released without stopping {sid}"
