"""The queue's decision across several Ray clusters (``core.queue.decide`` with ``rooms``):
one order for all, each admitted task on the most preferred cluster that can hold it now,
the clusters a task may use, per-cluster caps and outages, quotas counted across clusters.
Every expectation written out."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from argus.core.queue import Capacity, Claim, QueuedTask, QueueSettings, Room, WorkerNode, decide
from argus.core.vocabulary import Reason

pytestmark = pytest.mark.unit

NOW = dt.datetime(2026, 12, 5, 12, 0, 0, tzinfo=dt.UTC)
FIFO = QueueSettings(max_running=10)


def t(name: str, per_node: int = 1, nnodes: int = 1, *, user: str = "alice", clusters: tuple[str, ...] | None = None,
      created: str = "2026-12-05T11:00:00Z", priority: int = 0) -> QueuedTask:
    return QueuedTask("ns", name, priority, created, per_node, nnodes, user, clusters)


def gpus(*per_node: float, used: tuple[float, ...] = ()) -> Capacity:
    return Capacity(tuple(WorkerNode(f"w{i}", g, used[i] if i < len(used) else 0.0) for i, g in enumerate(per_node)))


def test_a_task_goes_to_the_most_preferred_cluster_that_holds_it_and_spills_to_the_next() -> None:
    rooms = [Room("a", gpus(2)), Room("b", gpus(4))]
    d = decide([t("one", 2), t("two", 2), t("three", 2)], running=0, settings=FIFO, now=NOW, rooms=rooms)
    assert d.placed == {("ns", "one"): "a", ("ns", "two"): "b", ("ns", "three"): "b"}
    assert d.waiting == {}


def test_a_task_limited_to_one_cluster_is_never_placed_on_another() -> None:
    rooms = [Room("a", gpus(1)), Room("b", gpus(8))]
    d = decide([t("first", clusters=("a",)), t("second", clusters=("a",))], running=0, settings=FIFO, now=NOW, rooms=rooms)
    assert d.placed == {("ns", "first"): "a"}
    assert d.waiting[("ns", "second")] == (Reason.Queued, "waiting for 1 worker node(s) with 1 free GPUs each on cluster a; "
                                                          "the nodes closest to holding it are kept for it as they drain")


def test_a_reserved_cluster_does_not_stop_tasks_behind_from_another_cluster() -> None:
    rooms = [Room("a", gpus(4, used=(2,))), Room("b", gpus(1))]
    d = decide([t("big", 4, clusters=("a",)), t("small")], running=0, settings=FIFO, now=NOW, rooms=rooms)
    # a's only node is kept for big as it drains; small goes to b.
    assert d.placed == {("ns", "small"): "b"}
    assert d.waiting[("ns", "big")][0] == Reason.Queued


def test_an_unreadable_cluster_holds_only_the_tasks_that_need_it() -> None:
    rooms = [Room("down", None), Room("up", gpus(1))]
    d = decide([t("pinned", clusters=("down",)), t("free")], running=0, settings=FIFO, now=NOW, rooms=rooms)
    assert d.placed == {("ns", "free"): "up"}
    assert d.unreadable == {("ns", "pinned"): "down"}
    assert d.waiting[("ns", "pinned")] == (Reason.Queued, "waiting for its Ray cluster to answer")


def test_a_task_that_fits_only_an_unreadable_cluster_waits_for_it_not_unschedulable() -> None:
    rooms = [Room("small", gpus(1)), Room("big", None)]
    d = decide([t("wide", 8)], running=0, settings=FIFO, now=NOW, rooms=rooms)
    assert d.unreadable == {("ns", "wide"): "big"} and d.waiting[("ns", "wide")][0] == Reason.Queued


def test_unschedulable_only_when_no_cluster_it_may_use_could_ever_hold_it() -> None:
    rooms = [Room("a", gpus(2)), Room("b", gpus(4))]
    d = decide([t("huge", 8), t("mid", 4, clusters=("a",))], running=0, settings=FIFO, now=NOW, rooms=rooms)
    reason, message = d.waiting[("ns", "huge")]
    assert reason == Reason.Unschedulable and message.startswith("on none of clusters a, b: needs 1 worker node(s) with 8 GPUs")
    reason, message = d.waiting[("ns", "mid")]
    assert reason == Reason.Unschedulable and message.startswith("on cluster a: needs 1 worker node(s) with 4 GPUs")


def test_no_cluster_it_may_use() -> None:
    rooms = [Room("a", gpus(2)), Room("b", gpus(2), accepting=False)]
    d = decide([t("lost", clusters=()), t("drained", clusters=("b",))], running=0, settings=FIFO, now=NOW, rooms=rooms)
    assert d.admit == []
    assert d.waiting[("ns", "lost")] == (Reason.NoCluster, "waiting: no Ray cluster it may use exists (spec.cluster, and the "
                                                            "ArgusClusters' namespaceSelector)")
    assert d.waiting[("ns", "drained")] == (Reason.NoCluster, "waiting: cluster b takes no new tasks now (drained, or being deleted)")


def test_a_drained_cluster_takes_nothing_new_and_the_next_one_does() -> None:
    rooms = [Room("a", gpus(8), accepting=False), Room("b", gpus(8))]
    d = decide([t("x")], running=0, settings=FIFO, now=NOW, rooms=rooms)
    assert d.placed == {("ns", "x"): "b"}


def test_a_clusters_own_cap_sends_tasks_to_the_next_and_blocks_nobody() -> None:
    rooms = [Room("a", gpus(8), running=1, max_running=1), Room("b", gpus(1))]
    d = decide([t("one"), t("two", clusters=("a",)), t("three")], running=1, settings=FIFO, now=NOW, rooms=rooms)
    assert d.placed == {("ns", "one"): "b"}
    assert d.waiting[("ns", "two")] == (Reason.Queued, "waiting for a free slot on cluster a (1 tasks may run there)")
    # three: a is capped, b is full now (one took its GPU): it waits for b's node.
    assert d.waiting[("ns", "three")][0] == Reason.Queued and "on cluster b" in d.waiting[("ns", "three")][1]


def test_the_operators_max_running_caps_all_clusters_together() -> None:
    rooms = [Room("a", gpus(8), running=1), Room("b", gpus(8), running=1)]
    d = decide([t("x"), t("y")], running=2, settings=QueueSettings(max_running=3), now=NOW, rooms=rooms)
    assert list(d.placed) == [("ns", "x")]
    assert d.waiting[("ns", "y")] == (Reason.Queued, "waiting for a free slot (3 tasks may run at once)")


def test_quotas_count_across_clusters() -> None:
    rooms = [Room("a", gpus(4)), Room("b", gpus(4))]
    d = decide([t("x", 4), t("y", 4)], running=1, settings=FIFO, now=NOW, rooms=rooms, quotas={"alice": 6}, in_use={"alice": 2})
    # x takes alice to her 6 GPUs on a; y would take her over, though b has room for it.
    assert d.placed == {("ns", "x"): "a"} and d.waiting[("ns", "y")][0] == Reason.QuotaExceeded


def test_claims_count_on_their_own_cluster_only() -> None:
    rooms = [Room("a", gpus(2), claims=(Claim(1, 2),)), Room("b", gpus(2))]
    d = decide([t("x", 2)], running=1, settings=FIFO, now=NOW, rooms=rooms)
    assert d.placed == {("ns", "x"): "b"}


def test_one_room_is_the_single_cluster_decision() -> None:
    queued = [t("a", 2), t("b", 4), t("c", 1)]
    single = decide(queued, running=1, capacity=gpus(4, 2), claims=[Claim(1, 1)], settings=FIFO, now=NOW)
    rooms = decide(queued, running=1, settings=FIFO, now=NOW, rooms=[Room("", gpus(4, 2), (Claim(1, 1),), 1)])
    assert (single.admit, single.waiting, single.positions) == (rooms.admit, rooms.waiting, rooms.positions)


@hsettings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 2), st.sampled_from([None, ("a",), ("b",), ("a", "b")])), max_size=12),
       st.lists(st.integers(0, 4), min_size=1, max_size=3), st.lists(st.integers(0, 4), min_size=1, max_size=3),
       st.integers(1, 6))
def test_placements_fit_their_cluster_and_respect_the_tasks_clusters(shapes, a_nodes, b_nodes, cap) -> None:
    queued = [t(f"t{i}", per, n, clusters=allowed, created=f"2026-12-05T11:00:{i:02d}Z") for i, (per, n, allowed) in enumerate(shapes)]
    rooms = [Room("a", gpus(*a_nodes), max_running=cap), Room("b", gpus(*b_nodes))]
    d = decide(queued, running=0, settings=FIFO, now=NOW, rooms=rooms)
    assert set(d.placed) == {q.key for q in d.admit}
    assert set(d.waiting) | set(d.placed) == {q.key for q in queued}
    by_key = {q.key: q for q in queued}
    for room, node_gpus in (("a", a_nodes), ("b", b_nodes)):
        here = [by_key[k] for k, c in d.placed.items() if c == room]
        assert all(q.clusters is None or room in q.clusters for q in here)
        assert sum(q.gpus for q in here) <= sum(node_gpus)
        if room == "a":
            assert len(here) <= cap


# --------------------------------------------------------------------------- verl drift

def test_a_cluster_running_another_verl_takes_no_new_task_and_says_which() -> None:
    rooms = [Room("old", gpus(4), verl=("0.6.1",), composes="0.9.1")]
    d = decide([t("one", clusters=("old",)), t("two", clusters=("old",))], running=0, settings=FIFO, now=NOW, rooms=rooms)
    assert d.admit == [] and d.placed == {}
    message = ("waiting: cluster old runs verl 0.6.1 (argus doctor read it in the verl snapshot), but the task is composed for "
               "verl 0.9.1 (a task is composed for the release its cluster runs when Argus has that release's config tree, "
               "one release per cluster); it goes when argus doctor finds one it has there")
    assert d.waiting == {("ns", "one"): (Reason.VerlDrift, message), ("ns", "two"): (Reason.VerlDrift, message)}
    assert d.positions == {("ns", "one"): 1, ("ns", "two"): 2}  # they keep their places


def test_the_version_a_task_was_composed_for_is_the_one_compared() -> None:
    # The cluster's doctor expected 0.9.1 and found it, but this task is composed for 0.6.1.
    rooms = [Room("new", gpus(4), verl=("0.9.1",), composes="0.9.1")]
    task = QueuedTask("ns", "t", 0, "2026-12-05T11:00:00Z", clusters=("new",), verl="0.6.1")
    d = decide([task], running=0, settings=FIFO, now=NOW, rooms=rooms)
    reason, message = d.waiting[task.key]
    assert reason == Reason.VerlDrift and "cluster new runs verl 0.9.1" in message and "composed for verl 0.6.1" in message


def test_a_task_composed_for_one_release_waits_for_its_clusters_and_says_it_skips_the_others() -> None:
    # core.verlchoice composed it for 0.6.1 (cluster old's release): while old is full it does
    # not go to cluster new, which runs 0.9.1 and has room, and its message says so.
    new, old = Room("new", gpus(4), verl=("0.9.1",), composes="0.9.1"), Room("old", gpus(4), (Claim(1, 4),), verl=("0.6.1",))
    task = QueuedTask("ns", "t", 0, "2026-12-05T11:00:00Z", verl="0.6.1")
    d = decide([task], running=0, settings=FIFO, now=NOW, rooms=[new, old])
    reason, message = d.waiting[task.key]
    assert reason == Reason.Queued and message.endswith("; composed for verl 0.6.1, it does not go to cluster new (verl 0.9.1)"), message
    d = decide([task], running=0, settings=FIFO, now=NOW, rooms=[new, Room("old", gpus(4), verl=("0.6.1",))])
    assert d.placed == {task.key: "old"}


def test_a_clean_verdict_releases_the_tasks() -> None:
    rooms = [Room("old", gpus(4), verl=("0.9.1",), composes="0.9.1")]
    d = decide([t("one", clusters=("old",))], running=0, settings=FIFO, now=NOW, rooms=rooms)
    assert d.placed == {("ns", "one"): "old"} and d.waiting == {}


def test_an_unknown_version_does_not_hold_back() -> None:
    # No doctor run has read the snapshot yet (or the doctor is off, --doctor-interval 0): the
    # queue does not guess. Holding every task on a version never read would stop the queue
    # on a cluster that may be fine; the doctor's verdict, once there, decides.
    rooms = [Room("a", gpus(4), composes="0.9.1"), Room("b", gpus(4))]
    d = decide([t("one", clusters=("a",)), t("two", clusters=("b",))], running=0, settings=FIFO, now=NOW, rooms=rooms)
    assert d.placed == {("ns", "one"): "a", ("ns", "two"): "b"}


def test_a_task_goes_to_a_clean_cluster_past_a_drifted_one_and_blocks_nobody() -> None:
    rooms = [Room("old", gpus(4), verl=("0.6.1",), composes="0.9.1"), Room("new", gpus(1), verl=("0.9.1",), composes="0.9.1")]
    d = decide([t("pinned", clusters=("old",)), t("anywhere"), t("behind")], running=0, settings=FIFO, now=NOW, rooms=rooms)
    assert d.placed == {("ns", "anywhere"): "new"}  # old is skipped though it is preferred and has room
    assert d.waiting[("ns", "pinned")][0] == Reason.VerlDrift
    # behind waits for new's GPU, not behind pinned: a task held by drift holds nobody back.
    assert d.waiting[("ns", "behind")][0] == Reason.Queued and "on cluster new" in d.waiting[("ns", "behind")][1]


def test_a_drained_cluster_beside_a_drifted_one_still_names_the_drift() -> None:
    rooms = [Room("old", gpus(4), verl=("0.6.1", "0.9.1"), composes="0.9.1"), Room("off", gpus(4), accepting=False)]
    d = decide([t("one")], running=0, settings=FIFO, now=NOW, rooms=rooms)
    reason, message = d.waiting[("ns", "one")]
    assert reason == Reason.VerlDrift and message.startswith("waiting: cluster old runs verl 0.6.1 (")
