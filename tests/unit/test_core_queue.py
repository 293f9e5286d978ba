"""The queue's admission decision (pure): order, slots, GPUs, unschedulable, not-ready."""

import pytest

from argus.core.queue import Capacity, QueuedTask, decide

pytestmark = pytest.mark.unit


def t(name, priority=0, created="2026-01-01T00:00:00Z", gpus=1, ns="a"):
    return QueuedTask(ns, name, priority, created, gpus)


def names(tasks):
    return [x.name for x in tasks]


def test_priority_then_creation_then_name():
    queued = [t("late", 0, "2026-01-01T00:00:02Z"), t("high", 5, "2026-01-01T00:00:03Z"), t("early", 0, "2026-01-01T00:00:01Z"),
              t("b-same", 0, "2026-01-01T00:00:01Z", ns="b")]
    d = decide(queued, running=0, reserved_gpus=0, max_running=10, capacity=Capacity(100, 100))
    assert names(d.admit) == ["high", "early", "b-same", "late"]


def test_slots_limit_admission_and_positions_follow_order():
    queued = [t(f"t{i}", created=f"2026-01-01T00:00:0{i}Z") for i in range(5)]
    d = decide(queued, running=2, reserved_gpus=2, max_running=3, capacity=Capacity(8, 8))
    assert names(d.admit) == ["t0"]
    assert d.positions == {("a", "t1"): 1, ("a", "t2"): 2, ("a", "t3"): 3, ("a", "t4"): 4}
    assert "free slot" in d.waiting[("a", "t1")]


def test_gpus_reserved_by_running_tasks_count_against_capacity():
    d = decide([t("big", gpus=4), t("small", gpus=1, created="2026-01-02T00:00:00Z")], running=1, reserved_gpus=2,
               max_running=4, capacity=Capacity(4, 4))
    # big fits the cluster but not now: it waits, and small waits behind it (no backfill).
    assert d.admit == [] and "waiting for 4 free GPUs (2 free)" in d.waiting[("a", "big")]
    assert d.positions[("a", "small")] == 2


def test_a_task_bigger_than_the_cluster_is_skipped_not_blocking():
    d = decide([t("huge", gpus=8), t("small", created="2026-01-02T00:00:00Z")], running=0, reserved_gpus=0,
               max_running=4, capacity=Capacity(4, 4))
    assert names(d.admit) == ["small"]
    assert "needs 8 GPUs" in d.unschedulable[("a", "huge")] and "4 in total" in d.unschedulable[("a", "huge")]
    assert d.positions[("a", "huge")] == 1


def test_unknown_capacity_admits_nothing_but_keeps_positions():
    d = decide([t("x"), t("y", created="2026-01-02T00:00:00Z")], running=0, reserved_gpus=0, max_running=4, capacity=None)
    assert d.admit == [] and d.positions == {("a", "x"): 1, ("a", "y"): 2}


def test_a_not_yet_validated_task_keeps_its_turn():
    queued = [t("first", created="2026-01-01T00:00:00Z"), t("second", created="2026-01-01T00:00:01Z")]
    d = decide(queued, running=0, reserved_gpus=0, max_running=4, capacity=Capacity(4, 4), not_ready=frozenset({("a", "first")}))
    assert d.admit == [] and ("a", "first") not in d.positions and d.positions[("a", "second")] == 1
    behind = decide(queued, running=0, reserved_gpus=0, max_running=4, capacity=Capacity(4, 4), not_ready=frozenset({("a", "second")}))
    assert names(behind.admit) == ["first"]
