"""The queue's admission decision (``core.queue``, pure): order, slots, per-node fit,
Unschedulable, quotas, fair share, the not-yet-validated; every expectation written out."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from argus.core.queue import (
    Capacity,
    Claim,
    QueuedTask,
    QueueSettings,
    UsageRecord,
    WorkerNode,
    decayed_usage,
    decide,
    free_per_node,
    positions,
)

pytestmark = pytest.mark.unit

NOW = dt.datetime(2026, 12, 3, 12, 0, 0, tzinfo=dt.UTC)
FIFO = QueueSettings(max_running=10)


def t(name: str, priority: int = 0, created: str = "2026-12-03T11:00:00Z", per_node: int = 1, nnodes: int = 1,
      user: str = "alice", ns: str = "a") -> QueuedTask:
    return QueuedTask(ns, name, priority, created, per_node, nnodes, user)


def nodes(*gpus: float, used: tuple[float, ...] = ()) -> Capacity:
    return Capacity(tuple(WorkerNode(f"w{i}", g, used[i] if i < len(used) else 0.0) for i, g in enumerate(gpus)))


def names(tasks: list[QueuedTask]) -> list[str]:
    return [x.name for x in tasks]


def test_priority_then_creation_then_name() -> None:
    queued = [t("late", 0, "2026-12-03T11:00:02Z"), t("high", 5, "2026-12-03T11:00:03Z"), t("early", 0, "2026-12-03T11:00:01Z"),
              t("b-same", 0, "2026-12-03T11:00:01Z", ns="b")]
    d = decide(queued, running=0, capacity=nodes(100), settings=FIFO, now=NOW)
    assert names(d.admit) == ["high", "early", "b-same", "late"]


def test_slots_limit_admission_and_positions_follow_order() -> None:
    queued = [t(f"t{i}", created=f"2026-12-03T11:00:0{i}Z") for i in range(5)]
    d = decide(queued, running=2, capacity=nodes(8), settings=QueueSettings(max_running=3), now=NOW)
    assert names(d.admit) == ["t0"]
    assert d.positions == {("a", "t1"): 1, ("a", "t2"): 2, ("a", "t3"): 3, ("a", "t4"): 4}
    assert d.waiting[("a", "t1")] == ("Queued", "waiting for a free slot (3 tasks may run at once)")
    assert d.waiting[("a", "t2")] == ("Queued", "waiting behind tasks ahead in the queue")


def test_a_task_needs_its_gpus_on_distinct_nodes_not_just_in_total() -> None:
    """8 GPUs free in total over two 4-GPU nodes do not hold one 8-GPU bundle."""
    d = decide([t("big", per_node=8)], running=0, capacity=nodes(4, 4), settings=FIFO, now=NOW)
    assert d.admit == []
    assert d.waiting[("a", "big")] == ("Unschedulable", "needs 1 worker node(s) with 8 GPUs each, but the largest worker node has 4 GPUs "
                                                        "and there are 2 worker node(s); it will run only if the cluster grows")
    two_nodes = decide([t("wide", nnodes=2, per_node=4)], running=0, capacity=nodes(4, 4), settings=FIFO, now=NOW)
    assert names(two_nodes.admit) == ["wide"]
    one_node = decide([t("wide", nnodes=2, per_node=1)], running=0, capacity=nodes(8), settings=FIFO, now=NOW)
    assert one_node.waiting[("a", "wide")][0] == "Unschedulable"
    assert "there is 1 worker node(s)" in one_node.waiting[("a", "wide")][1]


def test_gpus_held_outside_argus_count_as_used_and_the_wait_says_what_for() -> None:
    capacity = nodes(4, 2, used=(2, 0))  # a job outside Argus holds 2 GPUs of the first node
    d = decide([t("four", per_node=4, created="2026-12-03T11:00:00Z"), t("two", per_node=2, created="2026-12-03T11:00:01Z")],
               running=0, capacity=capacity, settings=FIFO, now=NOW)
    # four waits: the 4-GPU node is kept for it as it drains; two starts on the other node.
    assert names(d.admit) == ["two"]
    assert d.waiting[("a", "four")] == ("Queued", "waiting for 1 worker node(s) with 4 free GPUs each; "
                                                  "the nodes closest to holding it are kept for it as they drain")
    three = t("three", per_node=2, created="2026-12-03T11:00:02Z")
    d = decide([t("four", per_node=4), three], running=0, capacity=nodes(4, 4, used=(2, 3)), settings=FIFO, now=NOW)
    # the node closest to holding four (2 free) is kept for it; three cannot use it, and the other has 1 free
    assert d.admit == [] and d.waiting[("a", "three")][1].startswith("waiting for 1 worker node(s) with 2 free GPUs each;")


def test_a_claim_on_the_node_ray_chose_stays_there_and_is_never_counted_twice() -> None:
    """A torchrun driver Ray placed on a node: its GPUs are in use there whether or not Ray's
    (lagging) usage report shows them yet; once it does, they are not counted again."""
    two = Capacity((WorkerNode("n1", 4), WorkerNode("n2", 2)))
    # Ray put the driver on the 4-GPU node; best fit would have claimed the 2-GPU one.
    assert free_per_node(two, [Claim(1, 2, node_id="n1")]) == [2, 2]
    assert free_per_node(two, [Claim(1, 2)]) == [4, 0]
    # Ray's report caught up (2 used on n1): still 2 free there, not 0.
    shown = Capacity((WorkerNode("n1", 4, used_gpus=2), WorkerNode("n2", 2)))
    assert free_per_node(shown, [Claim(1, 2, node_id="n1")]) == [2, 2]
    # A job outside Argus holds 3 of n1 as well: Ray's figure is the larger one.
    busy = Capacity((WorkerNode("n1", 4, used_gpus=3), WorkerNode("n2", 2)))
    assert free_per_node(busy, [Claim(1, 2, node_id="n1")]) == [1, 2]
    # Two drivers on n1 (one shown by Ray, one not yet), and a verl claim that floats.
    assert free_per_node(shown, [Claim(1, 2, node_id="n1"), Claim(1, 1, node_id="n1"), Claim(1, 2)]) == [1, 0]
    # A claim on a node that is gone (or no worker) takes nothing.
    assert free_per_node(two, [Claim(1, 2, node_id="gone")]) == [4, 2]


def test_two_one_gpu_torchrun_tasks_on_a_one_gpu_worker_do_not_both_start() -> None:
    one = Capacity((WorkerNode("w", 1),))
    first, second = t("first", created="2026-12-03T11:00:00Z"), t("second", created="2026-12-03T11:00:01Z")
    d = decide([first, second], running=0, capacity=one, settings=FIFO, now=NOW)
    assert names(d.admit) == ["first"]
    # first runs on w; Ray's report does not show it yet: second still waits.
    d = decide([second], running=1, capacity=one, claims=[Claim(1, 1, node_id="w")], settings=FIFO, now=NOW)
    assert d.admit == [] and d.waiting[("a", "second")][0] == "Queued"


def test_what_argus_admitted_but_ray_does_not_show_yet_is_held_back() -> None:
    assert free_per_node(nodes(8, 8), [Claim(1, 8)]) == [0, 8]
    assert free_per_node(nodes(8, 4), [Claim(2, 4)]) == [4, 0]  # best fit: the 4-GPU node takes one bundle
    d = decide([t("x", per_node=8)], running=1, capacity=nodes(8), claims=[Claim(1, 8)], settings=FIFO, now=NOW)
    assert d.admit == []


def test_best_fit_keeps_whole_nodes_free() -> None:
    d = decide([t("one", per_node=1, created="2026-12-03T11:00:00Z"), t("eight", per_node=8, created="2026-12-03T11:00:01Z")],
               running=0, capacity=nodes(8, 2), settings=FIFO, now=NOW)
    assert names(d.admit) == ["one", "eight"]  # one went to the 2-GPU node, so the 8-GPU node stayed whole


def test_unknown_capacity_admits_nothing_but_keeps_positions() -> None:
    d = decide([t("x"), t("y", created="2026-12-03T11:00:01Z")], running=0, capacity=None, settings=FIFO, now=NOW)
    assert d.admit == [] and d.positions == {("a", "x"): 1, ("a", "y"): 2}


def test_a_not_yet_validated_task_keeps_its_turn() -> None:
    queued = [t("first", created="2026-12-03T11:00:00Z"), t("second", created="2026-12-03T11:00:01Z")]
    d = decide(queued, running=0, capacity=nodes(4), settings=FIFO, not_ready=frozenset({("a", "first")}), now=NOW)
    assert d.admit == [] and ("a", "first") not in d.positions and d.positions[("a", "second")] == 1
    behind = decide(queued, running=0, capacity=nodes(4), settings=FIFO, not_ready=frozenset({("a", "second")}), now=NOW)
    assert names(behind.admit) == ["first"]


def test_a_user_over_quota_waits_without_blocking_others() -> None:
    queued = [t("a1", per_node=4, user="alice", created="2026-12-03T11:00:00Z"), t("b1", per_node=2, user="bob", created="2026-12-03T11:00:01Z")]
    d = decide(queued, running=1, capacity=nodes(8, 8), settings=FIFO, quotas={"alice": 6}, in_use={"alice": 4}, now=NOW)
    assert names(d.admit) == ["b1"]
    assert d.waiting[("a", "a1")] == ("QuotaExceeded", "waiting: its 4 GPUs would take user alice over the 6 GPUs of its quota")
    assert d.positions[("a", "a1")] == 1


def test_quota_counts_what_this_pass_admits_and_the_default_applies() -> None:
    queued = [t(f"t{i}", per_node=2, user="carol", created=f"2026-12-03T11:00:0{i}Z") for i in range(3)]
    d = decide(queued, running=0, capacity=nodes(8, 8), settings=QueueSettings(max_running=10, default_quota=4), now=NOW)
    assert names(d.admit) == ["t0", "t1"] and d.waiting[("a", "t2")][0] == "QuotaExceeded"
    unlimited = decide(queued, running=0, capacity=nodes(8, 8), settings=QueueSettings(max_running=10, default_quota=4),
                       quotas={"carol": None}, now=NOW)
    assert names(unlimited.admit) == ["t0", "t1", "t2"]


def test_fair_share_puts_the_lighter_user_first_within_a_priority() -> None:
    heavy = [t(f"h{i}", user="heavy", created=f"2026-12-03T11:00:0{i}Z") for i in range(3)]
    light = [t("l0", user="light", created="2026-12-03T11:30:00Z")]
    settings = QueueSettings(max_running=2, policy="fair")
    d = decide(heavy + light, running=0, capacity=nodes(8), settings=settings, usage={"heavy": 3600.0, "light": 0.0}, now=NOW)
    assert names(d.admit) == ["l0", "h0"]
    fifo = decide(heavy + light, running=0, capacity=nodes(8), settings=QueueSettings(max_running=2), now=NOW)
    assert names(fifo.admit) == ["h0", "h1"]
    urgent = t("urgent", priority=1, user="heavy", created="2026-12-03T11:59:00Z")
    assert names(decide(heavy + light + [urgent], running=0, capacity=nodes(8), settings=settings,
                        usage={"heavy": 3600.0}, now=NOW).admit) == ["urgent", "l0"]  # priority still first


def test_fair_share_never_starves_a_long_waiting_task() -> None:
    settings = QueueSettings(max_running=1, policy="fair", max_wait=3600)
    old = t("old", user="heavy", created="2026-12-03T10:30:00Z")  # waited 90 min
    new = t("new", user="light", created="2026-12-03T11:59:00Z")
    assert names(decide([old, new], running=0, capacity=nodes(8), settings=settings, usage={"heavy": 1e9}, now=NOW).admit) == ["old"]
    young = t("young", user="heavy", created="2026-12-03T11:30:00Z")  # 30 min: fairness decides
    assert names(decide([young, new], running=0, capacity=nodes(8), settings=settings, usage={"heavy": 1e9}, now=NOW).admit) == ["new"]


def test_decayed_usage_halves_every_half_life() -> None:
    hour = dt.timedelta(hours=1)
    recent = UsageRecord("a", 2, NOW - hour, NOW)          # 2 GPUs for the last hour
    older = UsageRecord("b", 2, NOW - 2 * hour, NOW - hour)  # the same, an hour earlier
    running = UsageRecord("c", 1, NOW - hour)                # still running
    u = decayed_usage([recent, older, running], NOW, half_life=3600)
    # integral of 2 * 2^(-t/3600) over the last hour: 2 * 3600 / ln 2 * (1 - 1/2)
    assert u["a"] == pytest.approx(2 * 3600 / 0.6931471805599453 * 0.5)
    assert u["b"] == pytest.approx(u["a"] / 2)
    assert u["c"] == pytest.approx(u["a"] / 2)


def test_a_big_task_is_not_starved_by_small_ones() -> None:
    """Small tasks keep arriving while the 8-GPU task waits: none starts on the node kept for
    it, so that node only drains, and the big task runs as soon as it is empty."""
    capacity = nodes(8, 8, used=(2, 8))
    queue = [t("big", per_node=8, created="2026-12-03T11:00:00Z")] + [t(f"s{i}", per_node=1, created=f"2026-12-03T11:0{i}:00Z") for i in range(1, 6)]
    d = decide(queue, running=2, capacity=capacity, settings=FIFO, now=NOW)
    assert d.admit == []  # node 0 (6 free) is kept for big; node 1 is full
    drained = decide(queue, running=1, capacity=nodes(8, 8, used=(0, 8)), settings=FIFO, now=NOW)
    assert names(drained.admit) == ["big"]


# --------------------------------------------------------------------------- places on demand (issue 26)


@hsettings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 9), st.sampled_from(["alice", "bob", "carol"]), st.sampled_from(["a", "b"])),
                min_size=0, max_size=12, unique_by=lambda x: (x[3], x[1], x[0])),
       st.sampled_from(["fifo", "fair"]))
def test_places_served_on_demand_are_the_places_the_admission_pass_gives(rows: list[tuple[int, int, str, str]], policy: str) -> None:
    """What the queue view serves (``positions``, from the tasks alone) is what ``decide``
    gives the tasks it leaves waiting when nothing can start (Ray unread: every task waits)."""
    queued = [t(f"t{i}-{p}", priority=p, created=f"2026-12-03T11:00:0{i}Z", user=user, ns=ns) for p, i, user, ns in rows]
    settings = QueueSettings(max_running=10, policy=policy)  # type: ignore[arg-type]
    usage = {"alice": 50.0, "bob": 5.0}
    d = decide(queued, running=0, capacity=None, settings=settings, usage=usage, now=NOW)
    assert positions(queued, settings, usage, NOW) == d.positions


def test_places_on_demand_exclude_nothing_and_start_at_one() -> None:
    queued = [t("low", 0, "2026-12-03T11:00:01Z"), t("high", 5, "2026-12-03T11:00:02Z")]
    assert positions(queued, FIFO, {}, NOW) == {("a", "high"): 1, ("a", "low"): 2}
    assert positions([], FIFO, {}, NOW) == {}
