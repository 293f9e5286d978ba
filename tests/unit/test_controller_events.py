"""Which Events a task's first status posts (controller/writer.py, core.vocabulary's
QUIET_FIRST_PHASES), through the real controller over the fakes: none when the status is just
what the spec asked for (queued, created cancelled, created suspended), one when it asks
something of someone (issue 39: a first start over 10,000 tasks had posted 17,000 Events)."""

from __future__ import annotations

import pytest

from test_controller import World, close_worlds, spec  # noqa: F401 - close_worlds: the autouse fixture that closes them

pytestmark = pytest.mark.unit

# Without the Ray address verl may start a Ray of its own: a weak check, not an error.
RAY_ADDRESS = "+ray_kwargs.ray_init.address=auto"


def events(world: World, name: str) -> list[tuple[str, str, str]]:
    world.loop.run_until_complete(world.control_loop.writer.drain())
    return [(e.type, e.reason, e.message) for e in world.cluster.events if e.name == name]


def weak(**fields: object) -> dict[str, object]:
    body = spec(**fields)
    body["command"] = body["command"].replace(RAY_ADDRESS, "")
    return body


def test_a_task_that_waits_in_the_queue_gets_no_event_for_it() -> None:
    world = World(max_running=1)
    world.cluster.create("first", spec())
    key = world.cluster.create("second", spec())
    world.tick()
    assert (world.phase(key), world.cluster.status(key)["reason"]) == ("Queued", "Queued")
    assert events(world, "second") == []  # was: Normal Queued "new -> Queued: ..."


def test_a_queued_task_still_warns_of_its_weak_checks() -> None:
    world = World(max_running=1)
    world.cluster.create("first", spec())
    key = world.cluster.create("second", weak())
    world.tick()
    assert world.phase(key) == "Queued"
    said = events(world, "second")
    assert [(t, r) for t, r, _ in said] == [("Warning", "WeakCheck")], said
    assert said[0][2] in world.cluster.status(key)["warnings"]


def test_a_task_created_cancelled_is_stopped_without_events_but_keeps_its_warnings() -> None:
    world = World()
    key = world.cluster.create("t", weak(cancel=True))
    world.tick()
    status = world.cluster.status(key)
    assert (status["phase"], status["reason"]) == ("Stopped", "Cancelled")
    assert any("ray_init.address" in w for w in status["warnings"])
    assert events(world, "t") == []  # was: Normal Cancelled "new -> Stopped" and a WeakCheck Warning


def test_a_task_created_suspended_gets_no_event() -> None:
    world = World()
    key = world.cluster.create("t", spec(suspend=True))
    world.tick()
    assert world.phase(key) == "Suspended"
    assert events(world, "t") == []


def test_later_phase_changes_keep_their_events() -> None:
    world = World(max_running=1)
    world.cluster.create("first", spec())
    key = world.cluster.create("second", spec())
    world.tick()
    world.cluster.cancel(key)
    world.settle()
    assert world.phase(key) == "Stopped"
    assert [(r, m.split(":")[0]) for _, r, m in events(world, "second")] == [("Cancelled", "Queued -> Stopped")]


def test_a_first_status_that_asks_for_something_keeps_its_event() -> None:
    world = World()
    world.cluster.create("t", spec(command="echo python3 -m verl.trainer.main_ppo"))
    world.tick()
    said = events(world, "t")
    assert [(t, r) for t, r, _ in said] == [("Warning", "InvalidSpec")], said
    assert said[0][2].startswith("new -> Rejected")
