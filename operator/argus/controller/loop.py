"""The control loop (``ControlLoop``), level-triggered, one for the whole operator. Each tick
it gathers what is new about each task, asks the lifecycle (``core.lifecycle.step``) what that
means, and has the answer carried out; the status writer (``writer``) writes it. Its rooms:

- ``intake``: new tasks; how the command is checked (validation) and the task queued;
- ``scheduler`` (``Scheduler``): how the queue is decided and an admitted task started;
- ``reconcile`` (``TaskReconciler``): how a decision is carried out, a Ray job submitted among them;
- ``jobsync`` and ``logfollow``: what Ray says about each job, and its progress.

A tick (when a followed job is due for a read, at the latest every poll interval, or at
once when the watch shows a change):
1. read the Ray jobs that are due (``jobsync``): active tasks, and tasks that may have
   reached Ray and are being cancelled, deleted or were closed while Ray was unreachable;
   a job that ended is shown ended at once, and its status patch goes on through the
   steps below (the queue pass refills its slot meanwhile; the tick waits for it at its end);
   in a tick that reads a job whose log said it ended, the reads of other running jobs (which
   can only free a slot) go on beside the steps below (``DueReads``);
2. validate new tasks (``intake``);
3. give a look to what needs no Ray (a cancelled task that never reached Ray, a time to
   live or a retention that ran out: ``lifecycle.needs_look``), passing by the tasks that
   are idle until they change (``idle``);
4. admit from the head of the queue and submit; tell the others their place (``scheduler``).
A new task is written once, after step 4: admitted at once, it goes from nothing to
Submitted in one status patch. While new tasks wait for the next ticks (a first start over
thousands), a batch's writes go on while the next tick validates the next batch (the API
server works while the operator validates): that tick leaves the batch out of its intake
and waits for its writes before its queue pass, so the queue sees every task it wrote.

Every step is idempotent and the process may die at any line: the finalizer is on a task
before its first submission, and the submission id is derived from the object's UID, so a
restarted operator finds the job again (``lifecycle.needs_ray``) and never starts a second.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from ..core import lifecycle
from ..core.clock import Clock
from ..core.clusters import ClusterDoctor
from ..core.lifecycle import LifecycleSettings
from ..core.spec import Phase
from ..core.verlchoice import Composers
from ..core.vocabulary import Key
from .clusterstatus import ClusterReports
from .fleet import Connect, Fleet, implicit_cluster
from .idle import IdleTasks
from .inputcheck import InputChecks
from .intake import Intake
from .jobsync import HistoryRemovals, JobSync
from .logfollow import LogFollowers, latest_steps
from .metrics import Metrics
from .ports import ClusterStore, LogFiles, RayJobs, SharedTree, TaskSecrets, TaskSource, TaskStore
from .preemptor import Preemptor
from .queuesnapshot import QueueSnapshot, in_use
from .reconcile import Draft, TaskReconciler
from .scheduler import Scheduler
from .settings import OperatorConfig
from .view import TaskView, in_queue
from .writer import StatusWriter

log = logging.getLogger(__name__)
# The shortest wait between ticks while a job's end is awaited from Ray (``JobSync.ending``,
# one second at most per job): its reads are paced by ENDING_READ_SECONDS, this only keeps a
# tick from following another with no pause at all.
ENDING_TICK_FLOOR = 0.005


class ControlLoop:
    def __init__(self, config: OperatorConfig, ray: RayJobs, store: TaskStore, tasks: TaskSource, *,
                 clock: Clock, metrics: Metrics, leads: Callable[[], bool] = lambda: True, composers: Composers | None = None,
                 log_files: LogFiles | None = None, clusters: ClusterStore | None = None, connect: Connect | None = None,
                 token_namespace: str | None = None, shared_tree: SharedTree | None = None,
                 secrets: TaskSecrets | None = None):
        """``ray``: the implicit cluster's client (--ray-address); ``clusters`` and ``connect``:
        the ArgusClusters and how a client for one is made (without them: the implicit
        cluster only); ``shared_tree``: where the files tasks read are looked for before they
        start (None: not looked for)."""
        self.config = config
        self.tasks = tasks
        self.leads = leads
        self.clock = clock
        self.metrics = metrics
        self.wake = asyncio.Event()
        monotonic = clock.monotonic
        self.writer = StatusWriter(store, metrics, monotonic)
        self.fleet = Fleet(ray, implicit_cluster(config.ray_address, config.platform.worker_resource),
                           poll_interval=config.poll_interval, monotonic=monotonic, store=clusters, connect=connect,
                           token_namespace=token_namespace, kuberay_url=config.kuberay_dashboard_url)
        self.nodes = self.fleet.implicit.nodes
        self.jobs = JobSync(self.fleet, config.poll_interval, monotonic)
        self.removals = HistoryRemovals(self.fleet.ray, monotonic)
        self.settings = LifecycleSettings(ray_grace_seconds=config.ray_grace_seconds, delete_grace_seconds=config.delete_grace_seconds,
                                          dashboard_url=config.ray_address, worker_resource=config.platform.worker_resource,
                                          ray_job_retention_seconds=config.ray_job_retention_seconds,
                                          default_ttl_seconds=config.default_ttl_seconds,
                                          gitops_tracking_label=config.gitops_tracking_label)
        self.logs = LogFollowers(self.fleet.ray, config.progress_metrics, config.progress_interval, clock.now, monotonic,
                                 source=config.progress_source, files=log_files, users_root_of=self._users_root,
                                 on_end=self._job_ended)
        self.task_reconciler = TaskReconciler(self.fleet, store, self.writer, self.jobs, self.removals, self.settings, clock=clock, metrics=metrics)
        self.input_checks = InputChecks(config.platform, composers, shared_tree, self._root) if shared_tree is not None else None
        # argus doctor's last verdict on each ArgusCluster (written by the operator's DoctorLoop),
        # shown in its status; a cluster whose verl snapshot runs another verl takes no new task.
        self.doctor_verdicts: dict[str, ClusterDoctor] = {}
        snapshot = QueueSnapshot(config, self.fleet, self.jobs, store, monotonic, doctor=self.doctor_verdicts,
                                 composers=composers, input_checks=self.input_checks)
        # A new task is composed for the verl release the clusters it may use run (core.verlchoice).
        self.intake = Intake(config.platform, composers, store, self.task_reconciler, monotonic, input_checks=self.input_checks,
                             choose=snapshot.verl_choice)
        self.scheduler = Scheduler(config.platform, composers, snapshot, self.fleet, self.task_reconciler, self.view, self.tasks.views,
                               clock=clock, metrics=metrics, secrets=secrets)
        if config.preemption.enabled:
            self.scheduler.preemptor = Preemptor(config.preemption, snapshot, self.fleet, self.jobs, self.task_reconciler,
                                                 self.scheduler.platform_on, composers, metrics=metrics,
                                                 steps=lambda key: latest_steps(self.logs, key))
        self.scheduler.recompose = self.intake.recompose
        self.cluster_reports = (ClusterReports(self.fleet, clusters, clock, config.poll_interval, self.doctor_verdicts)
                                if clusters is not None else None)
        self.idle_tasks = IdleTasks(self.settings)
        self._next_timer: dt.datetime | None = None  # the earliest TTL or retention due among ended tasks
        self._tick_started: float | None = None  # monotonic, while a tick runs (the liveness probe's tick age)
        self.batch_writes = BatchWrites()  # a first start's backlog: see the module's docstring
        self.due_reads = DueReads()  # a tick's Ray reads, and the ends of jobs written while the queue pass refills their slots

    def _root(self, cluster: str) -> str:
        """The root of a cluster's shared tree, as its jobs see it (its ArgusCluster's root, or --root)."""
        found = self.fleet.get(cluster)
        return (found.config.platform(self.config.platform) if found is not None else self.config.platform).root

    def _users_root(self, cluster: str) -> str:
        """The users folder of a cluster's shared tree, at the path its jobs see it (its
        ArgusCluster's root, or --root): where --progress-source file reads its logs."""
        found = self.fleet.get(cluster)
        return (found.config.platform(self.config.platform) if found is not None else self.config.platform).users_root()

    def _job_ended(self, key: Key) -> None:
        """A followed job's log says it ended: read it from Ray in the next tick, at once
        (the end, its status write and the freed slot's next admission in that one tick)."""
        self.jobs.hurry(key)
        self.wake.set()

    # -- the loop ---------------------------------------------------------------------
    async def run(self) -> None:
        # The first tick waits for the full LIST: over a partial view it would not count
        # running tasks it has not seen yet and admit past --max-running.
        await self.tasks.synced.wait()
        try:
            while True:
                if self.leads():
                    self._tick_started = self.clock.monotonic()
                    try:
                        await self.tick()
                    except asyncio.CancelledError:
                        raise
                    except Exception:  # noqa: BLE001 - the loop must survive anything; the next tick retries
                        self.metrics.reconcile_errors.inc()
                        log.exception("reconcile tick failed; retrying next tick")
                    finally:
                        self._tick_started = None
                else:
                    self.jobs.forget_all()
                    self.logs.close()
                    self.metrics.step_down()
                try:
                    await asyncio.wait_for(self.wake.wait(), timeout=self.next_wait())
                except TimeoutError:
                    pass
                self.wake.clear()
        finally:
            self.batch_writes.cancel()
            self.due_reads.cancel()
            self.scheduler.stop_arming()

    def tick_age(self) -> float:
        """Seconds the current tick has run, 0 between ticks: a tick awaits only calls with
        deadlines, so one that runs for minutes is stuck (the liveness probe, host/health.py)."""
        started = self._tick_started
        return 0.0 if started is None else self.clock.monotonic() - started

    async def idle(self) -> None:
        """Wait for the background work started so far (tests, and a clean stop)."""
        await self.batch_writes.done()
        await self.due_reads.done()
        await self.scheduler.armed()
        await self.writer.drain()

    def views(self) -> list[TaskView]:
        return self.writer.overlays(self.tasks.views(), self.clock.monotonic())

    def view(self, key: Key) -> TaskView | None:
        v = self.tasks.get(key)
        return self.writer.overlay(v) if v else None

    def next_wait(self) -> float:
        """Seconds until the next followed job is due (only those are looked at: this runs
        before each tick, up to several times a second). New tasks left for the next tick
        (``intake.INTAKE_PER_TICK``) are taken at once."""
        if self.intake.deferred:
            return 0.05
        now = self.clock.now()
        followed = [v for v in (self.view(k) for k in self.jobs.followed())
                    if v and lifecycle.needs_ray(v.state) and not self.jobs.never_submitted(v)]
        waits = [self.jobs.due_in(v, now, len(followed)) for v in followed]
        if self._next_timer is not None:
            waits.append((self._next_timer - now).total_seconds())
        removal = self.removals.due_in()
        if removal is not None:
            waits.append(removal)
        # At least 50 ms between ticks; but a job whose log told its end is read every
        # ENDING_READ_SECONDS from the start of its last read (Ray says so within 0.1 s of
        # its exit marker), so the next tick may come at once after a tick that long.
        floor = ENDING_TICK_FLOOR if self.jobs.ending() else 0.05
        return max(floor, min([self.config.poll_interval, *waits]))

    async def tick(self) -> None:
        views = self.views()
        self._prune(views)
        self.metrics.observe_phases(views)
        now = self.clock.now()
        each = self.task_reconciler.each
        # Ended tasks with nothing to do until they change or their timer runs out are passed
        # by (idle.py): what follows costs in proportion to the tasks that live.
        live = {v.key for v in views if not self.idle_tasks.passed_by(v, now)}
        # 1. Ray reads that are due. The tick goes on once those the queue pass needs are
        # decided (``DueReads``): a job's end is shown in the views at once and its status
        # patch goes out while the queue pass gives its slot out (the tick waits for it at
        # its end; here, for those a tick that failed midway left going).
        await self.due_reads.done()
        following = [v for v in views if v.key in live and lifecycle.needs_ray(v.state) and not self.jobs.never_submitted(v)]
        due = [v for v in following if self.jobs.due_in(v, now, len(following)) <= 0.01]
        if due:
            await self.due_reads.read(due, self._follow, each, self.jobs.ending())
        # 2. New tasks are validated.
        views = [v for v in self.views() if v.key in live]
        drafts = self.intake.new([v for v in views if v.key not in self.batch_writes.keys])
        if drafts:
            await self.fleet.refresh()  # (once per poll interval) a new task is composed for its clusters' verl
        await self.intake.validate(drafts)
        # 3. Nothing else needs more than a look.
        timers, looks = [], []
        for v in views:
            if v.key in drafts or v.deleting:
                continue
            timer = lifecycle.timer_due(v.state, self.settings)
            if timer is not None:
                timers.append(timer[0])
            if lifecycle.needs_look(v.state, now, self.settings):
                looks.append(v.key)
        await each(self._reconcile(key) for key in looks)
        idle_timer = self.idle_tasks.next_timer(now)
        self._next_timer = min((t for t in [*timers, idle_timer] if t is not None and t > now), default=None)
        await each(self._final_progress(key) for key in self.logs.finished())
        await self.removals.check()
        # 4. The queue, once the last batch's writes are done (its tasks are in the queue too).
        written = self.batch_writes.keys
        await self.batch_writes.done()
        if written:  # those tasks as written (a task gone meanwhile left out)
            views = [w for w in ((self.view(v.key) if v.key in written else v) for v in views) if w is not None]
        queued = [d.view for d in drafts.values() if d.view.phase == Phase.Queued.value and not d.view.cancel and not d.view.suspend]
        queued += [v for v in views if v.key not in drafts and in_queue(v)]
        active = [v for v in views if v.active]
        if queued:
            self.due_reads.queue_pass_begins()
            await self.scheduler.run(queued, active, self.intake.not_ready(views, drafts, now), drafts, self.jobs.ending())
        else:
            await self.fleet.refresh()  # the clusters' status and finalizers follow them with or without a queue
        self.metrics.observe_users(in_use(active), queued, self.scheduler.snapshot.quotas)
        writes = (self.task_reconciler.write_locked(d) for d in drafts.values())
        if self.intake.deferred:
            # More new tasks wait: the next tick (at once) validates them while these go out.
            self.batch_writes.start(each(writes), frozenset(drafts))
        else:
            await each(writes)
        if await self.due_reads.freed_late(self.view):
            self.wake.set()  # a read the queue pass did not wait for freed a slot: the next tick gives it out
        current = [v for v in self.views() if v.key in live]
        for v in current:
            self.idle_tasks.note(v, now)
        self.logs.follow({v.key: _job_log(v) for v in current if v.phase == Phase.Running.value and not v.deleting})
        if self.cluster_reports is not None:
            await self.cluster_reports.write(self.views, self.scheduler.snapshot.claims, self.scheduler.snapshot.clusters_for,
                                            self.jobs.never_submitted)

    def _prune(self, views: list[TaskView]) -> None:
        """Forget what was kept for tasks that are gone."""
        present = {v.key for v in views}
        self.task_reconciler.forget(present)
        self.intake.forget(present)
        self.idle_tasks.forget(present)
        if self.scheduler.preemptor is not None:
            self.scheduler.preemptor.forget({v.uid for v in views})
        for key in self.jobs.followed():
            if key not in present:
                self.jobs.forget(key)
                self.writer.forget(key)

    # -- one task ---------------------------------------------------------------------
    async def _follow(self, key: Key, decided: asyncio.Event | None = None) -> None:
        """Read the task's job and act on what Ray says. ``decided`` is set once that is
        written, or for a job that ended once its end is decided and shown, before its patch."""
        try:
            async with self.task_reconciler.lock(key):
                view = self.view(key)
                if view is None or not lifecycle.needs_ray(view.state):
                    return
                seen = await self.jobs.observe(view.state, view.job_cluster)
                draft = Draft.of(view)
                ended = isinstance(seen, (lifecycle.JobUnknown,)) or (isinstance(seen, lifecycle.JobObserved) and not seen.active)
                if isinstance(seen, lifecycle.JobObserved) and not seen.active:
                    # Its stream brings the job's last lines a second or so after the end: read
                    # them now, so that the end and the last progress go in one status patch.
                    await self.logs.read_the_rest(key)
                progress = self.logs.progress_due(key, view.state.status.progress, final=ended)
                if progress is not None:
                    draft.take(self.task_reconciler.step(view, lifecycle.ProgressObserved(progress)))
                try:
                    await self.task_reconciler.decide_and_write(draft, seen, shown=decided if ended else None)
                except Exception:
                    if progress is not None:
                        self.logs.not_written(key)  # the next look takes it again
                    raise
        finally:
            if decided is not None:
                decided.set()

    async def _reconcile(self, key: Key) -> None:
        """A task that needs a look without anything new from Ray (cancelled while it never
        reached Ray; its time to live or its Ray jobs' retention ran out)."""
        async with self.task_reconciler.lock(key):
            view = self.view(key)
            if view is not None:
                await self.task_reconciler.decide_and_write(Draft.of(view), lifecycle.Reconcile())

    async def _final_progress(self, key: Key) -> None:
        """The last lines of an ended job's log: its final progress."""
        async with self.task_reconciler.lock(key):
            view = self.view(key)
            progress = self.logs.progress_due(key, view.state.status.progress, final=True) if view else None
            if view is not None and progress is not None and not view.deleting:
                try:
                    await self.task_reconciler.decide_and_write(Draft.of(view), lifecycle.ProgressObserved(progress))
                except Exception:
                    # The follower stays (finished again next tick): a failed write of the
                    # job's last progress must not lose it.
                    self.logs.not_written(key)
                    raise
            self.logs.drop(key)


class BatchWrites:
    """Writes that go on while the loop goes on, and whose they are: the first statuses of a
    batch of new tasks, written while the next tick validates the next batch (a first
    start's backlog); the ends of jobs, written while the queue pass refills their slots."""

    def __init__(self) -> None:
        self.keys: frozenset[Key] = frozenset()
        self._writes: asyncio.Future[None] | None = None

    def start(self, writes: Coroutine[Any, Any, None], keys: frozenset[Key]) -> None:
        self._writes, self.keys = asyncio.ensure_future(writes), keys

    async def done(self) -> None:
        """Wait for the batch's writes, if any are still going on."""
        writes, self._writes = self._writes, None
        try:
            if writes is not None:
                await writes
        finally:
            self.keys = frozenset()

    def cancel(self) -> None:
        """Stopping: the writes not done are the next leader's (those tasks are still new)."""
        if self._writes is not None:
            self._writes.cancel()


class DueReads(BatchWrites):
    """A tick's Ray reads (``ControlLoop._follow``) and the writes they decide, going on while
    the tick goes on. The queue pass waits for the reads that can change what it counts. In
    a tick that reads a job whose end is awaited (``JobSync.ending``: its log said so), those
    are its read and the reads of tasks whose status is not active but which may have reached
    Ray all the same (a queued one submitted just before a crash is adopted, and runs); the
    other running jobs' reads can only free a slot, so they go on beside the queue pass rather
    than hold that refill back, and one that ends after the pass began had its slot missed:
    the loop ticks again at once (``freed_late``). In any other tick, every read: an end found
    by a periodic read is refilled in its own tick."""

    def __init__(self) -> None:
        super().__init__()
        self._decided: dict[Key, asyncio.Event] = {}
        self._late: list[Key] = []

    async def read(self, due: list[TaskView], follow: Callable[[Key, asyncio.Event], Coroutine[Any, Any, None]],
                   each: Callable[[Any], Coroutine[Any, Any, None]], ending: frozenset[Key]) -> None:
        """Start the reads of ``due``; return once those the queue pass needs are decided."""
        decided = {v.key: asyncio.Event() for v in due}
        self._decided, self._late = decided, []
        self.start(each(follow(v.key, decided[v.key]) for v in due), frozenset(decided))
        awaited = any(v.key in ending for v in due)
        await asyncio.gather(*(decided[v.key].wait() for v in due if not v.active or not awaited or v.key in ending))

    def queue_pass_begins(self) -> None:
        self._late = [key for key, event in self._decided.items() if not event.is_set()]

    async def freed_late(self, view_of: Callable[[Key], TaskView | None]) -> bool:
        """Wait for the tick's reads and their writes; whether one decided after the queue
        pass began left its task no longer active (its slot free)."""
        late, self._decided, self._late = self._late, {}, []
        await self.done()
        return any(v is not None and not v.active for v in map(view_of, late))


def _job_log(view: TaskView) -> tuple[str, str | None, str]:
    """A running task's job, for its log's follower: the submission id, the attempt's log
    file as the jobs see it, and the cluster it runs on."""
    state = view.state
    log_file = state.status.log_file
    return state.submission_id, log_file.job_path if log_file is not None else None, view.job_cluster
