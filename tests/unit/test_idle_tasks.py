"""controller/idle.py: which ended tasks a tick may pass by, and the earliest timer among them."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from argus.controller.idle import IdleTasks
from argus.controller.view import TaskView
from argus.core.lifecycle import LifecycleSettings

pytestmark = pytest.mark.unit

NOW = dt.datetime(2026, 12, 5, 12, 0, tzinfo=dt.UTC)


def view(name: str, phase: str | None, *, finished: dt.datetime | None = None, ttl: int | None = None,
         deleting: bool = False, rv: str = "1") -> TaskView:
    status: dict[str, Any] = {"phase": phase} if phase else {}
    if finished is not None:
        status["finishedAt"] = finished.strftime("%Y-%m-%dT%H:%M:%SZ")
    spec: dict[str, Any] = {"kind": "basic"}
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    return TaskView.from_body({"metadata": {"namespace": "team", "name": name, "uid": name, "resourceVersion": rv,
                                            **({"deletionTimestamp": "2026-12-05T12:00:00Z"} if deleting else {})},
                               "spec": spec, "status": status})


def test_an_ended_task_is_passed_by_while_its_view_is_the_same_object() -> None:
    idle = IdleTasks(LifecycleSettings())
    v = view("a", "Succeeded", finished=NOW)
    idle.note(v, NOW)
    assert idle.passed_by(v, NOW + dt.timedelta(days=365))
    # an equal but new view (the watch brought a change) is looked at again
    assert not idle.passed_by(view("a", "Succeeded", finished=NOW, rv="2"), NOW)


@pytest.mark.parametrize("phase", [None, "Queued", "Submitted", "Running"])
def test_a_task_that_has_not_ended_is_never_settled(phase: str | None) -> None:
    idle = IdleTasks(LifecycleSettings())
    v = view("a", phase)
    idle.note(v, NOW)
    assert not idle.passed_by(v, NOW) and len(idle) == 0


def test_a_task_being_deleted_is_not_settled() -> None:
    idle = IdleTasks(LifecycleSettings())
    v = view("a", "Failed", finished=NOW, deleting=True)
    idle.note(v, NOW)
    assert not idle.passed_by(v, NOW)


def test_a_timer_ends_the_pass_and_the_earliest_one_is_known() -> None:
    idle = IdleTasks(LifecycleSettings(default_ttl_seconds=3600))
    early, late = view("early", "Succeeded", finished=NOW, ttl=60), view("late", "Succeeded", finished=NOW)
    idle.note(early, NOW)
    idle.note(late, NOW)
    assert idle.next_timer(NOW) == NOW + dt.timedelta(seconds=60)
    assert idle.passed_by(early, NOW + dt.timedelta(seconds=59))
    assert not idle.passed_by(early, NOW + dt.timedelta(seconds=60))
    # noted again once due, it is no longer kept; the next timer is the other's
    idle.note(early, NOW + dt.timedelta(seconds=60))
    assert len(idle) == 1 and idle.next_timer(NOW + dt.timedelta(seconds=60)) == NOW + dt.timedelta(seconds=3600)


def test_a_task_gone_from_the_cache_is_forgotten() -> None:
    idle = IdleTasks(LifecycleSettings())
    idle.note(view("a", "Stopped", finished=NOW), NOW)
    idle.note(view("b", "Stopped", finished=NOW), NOW)
    idle.forget({("team", "b")})
    assert len(idle) == 1
