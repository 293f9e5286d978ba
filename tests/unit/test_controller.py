"""The controller (``argus.controller.loop``) driven tick by tick over in-memory fakes
of the API server and Ray (tests/unit/fakes.py): every branch of a task's life, including
the crash windows, in milliseconds. The same paths run against the real kube-apiserver and
Ray in tests/integration."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from argus.controller.loop import ControlLoop
from argus.controller.metrics import Metrics
from argus.controller.settings import OperatorConfig
from argus.core.config import PlatformConfig
from argus.core.plan import validate_task
from argus.core.preemption import PreemptionPolicy
from argus.core.progress import ProgressSource
from argus.core.queue import free_per_node
from argus.core.rayjobs import PlacementGroup
from fakes import FakeClock, FakeCluster, FakeLogFiles, FakeRay

pytestmark = pytest.mark.unit

NS = "team"
CMD = ("python3 -m verl.trainer.main_ppo data.train_files=$HOME/datasets/a.parquet data.val_files=$HOME/datasets/b.parquet "
       "+ray_kwargs.ray_init.address=auto trainer.nnodes={n} trainer.n_gpus_per_node={g}")


def spec(gpus: int = 1, **extra: Any) -> dict[str, Any]:
    return {"kind": "advanced", "workload": "ppo", "nnodes": 1, "nGpusPerNode": gpus, "command": CMD.format(n=1, g=gpus), **extra}


class World:
    """A control_loop over fakes, and the means to move time and Ray along."""

    def __init__(self, *, max_running: int = 4, ray_grace: float = 300, delete_grace: float = 300, gpus: float = 4,
                 ray_job_retention: float | None = None, progress_source: ProgressSource = ProgressSource.stream,
                 preemption: PreemptionPolicy | None = None):
        self.clock = FakeClock()
        self.cluster = FakeCluster(self.clock)
        self.ray = FakeRay(self.clock, worker_gpus=gpus)
        self.config = OperatorConfig(platform=PlatformConfig(), ray_address="http://ray-head:8265", max_running=max_running,
                                     poll_interval=2.0, ray_grace_seconds=ray_grace, delete_grace_seconds=delete_grace,
                                     ray_job_retention_seconds=ray_job_retention, progress_source=progress_source,
                                     preemption=preemption or PreemptionPolicy())
        self.files = FakeLogFiles(self.ray)
        self.control_loop = ControlLoop(self.config, self.ray, self.cluster, self.cluster, clock=self.clock, metrics=Metrics(self.clock),
                                     log_files=self.files, secrets=self.cluster)
        self.control_loop.task_reconciler.strict_transitions = True  # a decision the table does not declare fails the test
        self.control_loop.logs.file_poll_seconds = 0.001  # log files read as often as the fake stream is (real seconds)
        self.cluster.onboard(NS, "alice")
        # One event loop for the world's life: background work (log streams) goes on across ticks.
        self.loop = asyncio.new_event_loop()
        OPEN_WORLDS.append(self)

    def tick(self, after: float = 0.0) -> None:
        self.clock.advance(after)

        async def go() -> None:
            await asyncio.sleep(0.01)  # background work (log streams) catches up first
            await self.control_loop.tick()
            await self.control_loop.idle()
        self.loop.run_until_complete(go())

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.control_loop.logs.close()
        self.loop.run_until_complete(asyncio.sleep(0))
        self.loop.close()

    def free_gpus(self) -> list[float]:
        """Free GPUs per worker node as the queue's decision sees them now (Ray's report
        minus what admitted tasks claim)."""
        inputs = self.control_loop.scheduler.snapshot
        active = [v for v in self.control_loop.views() if v.active]
        nodes = self.control_loop.fleet.implicit.nodes
        capacity, _ = self.loop.run_until_complete(nodes.capacity())
        assert capacity is not None
        return free_per_node(capacity, inputs.claims(active, nodes))

    def settle(self, ticks: int = 3, every: float = 2.0) -> None:
        for _ in range(ticks):
            self.tick(every)

    def phase(self, key: tuple[str, str]) -> str | None:
        return self.cluster.status(key).get("phase")

    def sid(self, key: tuple[str, str]) -> str:
        view = self.cluster.get(key)
        assert view is not None
        return view.state.submission_id

    def plan_of(self, key: tuple[str, str]) -> Any:
        obj = self.cluster.objects[key]
        verdict = validate_task(obj, "alice", self.config.platform)
        assert verdict.plan is not None, verdict.error_lines()
        return verdict.plan


OPEN_WORLDS: list[World] = []


@pytest.fixture(autouse=True)
def close_worlds() -> Iterator[None]:
    """Every world a test made is closed after it (its background tasks with it)."""
    yield
    while OPEN_WORLDS:
        OPEN_WORLDS.pop().close()


@pytest.fixture
def world() -> World:
    return World()


def status_patches(world: World, key: tuple[str, str]) -> list[dict[str, Any]]:
    return [p for name, p in world.cluster.writes.status if name == key[1]]


# --------------------------------------------------------------------------- the happy path

def test_a_task_goes_from_new_to_submitted_in_one_status_write(world: World) -> None:
    key = world.cluster.create("t", spec())
    world.tick()
    assert world.phase(key) == "Submitted"
    status = world.cluster.status(key)
    assert status["reason"] == "Admitted" and status["user"] == "alice" and "/private/users/alice/datasets/a.parquet" in status["command"]
    assert status["rayJob"] == {"submissionId": world.sid(key), "status": "PENDING", "dashboardUrl": "http://ray-head:8265"}
    assert len(status_patches(world, key)) == 1
    # The finalizer went on before Ray saw the job.
    assert world.cluster.writes.metadata == [("t", ["argus.io/stop-ray-job"])]
    assert world.ray.calls.index(("submit", world.sid(key))) >= 0
    assert world.cluster.events == []  # Submitted is a quiet phase: the next phase's Event says where it went


def test_the_finalizer_is_on_before_the_submission() -> None:
    world = World()
    order: list[str] = []
    add, submit = world.cluster.add_finalizer, world.ray.submit

    async def add_then_note(*a: Any) -> bool:
        order.append("finalizer")
        return await add(*a)

    async def submit_then_note(plan: Any) -> bool:
        order.append("submit")
        return await submit(plan)

    world.cluster.add_finalizer, world.ray.submit = add_then_note, submit_then_note  # type: ignore[method-assign]
    world.cluster.create("t", spec())
    world.tick()
    assert order == ["finalizer", "submit"]


def test_a_whole_run_costs_six_writes(world: World) -> None:
    """A task that validates, runs and succeeds: one finalizer patch, three status patches
    (Submitted, Running, Succeeded) and one Event per phase change but the quiet Submitted."""
    key = world.cluster.create("t", spec())
    world.tick()
    world.tick(0.2)  # Ray says PENDING: nothing to write
    world.ray.run(world.sid(key))
    world.tick(0.2)
    assert world.phase(key) == "Running"
    world.ray.finish(world.sid(key))
    world.tick(0.5)
    assert world.phase(key) == "Succeeded"
    world.settle()
    assert len(status_patches(world, key)) == 3
    assert len(world.cluster.writes.metadata) == 1
    assert [e.message.split(":")[0] for e in world.cluster.events] == ["Submitted -> Running", "Running -> Succeeded"]
    assert world.cluster.reasons(key) == ["RayJobRunning", "RayJobSucceeded"]
    status = world.cluster.status(key)
    assert status["rayJob"]["status"] == "SUCCEEDED" and status["rayJob"]["driverNodeId"] == "w1"
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Admitted": "True", "Running": "False", "Complete": "True", "Failed": "False", "Finished": "True", "RayReachable": "True"}


def test_ray_is_read_often_while_young_then_every_poll_interval(world: World) -> None:
    key = world.cluster.create("t", spec())
    world.tick()
    world.ray.run(world.sid(key))
    reads = world.ray.count("status")
    for _ in range(10):
        world.tick(0.2)
    young = world.ray.count("status") - reads
    assert young >= 8  # a job seconds old: read every 0.2 s
    world.tick(120)
    before = world.ray.count("status")
    for _ in range(10):
        world.tick(0.2)  # two seconds
    assert world.ray.count("status") - before == 1  # an old job: once per poll interval


# --------------------------------------------------------------------------- refusals

def test_an_invalid_task_is_rejected_and_never_reaches_ray(world: World) -> None:
    key = world.cluster.create("bad", spec(command="echo python3 -m verl.trainer.main_ppo"))
    world.settle()
    status = world.cluster.status(key)
    assert (status["phase"], status["reason"]) == ("Rejected", "InvalidSpec")
    assert "does not run an allowed entrypoint" in status["message"]
    assert world.ray.count("submit") == 0 and world.cluster.writes.metadata == []
    assert world.cluster.events[0].type == "Warning" and world.cluster.events[0].reason == "InvalidSpec"


def test_a_task_whose_checks_raise_is_rejected_once_with_the_message(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 34: a check that raises is a refusal, not a retry every tick."""
    import argus.core.plan as plan

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("the composer fell over")

    monkeypatch.setattr(plan, "_read_fields", boom)
    key = world.cluster.create("t", spec())
    world.settle()
    status = world.cluster.status(key)
    assert (status["phase"], status["reason"]) == ("Rejected", "InvalidSpec")
    assert "ValueError: the composer fell over" in status["message"] and "the checks failed on this task" in status["message"]
    assert world.ray.count("submit") == 0


def test_a_namespace_without_user_rejects_its_tasks(world: World) -> None:
    key = world.cluster.create("t", spec(), namespace="bare")
    world.tick()
    status = world.cluster.status(key)
    assert (status["phase"], status["reason"]) == ("Rejected", "NamespaceNotOnboarded")
    assert "argus onboard" in status["message"]


def test_an_unreadable_namespace_is_tried_again_later(world: World, caplog: pytest.LogCaptureFixture) -> None:
    """Without get on namespaces (tests/integration/test_chart.py's trimmed roles): the task
    gets nothing, the log names the refusal, and it is read again after the retry delay."""
    from fakes import forbidden
    world.cluster.namespace_error = forbidden("get", "namespaces", "team")
    key = world.cluster.create("t", spec())
    world.tick()
    assert world.phase(key) is None and world.cluster.writes.status == []
    assert any(r.levelno == logging.WARNING and r.getMessage().startswith("cannot read namespace team to find the user of its tasks: ")
               and 'cannot get resource "namespaces"' in r.getMessage() for r in caplog.records)
    world.cluster.namespace_error = None
    world.tick(5)
    assert world.phase(key) is None  # not before the retry delay
    world.tick(6)
    assert world.phase(key) == "Submitted"


def test_new_tasks_read_their_namespace_once_per_tick(world: World) -> None:
    keys = [world.cluster.create(f"t{i}", spec()) for i in range(20)]
    world.tick()
    assert world.cluster.namespace_reads == 1
    assert {world.phase(k) for k in keys} == {"Submitted", "Queued"}


# --------------------------------------------------------------------------- the queue

def test_the_queue_admits_by_priority_then_age_and_says_where_each_waits() -> None:
    world = World(max_running=1)
    low = world.cluster.create("low", spec())
    high = world.cluster.create("high", spec(priority=10))
    mid = world.cluster.create("mid", spec(priority=5))
    world.tick()
    assert [world.phase(k) for k in (high, mid, low)] == ["Submitted", "Queued", "Queued"]
    assert world.cluster.status(mid)["message"] == "waiting for a free slot (1 tasks may run at once)"
    assert world.cluster.status(low)["message"] == "waiting behind tasks ahead in the queue"
    assert len(status_patches(world, mid)) == 1  # validated and placed in one write
    world.ray.finish(world.sid(high))
    world.tick(0.5)
    assert world.phase(mid) == "Submitted" and world.phase(low) == "Queued"


def test_a_task_bigger_than_the_cluster_is_unschedulable_and_blocks_nobody(world: World) -> None:
    big = world.cluster.create("big", spec(gpus=8, priority=5))
    small = world.cluster.create("small", spec())
    world.tick()
    status = world.cluster.status(big)
    assert (status["phase"], status["reason"]) == ("Queued", "Unschedulable")
    assert status["message"] == ("needs 1 worker node(s) with 8 GPUs each, but the largest worker node has 4 GPUs and there is "
                                 "1 worker node(s); it will run only if the cluster grows")
    assert world.phase(small) == "Submitted"


def test_a_waiting_task_costs_no_write_while_only_its_place_moves() -> None:
    """Places are served on demand (issue 26): a waiting task is written when it is queued and
    when its reason or message changes, never because a task ahead of it started."""
    world = World(max_running=1)
    first = world.cluster.create("first", spec())
    keys = [world.cluster.create(f"t{i}", spec()) for i in range(4)]
    world.tick()
    assert all("queuePosition" not in world.cluster.status(k) for k in keys)
    for head in keys[:2]:
        world.ray.finish(world.sid(first))
        world.tick(0.5)
        assert world.phase(head) == "Submitted"
        first = head
    world.settle(ticks=20, every=2.0)
    # the head of the queue changed its message once (behind tasks -> waiting for a slot)
    assert world.cluster.status(keys[2])["message"] == "waiting for a free slot (1 tasks may run at once)"
    assert len(status_patches(world, keys[2])) == 2
    assert len(status_patches(world, keys[3])) == 1  # queued, then only its place moved: no write


def test_cancel_while_queued_never_reaches_ray() -> None:
    world = World(max_running=1)
    world.cluster.create("blocker", spec())
    waiting = world.cluster.create("waiting", spec())
    world.tick()
    world.cluster.cancel(waiting)
    world.tick(0.1)
    status = world.cluster.status(waiting)
    assert (status["phase"], status["reason"], status["message"]) == ("Stopped", "Cancelled", "cancelled while queued; it never reached Ray")
    assert world.ray.count("submit") == 1  # only the blocker


# --------------------------------------------------------------------------- crash windows

def crash_after_submit(world: World, key: tuple[str, str]) -> str:
    """The operator died right after Ray accepted the job: the finalizer is on, the job is
    in Ray, the status still says Queued (what a real crash at that line leaves)."""
    obj = world.cluster.objects[key]
    obj["metadata"]["finalizers"] = ["argus.io/stop-ray-job"]
    obj["status"] = {"phase": "Queued", "reason": "Validated", "user": "alice"}
    plan = world.plan_of(key)
    world.ray.put(plan, "RUNNING")
    return plan.submission_id


def test_cancelling_a_task_whose_job_reached_ray_unrecorded_stops_the_job() -> None:
    """Issue 18's bug: the cancel asks Ray about the deterministic submission id and stops
    what exists; the task is Stopped only when Ray says the job is."""
    world = World(max_running=1)
    world.cluster.create("blocker", spec())
    world.tick()
    key = world.cluster.create("orphan", spec())
    sid = crash_after_submit(world, key)
    world.cluster.cancel(key)
    world.tick(0.1)
    assert world.ray.jobs[sid].status == "STOPPED"
    world.settle()
    status = world.cluster.status(key)
    assert (status["phase"], status["reason"]) == ("Stopped", "Cancelled")
    assert "AdoptedExistingJob" in world.cluster.reasons(key)


def test_a_restarted_operator_adopts_the_unrecorded_job_instead_of_submitting_twice(world: World) -> None:
    key = world.cluster.create("t", spec())
    sid = crash_after_submit(world, key)
    world.tick()
    assert world.phase(key) == "Running" and world.cluster.status(key)["reason"] == "RayJobRunning"
    assert world.cluster.status(key)["attempt"] == 1  # the adopted job's attempt, as a submission writes it
    assert world.ray.count("submit") == 0 and list(world.ray.jobs) == [sid]
    assert "AdoptedExistingJob" in world.cluster.reasons(key)


def test_a_resubmission_of_an_existing_id_is_adopted(world: World) -> None:
    """Ray already has the id (a crash after the submit, before even the read path could
    see it): the submit is answered 'exists', and the task adopts the job."""
    key = world.cluster.create("t", spec())
    world.ray.put(world.plan_of(key), "PENDING")
    world.tick()
    status = world.cluster.status(key)
    assert (status["phase"], status["reason"]) == ("Submitted", "AdoptedExistingJob")
    assert len(world.ray.jobs) == 1


def test_deleting_an_ended_task_still_stops_an_orphaned_job() -> None:
    """The second half of issue 18's bug: a task already closed as Stopped whose job is in
    Ray. Deleting it asks Ray and stops the job before the object goes."""
    world = World(max_running=1)
    world.cluster.create("blocker", spec())
    world.tick()
    key = world.cluster.create("orphan", spec())
    crash_after_submit(world, key)
    world.cluster.objects[key]["status"].update(phase="Stopped", reason="Cancelled")  # as the old operator closed it
    sid = world.sid(key)
    world.cluster.delete(key)
    world.tick(0.1)
    assert world.ray.jobs[sid].status == "STOPPED"
    world.tick(0.3)
    assert key not in world.cluster.objects


# --------------------------------------------------------------------------- stopping

def test_cancel_stops_the_running_job(world: World) -> None:
    key = world.cluster.create("t", spec())
    world.tick()
    world.ray.run(world.sid(key))
    world.tick(0.2)
    world.cluster.cancel(key)
    world.tick(0.2)
    assert world.ray.jobs[world.sid(key)].status == "STOPPED"
    world.tick(0.2)
    status = world.cluster.status(key)
    assert (status["phase"], status["reason"], status["message"]) == ("Stopped", "Cancelled", "stopped because spec.cancel was set")


def test_the_active_deadline_stops_the_job_and_fails_the_task(world: World) -> None:
    key = world.cluster.create("t", spec(activeDeadlineSeconds=30))
    world.tick()
    world.ray.run(world.sid(key))
    world.tick(10)
    assert world.ray.active() == [world.sid(key)]
    world.tick(21)
    assert world.ray.active() == []
    world.tick(0.2)
    assert (world.phase(key), world.cluster.status(key)["reason"]) == ("Failed", "DeadlineExceeded")


def test_delete_stops_the_job_then_releases_the_object(world: World) -> None:
    key = world.cluster.create("t", spec())
    world.tick()
    world.ray.run(world.sid(key))
    sid = world.sid(key)
    world.cluster.delete(key)
    assert key in world.cluster.objects  # held by the finalizer
    world.tick(0.2)
    assert world.ray.jobs[sid].status == "STOPPED" and key in world.cluster.objects
    world.tick(0.2)
    assert key not in world.cluster.objects


def test_deleting_a_queued_task_needs_nothing_from_ray() -> None:
    world = World(max_running=1)
    world.cluster.create("blocker", spec())
    key = world.cluster.create("waiting", spec())
    world.tick()
    calls = len(world.ray.calls)
    world.cluster.delete(key)
    world.tick(0.1)
    assert key not in world.cluster.objects
    assert [c for c in world.ray.calls[calls:] if c[0] != "status"] == [] or all(c[1] != "waiting" for c in world.ray.calls[calls:])


def test_delete_grace_releases_a_task_when_ray_stays_away() -> None:
    world = World(delete_grace=60)
    key = world.cluster.create("t", spec())
    world.tick()
    world.ray.reachable = False
    world.cluster.delete(key)
    world.tick(30)
    assert key in world.cluster.objects
    world.tick(31)
    assert key not in world.cluster.objects
    assert "FinalizerReleased" in world.cluster.reasons(key)


# --------------------------------------------------------------------------- Ray trouble

def test_a_head_restart_loses_the_job_and_nothing_is_resubmitted(world: World) -> None:
    key = world.cluster.create("t", spec())
    world.tick()
    world.ray.run(world.sid(key))
    world.tick(0.2)
    world.ray.restart_head()
    world.tick(0.5)
    status = world.cluster.status(key)
    assert (status["phase"], status["reason"]) == ("Failed", "RayJobLost")
    world.settle()
    assert world.ray.count("submit") == 1 and world.ray.jobs == {}


def test_ray_unreachable_fails_running_tasks_only_after_the_grace() -> None:
    world = World(ray_grace=60)
    key = world.cluster.create("t", spec())
    world.tick()
    world.ray.run(world.sid(key))
    world.tick(0.2)
    world.ray.reachable = False
    world.tick(2)
    status = world.cluster.status(key)
    assert status["phase"] == "Running" and {c["type"]: c["status"] for c in status["conditions"]}["RayReachable"] == "False"
    world.tick(57)
    assert world.phase(key) == "Running"
    world.tick(4)
    assert (world.phase(key), world.cluster.status(key)["reason"]) == ("Failed", "RayUnreachable")
    # Ray answers again: the job that may have run on through the outage is stopped.
    world.ray.reachable = True
    world.tick(2)
    assert world.ray.active() == []
    assert {c["type"]: c["status"] for c in world.cluster.status(key)["conditions"]}["RayReachable"] == "True"


def test_queued_tasks_wait_while_ray_is_unreachable_then_run() -> None:
    world = World()
    world.ray.reachable = False
    key = world.cluster.create("t", spec())
    world.tick()
    status = world.cluster.status(key)
    assert (status["phase"], status["reason"]) == ("Queued", "RayUnreachable")
    world.ray.reachable = True
    world.tick(2)
    assert world.phase(key) == "Submitted"


def test_refused_credentials_leave_tasks_queued_with_nothing_submitted_until_the_token_is_right() -> None:
    world = World()
    world.ray.refuse_credentials = 401
    key = world.cluster.create("t", spec())
    world.settle()
    status = world.cluster.status(key)
    assert (status["phase"], status["reason"]) == ("Queued", "RayAuthFailed")
    assert "check the Ray token" in status["message"]
    reach = next(c for c in status["conditions"] if c["type"] == "RayReachable")
    assert (reach["status"], reach["reason"]) == ("False", "RayAuthFailed")
    assert world.ray.count("submit") == 0 and world.ray.jobs == {}
    world.ray.refuse_credentials = None  # the token is fixed
    world.tick(2)
    assert world.phase(key) == "Submitted"


def test_refused_credentials_never_fail_a_running_task_past_the_grace() -> None:
    """Unlike an outage (test above), a refusal is not counted against --ray-grace: the
    job runs on in Ray, and its real end is read once the token is right."""
    world = World(ray_grace=60)
    key = world.cluster.create("t", spec())
    world.tick()
    world.ray.run(world.sid(key))
    world.tick(0.2)
    world.ray.refuse_credentials = 403
    world.tick(2)
    world.tick(120)
    status = world.cluster.status(key)
    assert status["phase"] == "Running" and status.get("rayUnreachableSince") is None
    assert {c["type"]: c["reason"] for c in status["conditions"]}["RayReachable"] == "RayAuthFailed"
    world.ray.finish(world.sid(key))
    world.ray.refuse_credentials = None
    world.tick(2)
    assert world.phase(key) == "Succeeded"
    assert {c["type"]: c["status"] for c in world.cluster.status(key)["conditions"]}["RayReachable"] == "True"


def test_a_refused_submission_fails_the_task(world: World) -> None:
    world.ray.refuse_submissions = "runtime_env: unknown field"
    key = world.cluster.create("t", spec())
    world.tick()
    status = world.cluster.status(key)
    assert (status["phase"], status["reason"], status["message"]) == ("Failed", "RaySubmitFailed", "Ray refused the job: runtime_env: unknown field")


def test_a_driver_on_the_head_is_reported(world: World) -> None:
    key = world.cluster.create("t", spec())
    world.tick()
    world.ray.run(world.sid(key), driver="head")
    world.tick(0.2)
    assert "PlacementViolation" in world.cluster.reasons(key)
    world.tick(0.2)
    assert world.cluster.reasons(key).count("PlacementViolation") == 1


# --------------------------------------------------------------------------- the writer

def test_a_slow_watch_does_not_make_the_operator_act_twice(world: World) -> None:
    """The watch has not shown the Submitted status yet: the writer's own record keeps the
    next tick from submitting (or writing) again."""
    key = world.cluster.create("t", spec())
    world.cluster.freeze_watch()
    world.tick()
    world.tick(0.2)
    world.tick(0.2)
    assert world.ray.count("submit") == 1
    assert len(status_patches(world, key)) == 1
    world.cluster.thaw_watch()


def test_state_kept_per_task_is_dropped_with_the_task(world: World) -> None:
    keys = [world.cluster.create(f"t{i}", spec()) for i in range(3)]
    world.tick()
    for key in keys:
        world.ray.finish(world.sid(key))
        world.cluster.delete(key)
    world.settle()
    assert world.cluster.objects == {}
    rec = world.control_loop
    assert rec.task_reconciler._locks == {} and rec.jobs.followed() == [] and rec.intake._retry_at == {}


# --------------------------------------------------------------------------- progress (issue 13)

def test_progress_comes_from_the_jobs_log_and_its_writes_are_bounded() -> None:
    world = World()
    key = world.cluster.create("t", spec())
    world.tick()
    sid = world.sid(key)
    world.ray.run(sid)
    world.ray.say(sid, "verl stand-in main_ppo\nTotal training steps: 300\nTraining from scratch\n")
    world.tick(0.2)
    patches = len(status_patches(world, key))
    for i in range(1, 61):  # a step every half second for 30 s
        world.ray.say(sid, f"step:{i} - critic/score/mean:{i / 100:.2f} - timing_s/step:0.5\n")
        world.tick(0.5)
    progress = world.cluster.status(key)["progress"]
    assert progress["totalSteps"] == 300 and progress["summary"] == f"{progress['step']}/300" and progress["step"] >= 30
    assert progress["metrics"]["critic/score/mean"] == pytest.approx(progress["step"] / 100)
    assert len(status_patches(world, key)) - patches <= 3  # 30 s at one progress write per 15 s (config default)
    world.ray.say(sid, "step:61 - critic/score/mean:0.61\nFinal validation metrics: {}\n")
    world.ray.finish(sid)
    world.settle()
    status = world.cluster.status(key)
    assert status["phase"] == "Succeeded" and status["progress"]["step"] == 61  # the last line counts, even after the end
    assert status["attempts"][0]["lastStep"] == 61
    world.close()


def test_a_short_run_ends_with_its_progress_in_one_status_patch() -> None:
    """Issue 26: at the end the job's last lines are read from its whole log (its stream
    brings them a second later), so a run shorter than the progress interval is written three
    times in all: Submitted, Running, and its end with its last progress, at once."""
    world = World()
    world.ray.log_lag = 1.0  # the lines reach the stream a second after the driver prints them
    key = world.cluster.create("t", spec())
    world.tick()
    sid = world.sid(key)
    world.ray.run(sid)
    world.tick(0.2)
    world.ray.say(sid, "Total training steps: 3\nstep:1 - a:1\nstep:2 - a:1\nstep:3 - a:1\nFinal validation metrics: {}\n")
    world.ray.finish(sid)
    world.tick(0.2)
    assert world.phase(key) == "Succeeded"  # the end is written at once, not when the stream ends
    world.settle()
    status = world.cluster.status(key)
    assert status["phase"] == "Succeeded" and status["progress"]["step"] == 3 and status["attempts"][0]["lastStep"] == 3, status
    patches = status_patches(world, key)
    assert len(patches) == 3, patches
    assert patches[-1]["phase"] == "Succeeded" and patches[-1]["progress"]["step"] == 3
    world.close()


def test_the_last_progress_survives_a_failed_status_write() -> None:
    """The job's last lines are taken from its log once; an API error on that write must
    not lose them (the next tick writes them)."""
    world = World()
    key = world.cluster.create("t", spec())
    world.tick()
    sid = world.sid(key)
    world.ray.run(sid)
    world.ray.say(sid, "Total training steps: 20\nstep:5 - a:1\n")
    world.tick(0.2)
    world.ray.say(sid, "step:20 - a:2\nFinal validation metrics: {}\n")
    world.ray.finish(sid)
    world.cluster.failing_status_patches = 1
    world.settle()
    status = world.cluster.status(key)
    assert world.cluster.failing_status_patches == 0  # the fault was hit
    assert status["phase"] == "Succeeded" and status["progress"]["step"] == 20, status
    world.close()


def log_reads_from_ray(world: World, sid: str) -> int:
    return sum(1 for op, s in world.ray.calls if op == "logs" and s == sid)


def test_progress_from_the_log_file_asks_ray_for_no_log() -> None:
    """--progress-source file (issue 26): the attempt's log file in the job folder, read where
    the shared tree is mounted, gives the same progress; Ray serves no log stream for it."""
    world = World(progress_source=ProgressSource.file)
    key = world.cluster.create("t", spec())
    world.tick()
    sid = world.sid(key)
    world.ray.run(sid)
    world.tick(0.2)  # running, nothing printed yet: no file (a FileNotFoundError, read again later)
    world.ray.say(sid, "Total training steps: 300\nTraining from scratch\n")
    for i in range(1, 41):
        world.ray.say(sid, f"step:{i} - critic/score/mean:{i / 100:.2f}\n")
        world.tick(0.5)
    progress = world.cluster.status(key)["progress"]
    assert progress["totalSteps"] == 300 and progress["step"] >= 20
    assert progress["metrics"]["critic/score/mean"] == pytest.approx(progress["step"] / 100)
    world.ray.say(sid, "step:41 - critic/score/mean:0.41\nFinal validation metrics: {}\n")
    world.ray.finish(sid)
    world.settle()
    status = world.cluster.status(key)
    assert status["phase"] == "Succeeded" and status["progress"]["step"] == 41, status
    end = [p for p in status_patches(world, key) if p.get("phase") == "Succeeded"]
    assert len(end) == 1 and end[0]["progress"]["step"] == 41  # the end and the last line in one patch
    assert log_reads_from_ray(world, sid) == 0
    assert {path for path, _ in world.files.reads} == {status["logFile"]["jobPath"]}
    offsets = [offset for _, offset in world.files.reads]
    assert offsets == sorted(offsets) and offsets[-1] > 0  # read on from where it stopped, not again from the start
    assert len(world.control_loop.logs) == 0
    world.close()


def test_a_log_file_split_inside_a_character_and_a_line_is_read_whole() -> None:
    world = World(progress_source=ProgressSource.file)
    world.files.most = 7  # every read ends inside a line, some inside the two bytes of an é
    key = world.cluster.create("t", spec())
    world.tick()
    sid = world.sid(key)
    world.ray.run(sid)
    world.ray.say(sid, "Total training steps: 9\nstep:3 - critic/score/mean:0.5 - note:\u00e9")
    world.tick(0.2)
    world.ray.say(sid, "\u00e9\nstep:4 - critic/sc")
    world.tick(1.1)
    world.ray.say(sid, "ore/mean:0.75\n")
    world.ray.finish(sid)
    world.settle()
    status = world.cluster.status(key)
    assert status["progress"]["step"] == 4 and status["progress"]["metrics"]["critic/score/mean"] == 0.75, status
    world.close()


def test_progress_off_follows_nothing() -> None:
    world = World(progress_source=ProgressSource.off)
    key = world.cluster.create("t", spec())
    world.tick()
    sid = world.sid(key)
    world.ray.run(sid)
    world.ray.say(sid, "Total training steps: 3\nstep:3 - a:1\n")
    world.tick(0.2)
    world.ray.finish(sid)
    world.settle()
    status = world.cluster.status(key)
    assert status["phase"] == "Succeeded" and "progress" not in status
    assert log_reads_from_ray(world, sid) == 0 and world.files.reads == []
    world.close()


# --------------------------------------------------------------------------- restarts (issue 13)

def test_a_lost_job_runs_again_as_attempt_two_and_succeeds() -> None:
    world = World()
    key = world.cluster.create("t", spec(restartPolicy="OnRayJobLost"))
    world.tick()
    first = world.sid(key)
    world.ray.run(first)
    world.ray.say(first, "Total training steps: 10\nstep:4 - a:1\n")
    world.tick(0.2)
    world.ray.restart_head()
    world.tick(0.5)
    status = world.cluster.status(key)
    assert (status["phase"], status["reason"], status["attempt"]) in {("Queued", "Retrying", 2), ("Submitted", "Admitted", 2)}
    world.tick(0.1)
    second = world.sid(key)
    assert second == first + "-a2" and world.phase(key) == "Submitted"
    assert "Retrying" in world.cluster.reasons(key)
    world.ray.run(second)
    world.ray.finish(second)
    world.settle()
    status = world.cluster.status(key)
    assert (status["phase"], status["attempt"]) == ("Succeeded", 2)
    assert [(a["attempt"], a["submissionId"], a["outcome"]) for a in status["attempts"]] == [
        (1, first, "RayJobLost"), (2, second, "RayJobSucceeded")]
    assert world.ray.count("submit") == 2
    world.close()


def test_restarts_stop_at_the_backoff_limit() -> None:
    world = World()
    key = world.cluster.create("t", spec(restartPolicy="OnFailure", backoffLimit=1))
    for attempt in (1, 2):
        world.tick(0.1)
        world.tick(0.1)
        sid = world.sid(key)
        assert sid.endswith("-a2") == (attempt == 2)
        world.ray.run(sid)
        world.ray.finish(sid, "FAILED", "Job entrypoint command failed with exit code 1")
        world.tick(0.5)
    status = world.cluster.status(key)
    assert (status["phase"], status["reason"]) == ("Failed", "BackoffLimitExceeded")
    assert [a["outcome"] for a in status["attempts"]] == ["RayJobFailed", "RayJobFailed"]
    world.close()


# --------------------------------------------------------------------------- cleanup (issue 13)

def test_an_ended_task_is_deleted_after_its_ttl_with_its_ray_job(world: World) -> None:
    key = world.cluster.create("t", spec(ttlSecondsAfterFinished=60))
    world.tick()
    sid = world.sid(key)
    world.ray.finish(sid)
    world.tick(0.2)
    assert world.phase(key) == "Succeeded"
    world.tick(30)
    assert key in world.cluster.objects
    world.tick(31)  # the TTL ran out: deleted; the finalizer removes the job from Ray's history first
    world.tick(0.2)
    assert key not in world.cluster.objects and world.cluster.deletions == ["t"]
    assert world.ray.deleted == [sid] and sid not in world.ray.jobs


def test_a_task_argo_cd_tracks_outlives_its_ttl_and_says_why_once(world: World) -> None:
    # Argo CD (selfHeal) would create a deleted task again from Git: a new run after every TTL.
    key = world.cluster.create("t", spec(ttlSecondsAfterFinished=60))
    world.cluster.objects[key]["metadata"]["annotations"] = {
        "argocd.argoproj.io/tracking-id": "alice-tasks:argus.io/ArgusTask:team/t",
        "kubectl.kubernetes.io/last-applied-configuration": "{}"}
    world.tick()
    sid = world.sid(key)
    world.ray.finish(sid)
    world.tick(0.2)
    world.tick(61)
    world.tick(0.2)
    assert key in world.cluster.objects and world.cluster.deletions == []
    assert world.cluster.status(key)["keptBy"] == "Argo CD application alice-tasks (annotation argocd.argoproj.io/tracking-id)"
    assert world.ray.deleted == [sid] and world.cluster.status(key)["rayJobsRemoved"] is True
    world.tick(600)
    assert world.cluster.reasons(key).count("KeptForGitOps") == 1 and key in world.cluster.objects


def test_ray_job_history_is_trimmed_after_the_retention() -> None:
    world = World(ray_job_retention=120)
    key = world.cluster.create("t", spec())
    world.tick()
    sid = world.sid(key)
    world.ray.finish(sid)
    world.tick(0.2)
    world.tick(100)
    assert sid in world.ray.jobs
    world.tick(21)
    assert world.ray.deleted == [sid]
    assert world.cluster.status(key)["rayJobsRemoved"] is True
    world.tick(200)
    assert world.ray.count("delete") == 1  # once
    world.close()


def test_a_job_ray_writes_back_into_its_history_after_the_removal_is_removed_again() -> None:
    """Ray's job monitor can write a job's record again (FAILED, supervisor died) when the
    removal came before it noticed the job's supervisor exit: rayJobsRemoved stays true only
    because the operator looks again and removes it again."""
    world = World(ray_job_retention=1)
    key = world.cluster.create("t", spec())
    world.tick()
    sid = world.sid(key)
    world.ray.finish(sid)
    world.ray.rewritten_after_delete.add(sid)
    world.tick(0.2)
    world.tick(1.5)
    assert world.ray.deleted == [sid] and sid in world.ray.jobs  # back, as Ray's monitor wrote it
    assert world.cluster.status(key)["rayJobsRemoved"] is True
    world.tick(6)
    assert world.ray.deleted == [sid, sid] and sid not in world.ray.jobs
    world.tick(6)
    world.tick(6)
    assert world.ray.count("delete") == 2 and world.ray.count("status") >= 1
    world.close()


def test_a_job_ray_writes_back_late_is_removed_again_though_a_first_look_found_it_gone() -> None:
    """On a loaded machine Ray's monitor may write the record back after the first look
    found it gone: the removal keeps looking until its checks run out."""
    world = World(ray_job_retention=1)
    key = world.cluster.create("t", spec())
    world.tick()
    sid = world.sid(key)
    world.ray.finish(sid)
    world.ray.rewritten_late[sid] = None  # type: ignore[assignment]  # armed: filled at the delete
    world.tick(0.2)
    world.tick(1.5)
    assert world.ray.deleted == [sid] and sid not in world.ray.jobs
    world.tick(6)  # the first look: gone (and Ray's monitor writes it just after)
    assert sid in world.ray.jobs
    world.tick(6)  # the second look finds it back and removes it again
    assert world.ray.deleted == [sid, sid] and sid not in world.ray.jobs
    assert world.cluster.status(key)["rayJobsRemoved"] is True
    world.close()


# --------------------------------------------------------------------------- scheduling (issue 14)

def test_admission_counts_gpus_per_node_and_what_others_hold() -> None:
    world = World(gpus=4)
    world.ray.add_worker("w2", 2)
    world.ray.use_gpus("w1", 2)  # a job outside Argus holds 2 of w1's 4 GPUs
    four = world.cluster.create("four", spec(gpus=4))
    two = world.cluster.create("two", spec(gpus=2, priority=-1))
    world.tick()
    status = world.cluster.status(four)
    assert (status["phase"], status["reason"]) == ("Queued", "Queued")
    assert status["message"] == ("waiting for 1 worker node(s) with 4 free GPUs each; "
                                 "the nodes closest to holding it are kept for it as they drain")
    assert world.phase(two) == "Submitted"  # w1 is kept for the 4-GPU task; the 2-GPU one runs on w2
    world.ray.use_gpus("w1", -2)  # the outside job ended
    world.tick(2.1)
    assert world.phase(four) == "Submitted"
    world.close()


def test_an_admitted_tasks_gpus_are_held_until_ray_shows_them_and_then_counted_once() -> None:
    world = World(gpus=16, max_running=3)
    first = world.cluster.create("first", spec(gpus=8))
    second = world.cluster.create("second", spec(gpus=8))
    third = world.cluster.create("third", spec(gpus=4))
    world.tick()
    assert [world.phase(k) for k in (first, second, third)] == ["Submitted", "Submitted", "Queued"]  # 8 + 8 claimed of 16
    world.ray.run(world.sid(first))
    world.tick(0.2)
    world.ray.groups = [PlacementGroup(creator_job_id=f"job-{world.sid(first)}", gpus=8)]  # first's verl workers hold 8 in Ray
    world.ray.use_gpus("w1", 8)
    world.tick(2.1)
    assert world.phase(third) == "Queued"  # 8 used (first, seen by Ray) + 8 claimed (second, not yet): no room
    world.ray.finish(world.sid(second))
    world.tick(0.5)
    world.tick(0.1)
    assert world.phase(third) == "Submitted"  # first counted once: 16 - 8 = 8 free
    world.close()


def test_gpus_ray_placed_count_on_their_node_before_its_usage_report_shows_them() -> None:
    """Ray's usage report (the dashboard's cluster status) lags a placement group's creation by
    seconds; the group's bundles, with their nodes, count at once: no second task is admitted
    onto GPUs a run already holds."""
    world = World(gpus=2)
    first = world.cluster.create("first", spec(gpus=2))
    world.tick()
    world.ray.run(world.sid(first))
    world.tick(0.2)
    world.ray.groups = [PlacementGroup(creator_job_id=f"job-{world.sid(first)}", gpus=2, nodes=(("w1", 2.0),))]  # usage says 0 still
    world.tick(2.1)
    second = world.cluster.create("second", spec(gpus=2))
    world.tick(2.1)
    assert world.phase(second) == "Queued" and world.free_gpus() == [0.0]
    world.ray.use_gpus("w1", 2)  # the report catches up: still counted once
    world.tick(2.1)
    assert world.phase(second) == "Queued" and world.free_gpus() == [0.0]
    world.close()


TORCHRUN = ("torchrun --standalone --nnodes=1 --nproc_per_node={g} -m verl.trainer.fsdp_sft_trainer "
            "data.train_files=$HOME/datasets/a.parquet data.val_files=$HOME/datasets/b.parquet")


def torchrun_spec(gpus: int = 1) -> dict[str, Any]:
    return {"kind": "advanced", "workload": "sft", "nnodes": 1, "nGpusPerNode": gpus, "command": TORCHRUN.format(g=gpus)}


def test_a_torchrun_drivers_gpus_are_claimed_on_the_node_ray_put_it_on() -> None:
    """The driver reserves its GPUs through the entrypoint; once Ray placed it, the queue's
    claim is on that node (not where best fit would have put it), and it is not counted a
    second time once Ray's report shows it."""
    world = World(gpus=4)
    world.ray.add_worker("w2", 2)
    sft = world.cluster.create("sft", torchrun_spec(gpus=2))
    world.tick()
    assert world.phase(sft) == "Submitted"
    assert world.ray.jobs[world.sid(sft)].plan.entrypoint_num_gpus == 2
    world.ray.run(world.sid(sft), driver="w1")  # Ray chose the 4-GPU node (best fit would have said w2)
    world.tick(0.2)
    big = world.cluster.create("big", spec(gpus=4))
    world.tick(2.1)
    big_status = world.cluster.status(big)
    # w1 has 2 free, w2 has 2: no node with 4 (a claim of the queue's own choosing, on w2, would have admitted big onto w1)
    assert (big_status["phase"], big_status["reason"]) == ("Queued", "Queued")
    assert world.free_gpus() == [2.0, 2.0]
    world.ray.use_gpus("w1", 2)  # Ray's report catches up: the driver's 2 GPUs counted once, not twice
    world.tick(2.1)
    assert world.free_gpus() == [2.0, 2.0]
    world.ray.finish(world.sid(sft))
    world.ray.use_gpus("w1", -2)
    world.tick(0.5)
    world.tick(2.1)
    assert world.phase(big) == "Submitted"
    world.close()


def test_two_one_gpu_torchrun_tasks_on_a_one_gpu_worker_run_one_after_the_other() -> None:
    world = World(gpus=1)
    first = world.cluster.create("first", torchrun_spec())
    world.tick()
    second = world.cluster.create("second", torchrun_spec())
    world.tick(0.1)
    world.ray.run(world.sid(first))
    for _ in range(3):  # Ray's report never shows the driver's GPU here: the claim on w1 holds it
        world.tick(2.1)
        assert (world.phase(first), world.phase(second)) == ("Running", "Queued")
    world.ray.finish(world.sid(first))
    world.tick(0.5)
    world.tick(0.1)
    assert world.phase(second) == "Submitted"
    world.close()


def test_a_user_over_quota_waits_and_others_go_on() -> None:
    world = World(gpus=8)
    world.cluster.onboard("team-b", "bob")
    world.cluster.quotas[NS] = 2
    a1 = world.cluster.create("a1", spec(gpus=2))
    a2 = world.cluster.create("a2", spec(gpus=2))
    b1 = world.cluster.create("b1", spec(gpus=2), namespace="team-b")
    world.tick()
    world.tick(0.1)
    assert world.phase(a1) == "Submitted" and world.phase(b1) == "Submitted"
    status = world.cluster.status(a2)
    assert (status["phase"], status["reason"]) == ("Queued", "QuotaExceeded")
    assert status["message"] == "waiting: its 2 GPUs would take user alice over the 2 GPUs of its quota"
    world.ray.finish(world.sid(a1))
    world.tick(0.5)
    world.tick(0.1)
    assert world.phase(a2) == "Submitted"
    world.close()


# --------------------------------------------------------------------------- scale (issue 26)

def test_ended_tasks_are_passed_by_until_they_change_or_their_timer_runs_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tick's work follows the tasks that live: an ended task is looked at once, then passed
    by (controller/idle.py) until the watch brings a change or its TTL runs out."""
    from argus.core import lifecycle
    world = World(max_running=2)
    ended = [world.cluster.create(f"done{i}", spec(cancel=True)) for i in range(30)]
    timed = world.cluster.create("timed", spec(ttlSecondsAfterFinished=600))
    world.settle(ticks=2, every=0.5)
    world.ray.finish(world.sid(timed))
    world.settle(ticks=3, every=0.5)
    assert {world.phase(k) for k in ended} == {"Stopped"} and world.phase(timed) == "Succeeded"
    assert len(world.control_loop.idle_tasks) == 31

    looked_at: list[str] = []
    real = lifecycle.needs_ray

    def counting(task: lifecycle.TaskState) -> bool:
        looked_at.append(task.name)
        return real(task)
    monkeypatch.setattr(lifecycle, "needs_ray", counting)
    world.settle(ticks=5, every=2.0)
    assert looked_at == []  # nothing changed: not one of them was looked at

    world.cluster.update_spec(ended[0], priority=5)  # a change: looked at again, in one tick
    world.tick(0.5)
    assert looked_at and set(looked_at) == {"done0"}
    seen = len(looked_at)
    world.settle(ticks=3, every=0.5)
    assert len(looked_at) == seen
    looked_at.clear()
    # the next timer among the settled tasks sets the loop's wait, and its TTL is kept
    assert world.control_loop.next_wait() == pytest.approx(2.0)
    world.tick(600)
    world.tick(0.2)
    assert timed not in world.cluster.objects and "timed" in looked_at
    assert len(world.control_loop.idle_tasks) == 30


def test_a_long_queue_is_not_stepped_again_while_nothing_about_it_changes() -> None:
    """The queue pass tells a waiting task why it waits once per change of its view or of the
    answer; an unchanged queue costs a lookup per task, not a lifecycle step and a status diff."""
    from argus.core.lifecycle import Waiting
    world = World(max_running=1)
    keys = [world.cluster.create(f"t{i}", spec()) for i in range(40)]
    world.settle(ticks=3, every=0.5)
    told: list[str] = []
    step = world.control_loop.task_reconciler.step

    def counting(view: Any, seen: Any) -> Any:
        if isinstance(seen, Waiting):
            told.append(view.name)
        return step(view, seen)
    world.control_loop.task_reconciler.step = counting  # type: ignore[method-assign]
    world.settle(ticks=5, every=2.0)
    assert told == []
    world.ray.finish(world.sid(keys[0]))  # the head starts; the new head's message changes
    world.settle(ticks=3, every=0.5)
    assert world.phase(keys[1]) == "Submitted"
    assert set(told) == {"t2"}, told


def test_a_first_start_over_many_new_tasks_validates_a_batch_per_tick() -> None:
    """Tasks created while no operator ran: validated INTAKE_PER_TICK a tick, highest priority
    and oldest first; the loop comes back at once for the rest, which hold their places."""
    from argus.controller.intake import INTAKE_PER_TICK
    world = World(max_running=1)
    keys = [world.cluster.create(f"t{i:03d}", spec()) for i in range(INTAKE_PER_TICK + 50)]
    urgent = world.cluster.create("urgent", spec(priority=5))
    world.clock.advance(600)  # long before the operator starts: no place is held for their age
    world.tick()
    phased = [k for k in [*keys, urgent] if world.phase(k)]
    assert len(phased) == INTAKE_PER_TICK
    assert world.phase(urgent) == "Submitted"  # the highest priority went first, and runs
    assert phased[:-1] == keys[:INTAKE_PER_TICK - 1]  # then the oldest
    assert world.control_loop.next_wait() == pytest.approx(0.05)
    held = world.control_loop.intake.not_ready(world.control_loop.views(), {}, world.clock.now())
    assert {v.key for v in held} == set(keys[INTAKE_PER_TICK - 1:])
    world.tick(0.05)
    world.tick(0.05)
    assert all(world.phase(k) == "Queued" for k in keys)
    assert world.control_loop.next_wait() > 0.05


def test_a_batchs_writes_go_on_while_the_next_tick_validates_the_next_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A first start's backlog: the API server writes one batch while the operator validates
    the next. That tick leaves the batch being written out of its intake (no task validated
    or written twice) and waits for its writes before the queue, which keeps its order."""
    from argus.controller.intake import INTAKE_PER_TICK
    world = World(max_running=1)
    keys = [world.cluster.create(f"t{i:04d}", spec()) for i in range(INTAKE_PER_TICK + 50)]
    world.clock.advance(600)
    seen: list[tuple[str, tuple[str, str]]] = []
    patch_status, checked = world.cluster.patch_status, world.control_loop.intake._checked

    async def patching(namespace: str, name: str, patch: dict[str, Any]) -> bool:
        await asyncio.sleep(0)  # an answer takes a moment: the loop runs meanwhile, as with the API server
        seen.append(("patch", (namespace, name)))
        return await patch_status(namespace, name, patch)

    def checking(view: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(("validate", view.key))
        return checked(view, *args, **kwargs)
    monkeypatch.setattr(world.cluster, "patch_status", patching)
    monkeypatch.setattr(world.control_loop.intake, "_checked", checking)
    world.loop.run_until_complete(world.control_loop.tick())  # the first batch; its writes go on
    assert len([k for k in keys if world.phase(k)]) < INTAKE_PER_TICK  # the tick did not wait for them
    world.loop.run_until_complete(world.control_loop.tick())  # the rest, validated while they go on
    world.loop.run_until_complete(world.control_loop.idle())
    first, rest = set(keys[:INTAKE_PER_TICK]), set(keys[INTAKE_PER_TICK:])
    last_first_patch = max(i for i, (what, k) in enumerate(seen) if what == "patch" and k in first)
    first_rest_validation = min(i for i, (what, k) in enumerate(seen) if what == "validate" and k in rest)
    assert first_rest_validation < last_first_patch  # they overlapped
    assert sorted(k for what, k in seen if what == "validate") == sorted(keys)  # each validated once
    assert sorted(k for what, k in seen if what == "patch") == sorted(keys)  # and written once
    assert world.phase(keys[0]) == "Submitted"  # the oldest, from the first batch, runs
    assert all(world.phase(k) == "Queued" for k in keys[1:])
    assert not world.control_loop.intake.deferred and world.control_loop.next_wait() > 0.05


# A write that never started is closed, not left unawaited (Python warns when it is collected).
@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_a_loop_that_stops_cancels_its_batchs_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopping (a shutdown, a lost lease) while a batch's first statuses are being written:
    the writes not done are cancelled, not left to race the next leader, for whom those tasks
    are still new."""
    from argus.controller.intake import INTAKE_PER_TICK
    world = World(max_running=0)  # nothing admitted: no other write waits on the API server
    keys = [world.cluster.create(f"t{i:04d}", spec()) for i in range(INTAKE_PER_TICK + 5)]
    world.clock.advance(600)

    async def unanswered(namespace: str, name: str, patch: dict[str, Any]) -> bool:
        await asyncio.sleep(3600)  # the API server has not answered yet
        return True
    monkeypatch.setattr(world.cluster, "patch_status", unanswered)
    batch = world.control_loop.batch_writes
    started: list[asyncio.Future[None]] = []
    start = batch.start

    def recording(writes: Any, keys: frozenset[tuple[str, str]]) -> None:
        start(writes, keys)
        assert batch._writes is not None
        started.append(batch._writes)
    monkeypatch.setattr(batch, "start", recording)

    async def run_then_stop() -> asyncio.Future[None]:
        running = asyncio.ensure_future(world.control_loop.run())
        # Until the first tick left its batch's writes going: it validates 1,000 tasks first,
        # seconds on a loaded machine (a real-time wait: the loop runs in real time here).
        deadline = asyncio.get_running_loop().time() + 300
        while not started and not running.done() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        assert len(started) == 1, "the first tick did not start its batch's writes"
        writes = started[0]
        await asyncio.sleep(0.05)
        assert not writes.done()
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        await asyncio.sleep(0)
        return writes
    writes = world.loop.run_until_complete(run_then_stop())
    assert writes.cancelled()
    assert not any(world.phase(k) for k in keys)  # still new for the next leader


def test_new_tasks_are_validated_for_at_most_intake_seconds_a_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tick stops validating when INTAKE_SECONDS are up: the rest stay new, hold their
    places and are taken next tick (the loop comes back at once), in the same order."""
    from argus.controller import intake
    world = World(max_running=1)
    keys = [world.cluster.create(f"t{i:02d}", spec()) for i in range(10)]
    urgent = world.cluster.create("urgent", spec(priority=5))  # the newest, and the first validated
    world.clock.advance(600)
    # Each look at the intake's clock is a third of the budget later: three validations fit.
    ticking = iter(range(10_000))
    monkeypatch.setattr(world.control_loop.intake, "monotonic", lambda: next(ticking) * intake.INTAKE_SECONDS / 3)
    world.tick()
    assert world.phase(urgent)
    phased = [k for k in keys if world.phase(k)]
    assert phased == keys[:len(phased)] and 1 <= len(phased) < len(keys), phased
    assert world.control_loop.intake.deferred == set(keys[len(phased):])
    assert world.control_loop.next_wait() == pytest.approx(0.05)
    held = world.control_loop.intake.not_ready(world.control_loop.views(), {}, world.clock.now())
    assert {v.key for v in held} == set(keys[len(phased):])
    for _ in range(10):
        world.tick(0.05)
    assert all(world.phase(k) for k in keys)
    assert not world.control_loop.intake.deferred


def test_the_tick_age_runs_while_a_tick_waits_and_is_zero_between_ticks(world: World) -> None:
    """What the liveness probe reads (host/health.py): a tick that waits on something that
    never ends shows an age that grows with the clock; between ticks the age is 0."""
    release = asyncio.Event()
    entered = asyncio.Event()

    async def stuck_tick() -> None:
        entered.set()
        await release.wait()

    control_loop = world.control_loop
    control_loop.tick = stuck_tick  # type: ignore[method-assign]
    assert control_loop.tick_age() == 0.0

    async def scenario() -> tuple[float, float]:
        loop_task = asyncio.create_task(control_loop.run())
        await entered.wait()
        world.clock.advance(400)
        during = control_loop.tick_age()
        release.set()
        await asyncio.sleep(0.01)
        after = control_loop.tick_age()
        loop_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop_task
        return during, after

    assert world.loop.run_until_complete(scenario()) == (400.0, 0.0)


def test_failures_alike_are_said_once_with_how_many_tasks_they_hit(world: World, caplog: pytest.LogCaptureFixture) -> None:
    """The API server down fails every task's write the same way: one line (one traceback) per
    kind of failure with its count, not one per task per tick; each failure is still counted."""
    from argus.core.store import StoreError

    async def down() -> None:
        raise ConnectionRefusedError("[Errno 111] Connection refused")

    async def conflict() -> None:
        raise StoreError(409, "Conflict")

    with caplog.at_level(logging.WARNING, logger="argus"):
        world.loop.run_until_complete(world.control_loop.task_reconciler.each([*(down() for _ in range(5)), conflict(), conflict()]))
    lines = [(r.levelno, r.getMessage(), r.exc_info is not None) for r in caplog.records]
    assert lines == [(logging.ERROR, "reconciling a task failed (5 tasks); trying again next tick", True),
                     (logging.WARNING, "Kubernetes API error, trying again next tick (2 tasks): 409 Conflict: 409 Conflict", False)]
    assert world.control_loop.metrics.registry.get_sample_value("argus_reconcile_errors_total") == 7


@pytest.mark.parametrize("turns", [1, 2, 3])
def test_a_stop_closes_every_write_that_had_not_started(world: World, turns: int) -> None:
    """A stop (the tick cancelled) while ``each`` holds writes: those that never started are
    closed, wherever the cancel lands (before gather's tasks ran, or while they wait for the
    gate); none is left to warn "never awaited" when it is collected."""
    from argus.controller.reconcile import WRITES_IN_FLIGHT

    async def write() -> None:
        await asyncio.sleep(3600)  # the API server has not answered yet

    writes = [write() for _ in range(WRITES_IN_FLIGHT + 3)]

    async def scenario() -> None:
        each = asyncio.ensure_future(world.control_loop.task_reconciler.each(writes))
        for _ in range(turns):
            await asyncio.sleep(0)
        each.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await each

    world.loop.run_until_complete(scenario())
    states = {inspect.getcoroutinestate(w) for w in writes}
    assert states == {inspect.CORO_CLOSED}, states
