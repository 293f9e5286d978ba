"""Suspending and resuming a task (``spec.suspend``, core/suspension.py), through the real
controller over the fakes (tests/unit/fakes.py): each transition a suspension makes, and
what Ray and the queue see. The integration test is in
tests/integration/test_operator_lifecycle.py."""

from __future__ import annotations

import pytest

from test_controller import World, close_worlds, spec  # noqa: F401 - close_worlds: the autouse fixture that closes them

pytestmark = pytest.mark.unit


def condition(world: World, key: tuple[str, str], type_: str) -> dict[str, str] | None:
    return next((c for c in world.cluster.status(key).get("conditions") or () if c["type"] == type_), None)


def running(world: World, name: str = "t", **extra: object) -> tuple[str, str]:
    key = world.cluster.create(name, spec(**extra))
    world.tick()
    world.ray.run(world.sid(key))
    world.tick(0.2)
    assert world.phase(key) == "Running"
    return key


def test_a_queued_task_suspended_leaves_the_queue_and_the_next_one_runs() -> None:
    world = World(max_running=1)
    world.cluster.create("blocker", spec())
    waiting = world.cluster.create("waiting", spec())
    third = world.cluster.create("third", spec())
    world.tick()
    world.cluster.update_spec(waiting, suspend=True)
    world.tick(0.1)
    status = world.cluster.status(waiting)
    assert (status["phase"], status["reason"]) == ("Suspended", "Suspended")
    assert status["message"].startswith("suspended while queued (spec.suspend); it left the queue")
    suspended = condition(world, waiting, "Suspended")
    assert suspended is not None and suspended["status"] == "True"
    assert condition(world, waiting, "Finished")["status"] == "False"  # type: ignore[index]
    assert "finishedAt" not in status
    world.ray.finish(world.sid(("team", "blocker")))
    world.settle()
    assert world.phase(third) in ("Submitted", "Running")  # the suspended task gave its place up
    assert world.phase(waiting) == "Suspended"
    assert world.ray.count("submit") == 2


def test_suspending_a_running_task_stops_its_job_and_gives_its_gpus_back() -> None:
    world = World(gpus=1)
    key = running(world)
    sid = world.sid(key)
    other = world.cluster.create("other", spec())
    world.tick(0.2)
    assert world.phase(other) == "Queued"  # one GPU, held by t
    world.cluster.update_spec(key, suspend=True)
    world.tick(0.2)
    assert world.ray.jobs[sid].status == "STOPPED"
    world.tick(0.2)
    status = world.cluster.status(key)
    assert (status["phase"], status["reason"]) == ("Suspended", "Suspended")
    assert f"attempt 1's job {sid} was stopped" in status["message"]
    assert [(a["attempt"], a["outcome"]) for a in status["attempts"]] == [(1, "Suspended")]
    assert condition(world, key, "Admitted")["status"] == "False"  # type: ignore[index]
    world.settle()
    assert world.phase(other) in ("Submitted", "Running")  # its GPU went back to the queue
    assert "Suspended" in world.cluster.reasons(key)


def test_resuming_queues_it_again_and_starts_attempt_2_in_the_same_job_folder() -> None:
    world = World()
    key = running(world, restartPolicy="Never")
    first = world.sid(key)
    world.cluster.update_spec(key, suspend=True)
    world.settle()
    assert world.phase(key) == "Suspended"
    world.cluster.update_spec(key, suspend=False)
    world.tick(0.1)
    status = world.cluster.status(key)
    assert status["attempt"] == 2
    assert world.phase(key) in ("Queued", "Submitted")
    world.settle()
    second = world.sid(key)
    assert second != first and world.ray.jobs[second].status == "PENDING"
    assert world.ray.jobs[second].plan.job_dir == world.ray.jobs[first].plan.job_dir  # verl resumes from its checkpoints there
    world.ray.run(second)
    world.settle()
    status = world.cluster.status(key)
    assert (status["phase"], status["attempt"]) == ("Running", 2)
    assert condition(world, key, "Suspended")["status"] == "False"  # type: ignore[index]
    assert "Resumed" in world.cluster.reasons(key)


def test_a_suspension_is_no_restart_against_the_backoff_limit() -> None:
    world = World()
    key = running(world, restartPolicy="OnFailure", backoffLimit=1)
    world.cluster.update_spec(key, suspend=True)
    world.settle()
    world.cluster.update_spec(key, suspend=False)
    world.settle()
    world.ray.run(world.sid(key))
    world.settle()
    world.ray.finish(world.sid(key), "FAILED", "exit 1")
    world.settle(1)
    status = world.cluster.status(key)
    assert (status["phase"], status["attempt"]) == ("Submitted", 3)  # retried at once: attempt 2 was its first restart
    assert "Retrying" in world.cluster.reasons(key) and "BackoffLimitExceeded" not in world.cluster.reasons(key)


def test_cancel_while_suspended_stops_it_for_good() -> None:
    world = World()
    key = running(world)
    world.cluster.update_spec(key, suspend=True)
    world.settle()
    world.cluster.cancel(key)
    world.tick(0.1)
    status = world.cluster.status(key)
    assert (status["phase"], status["reason"], status["message"]) == ("Stopped", "Cancelled", "cancelled while suspended")
    assert condition(world, key, "Finished")["status"] == "True"  # type: ignore[index]
    assert world.ray.count("submit") == 1


def test_delete_while_suspended_removes_its_ray_jobs_and_lets_the_object_go() -> None:
    world = World()
    key = running(world)
    sid = world.sid(key)
    world.cluster.update_spec(key, suspend=True)
    world.settle()
    world.cluster.delete(key)
    world.settle()
    assert key not in world.cluster.objects
    assert sid not in world.ray.jobs and not world.ray.active()


def test_a_task_created_suspended_waits_outside_the_queue_until_resumed() -> None:
    world = World()
    key = world.cluster.create("t", spec(suspend=True))
    world.settle()
    assert world.phase(key) == "Suspended" and world.ray.count("submit") == 0
    world.cluster.update_spec(key, suspend=False)
    world.settle()
    status = world.cluster.status(key)
    assert (status["phase"], status["attempt"]) == ("Submitted", 1)  # nothing ran: still attempt 1
