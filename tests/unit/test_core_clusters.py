"""The ArgusCluster model (``core.clusters``, pure): parsing an object, the namespace
selector, the placement annotation, and the status a pass writes."""

from __future__ import annotations

import pytest

from argus.core.clusters import (
    ArgusClusterStatus,
    ClusterReport,
    InvalidCluster,
    cluster_status,
    parse_cluster,
    placed_on,
    placement_annotation,
    preference_order,
)

pytestmark = pytest.mark.unit


def obj(name: str = "gpu-a", **spec: object) -> dict:
    return {"metadata": {"name": name, "generation": 3}, "spec": {"address": "http://ray-a:8265/", **spec}}


def test_an_object_parses_into_its_config() -> None:
    c = parse_cluster(obj(maxRunning=2, preference=5, root="/data/a/", drain=True,
                          namespaceSelector={"matchLabels": {"team": "a"}, "matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}))
    assert (c.name, c.address, c.max_running, c.preference, c.root, c.generation) == ("gpu-a", "http://ray-a:8265", 2, 5, "/data/a", 3)
    assert not c.accepting  # drained
    assert c.admits({"team": "a"}) and not c.admits({"team": "a", "x": "1"}) and not c.admits({"team": "b"}) and not c.admits(None)
    assert parse_cluster(obj()).admits(None)  # no selector: every namespace


def test_a_bad_object_is_one_line_naming_the_field() -> None:
    with pytest.raises(InvalidCluster) as err:
        parse_cluster(obj(maxRunning=0))
    assert str(err.value).startswith("ArgusCluster gpu-a: spec.maxRunning: ") and "\n" not in str(err.value)
    with pytest.raises(InvalidCluster, match="spec.address"):
        parse_cluster({"metadata": {"name": "x"}, "spec": {"address": "ray-a:8265"}})


def test_preference_order_is_highest_first_then_by_name() -> None:
    clusters = [parse_cluster(obj("b")), parse_cluster(obj("a")), parse_cluster(obj("c", preference=1))]
    assert [c.name for c in preference_order(clusters)] == ["c", "a", "b"]


def test_the_placement_annotation_binds_its_own_attempt_only() -> None:
    note = {"argus.io/placement": placement_annotation(2, "gpu-a")}
    assert placed_on(note, 2) == "gpu-a"
    assert placed_on(note, 3) is None and placed_on({}, 1) is None
    assert placed_on({"argus.io/placement": "two:gpu-a"}, 2) is None  # not ours: ignored, not an error


def test_status_keeps_the_last_figures_while_ray_cannot_be_read_and_moves_conditions_only_on_change() -> None:
    up = ClusterReport(error=None, error_reason="RayUnreachable", version="2.60.0", worker_nodes=2, gpus=8, free_gpus=3.5, running=2, queued=1)
    first = cluster_status(ArgusClusterStatus(), up, address="http://a", now="2026-12-05T10:00:00Z", generation=1)
    assert (first.worker_nodes, first.gpus, first.free_gpus, first.running, first.ray_version) == (2, 8, 3, 2, "2.60.0")
    again = cluster_status(first, up, address="http://a", now="2026-12-05T10:05:00Z", generation=1)
    assert again == first  # nothing changed: nothing to write
    down = ClusterReport(error="connection refused", error_reason="RayUnreachable", version=None, worker_nodes=None, gpus=None,
                         free_gpus=None, running=2, queued=4)
    later = cluster_status(first, down, address="http://a", now="2026-12-05T10:06:00Z", generation=1)
    (cond,) = later.conditions or []
    assert (cond.status, cond.reason, cond.last_transition_time) == ("False", "RayUnreachable", "2026-12-05T10:06:00Z")
    assert "connection refused" in cond.message
    assert (later.worker_nodes, later.gpus, later.ray_version, later.queued) == (2, 8, "2.60.0", 4)


def test_a_cluster_being_deleted_names_the_tasks_it_waits_for() -> None:
    report = ClusterReport(error=None, error_reason="", version=None, worker_nodes=1, gpus=1, free_gpus=0, running=1, queued=0,
                           deleting=True, holding=("ns/t",))
    status = cluster_status(ArgusClusterStatus(), report, address="http://a", now="2026-12-05T10:00:00Z", generation=2)
    deleting = next(c for c in status.conditions or [] if c.type == "Deleting")
    assert deleting.reason == "TasksOnCluster" and "ns/t" in deleting.message and "spec.cancel" in deleting.message
