"""Following the tasks' Ray jobs: when each is due for a read (``core.polling``), the read
itself, and what it means as a lifecycle observation (``JobObserved``, ``JobUnknown``,
``RayUnreachable``). Also Ray's node list, read at most once per poll interval, for the
queue's capacity and the placement check."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from ..core import lifecycle
from ..core.lifecycle import Observation, TaskState
from ..core.plan import driver_gpus
from ..core.polling import ENDING_READ_SECONDS, ENDING_READS_FOR, FASTEST_POLL_SECONDS, poll_delay
from ..core.rayjobs import RayJobUnknown, RayRefused, RayUnreachable
from ..core.times import parse_time
from ..core.vocabulary import Key
from .ports import RayJobs
from .rayclusters import Clusters, ray_error_reason
from .view import TaskView, in_queue

log = logging.getLogger(__name__)


class JobSync:
    """Which tasks' jobs to read now, and reading them (each from its own cluster)."""

    def __init__(self, clusters: Clusters, poll_interval: float, monotonic: Callable[[], float]):
        self.clusters = clusters
        self.poll_interval = poll_interval
        self.monotonic = monotonic
        self._read_at: dict[Key, float] = {}       # monotonic time of each followed task's last read
        self._submitted_at: dict[Key, float] = {}  # monotonic time this process submitted it
        self._known_drivers: dict[Key, str] = {}
        # Each task whose log said its job ended (``hurry``): since when (monotonic), and
        # whether it has been read since.
        self._ending: dict[Key, tuple[float, bool]] = {}
        self.job_ids: dict[Key, str] = {}  # Ray's own job id of each followed task's driver
        # Where Ray placed each task's GPU-holding driver (a torchrun launch): submission id,
        # node id, GPUs. The queue's claim for it stays on that node (admission.claims).
        self.gpu_drivers: dict[Key, tuple[str, str, float]] = {}
        # Queued tasks this process put the finalizer on ahead of their submission (``arm``),
        # with the submission id of the attempt: until it is submitted Ray has no such job.
        self._armed: dict[Key, str] = {}

    def forget(self, key: Key) -> None:
        self._read_at.pop(key, None)
        self._submitted_at.pop(key, None)
        self._known_drivers.pop(key, None)
        self._ending.pop(key, None)
        self.job_ids.pop(key, None)
        self.gpu_drivers.pop(key, None)
        self._armed.pop(key, None)

    def forget_all(self) -> None:
        """Another replica leads: read every job afresh if this one leads again."""
        self._read_at.clear()
        self._submitted_at.clear()
        self._ending.clear()
        self._armed.clear()

    def arm(self, key: Key, submission_id: str) -> None:
        """The finalizer goes on the queued task ahead of its submission (the next in line for
        an ending job's slot): Ray has no job ``submission_id`` until ``disarm``."""
        self._armed[key] = submission_id

    def disarm(self, key: Key) -> None:
        """The task is about to be submitted (or its finalizer did not go on)."""
        self._armed.pop(key, None)

    def never_submitted(self, view: TaskView) -> bool:
        """Whether this process armed the task's attempt and has not submitted it since: a
        queued task holding the finalizer, which ``lifecycle.needs_ray`` would have read
        (it may have reached Ray before a crash), with nothing in Ray to read. Its read is
        due again once a cancel, a suspension or a deletion asks for its job to be stopped
        (that read finds none and lets the lifecycle go on), and after a restart."""
        return in_queue(view) and self._armed.get(view.key) == view.state.submission_id

    def followed(self) -> list[Key]:
        return list(self._read_at)

    def hurry(self, key: Key) -> None:
        """The task's log says its job ended (``logfollow``): read it now, and then often until
        Ray says so too (ENDING_READS_FOR seconds at most)."""
        if key in self._read_at:
            self._ending[key] = (self.monotonic(), False)

    def ending(self) -> frozenset[Key]:
        """The followed jobs whose log said they ended within ENDING_READS_FOR seconds and Ray
        has not said so yet (the loop then ticks every ENDING_READ_SECONDS)."""
        now = self.monotonic()
        for key in [k for k, (since, _) in self._ending.items() if now - since >= ENDING_READS_FOR]:
            del self._ending[key]  # read as any other job now (due_in), and not looked at again here
        return frozenset(self._ending)

    def submitted(self, key: Key) -> None:
        self._submitted_at[key] = self._read_at[key] = self.monotonic()

    def _age(self, view: TaskView, now: dt.datetime) -> float | None:
        """Seconds since the task was admitted (None: not known)."""
        if view.key in self._submitted_at:
            return self.monotonic() - self._submitted_at[view.key]
        admitted = parse_time(view.state.status.admitted_at)
        return (now - admitted).total_seconds() if admitted else None

    def due_in(self, view: TaskView, now: dt.datetime, active: int) -> float:
        """Seconds until the task's next read (<= 0: due now); ``active`` followed in all."""
        last = self._read_at.get(view.key)
        if last is None:
            return 0.0
        since, read = self._ending.get(view.key, (None, False))
        if since is not None and self.monotonic() - since < ENDING_READS_FOR:
            return last + ENDING_READ_SECONDS - self.monotonic() if read else 0.0
        if lifecycle.stopping(view.state, now):
            return last + FASTEST_POLL_SECONDS - self.monotonic()  # stopping: read (and stop) again soon
        return last + poll_delay(self._age(view, now), self.poll_interval, active) - self.monotonic()

    async def observe(self, task: TaskState, cluster: str = "") -> Observation:
        """Read the task's job from Ray (of ``cluster``, where it was submitted); what that
        read means for the lifecycle."""
        key = (task.namespace, task.name)
        self._read_at[key] = self.monotonic()
        if key in self._ending:
            self._ending[key] = (self._ending[key][0], True)
        try:
            job = await self.clusters.ray(cluster).job(task.submission_id)
        except RayJobUnknown:
            return lifecycle.JobUnknown()
        except (RayUnreachable, RayRefused) as exc:
            return lifecycle.RayUnreachable(str(exc), ray_error_reason(exc))
        if job.job_id:
            self.job_ids[key] = job.job_id
        gpus = driver_gpus(job.metadata)
        if job.driver_node_id and gpus > 0 and job.active:
            self.gpu_drivers[key] = (task.submission_id, job.driver_node_id, gpus)
        else:
            self.gpu_drivers.pop(key, None)
        on_worker: bool | None = None
        nodes = self.clusters.nodes(cluster)
        if job.driver_node_id and self._known_drivers.get(key) != job.driver_node_id and nodes is not None:
            on_worker = await nodes.on_worker(job.driver_node_id)
            if on_worker is not None:
                self._known_drivers[key] = job.driver_node_id
        found = self.clusters.get(cluster)
        return lifecycle.JobObserved(status=job.status, unknown_status=job.unknown_status, message=job.message, driver_node_id=job.driver_node_id,
                                     start_time_ms=job.start_time_ms, end_time_ms=job.end_time_ms, driver_on_worker=on_worker,
                                     cluster=cluster, dashboard_url=found.config.address if found is not None and cluster else None)


# Ray's job monitor notices a job's supervisor has exited up to a second after the job's end
# (JOB_MONITOR_LOOP_PERIOD_S); if the job's record was deleted in between, the monitor finds
# no status and writes one (FAILED, "Job supervisor actor died"), so the job is back in the
# history. A removal is checked once after this long and done again when that happened.
REMOVAL_SETTLE_SECONDS = 5.0
REMOVAL_CHECKS = 3


class HistoryRemovals:
    """Removing ended jobs from Ray's job history, and making it stick (see above). Each job
    is removed from the cluster it ran on (``ray_of``: a cluster's name -> its Ray)."""

    def __init__(self, ray_of: Callable[[str], RayJobs], monotonic: Callable[[], float], settle: float = REMOVAL_SETTLE_SECONDS):
        self.ray_of = ray_of
        self.monotonic = monotonic
        self.settle = settle
        self._checks: dict[str, tuple[float, int, str]] = {}  # submission id -> (due, checks left, cluster)

    async def remove(self, jobs: tuple[tuple[str, str], ...]) -> bool:
        """Remove the jobs (submission id, cluster); True when Ray has none of them left (a
        later check makes sure it stays so); False when Ray could not be asked (try again later)."""
        done = True
        for sid, cluster in jobs:
            if not await self._remove(sid, REMOVAL_CHECKS, cluster):
                done = False
        return done

    async def _remove(self, sid: str, checks: int, cluster: str) -> bool:
        try:
            await self.ray_of(cluster).delete(sid)
        except RayJobUnknown:
            self._checks.pop(sid, None)
            return True
        except RayUnreachable as exc:
            log.warning("could not remove Ray job %s from Ray's history: %s; trying again later", sid, exc)
            return False
        except RayRefused as exc:  # not ended (it should have been): leave it
            log.warning("Ray refused to remove job %s from its history: %s", sid, exc)
            self._checks.pop(sid, None)
            return True
        if checks > 0:
            self._checks[sid] = (self.monotonic() + self.settle, checks - 1, cluster)
        return True

    def due_in(self) -> float | None:
        """Seconds until the next check is due (None: nothing to check)."""
        if not self._checks:
            return None
        return min(due for due, _, _ in self._checks.values()) - self.monotonic()

    async def check(self) -> None:
        """Look again at the jobs removed a while ago; remove any that came back."""
        now = self.monotonic()
        for sid, (due, left, cluster) in list(self._checks.items()):
            if due > now:
                continue
            del self._checks[sid]
            try:
                await self.ray_of(cluster).job(sid)
            except RayJobUnknown:
                # Gone, for now: the monitor may not have noticed the supervisor's exit yet
                # (later still on a loaded machine), so it is looked at until the checks run out.
                if left > 0:
                    self._checks[sid] = (now + self.settle, left - 1, cluster)
                continue
            except RayUnreachable:
                self._checks[sid] = (now + self.settle, left, cluster)  # ask again later
                continue
            log.info("Ray job %s was back in Ray's history after its removal (Ray's job monitor wrote it "
                     "again as the job's supervisor exited); removing it again", sid)
            await self._remove(sid, left, cluster)
