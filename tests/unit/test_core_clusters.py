"""The ArgusCluster model (``core.clusters``, pure): parsing an object, the namespace
selector, the placement annotation, a KubeRay RayCluster reference's address, argus doctor's
verdict, and the status a pass writes."""

from __future__ import annotations

import re

import pytest

from argus.core.clusters import (
    ADDRESS_OR_REF_RULE,
    DEFAULT_KUBERAY_URL,
    ArgusClusterStatus,
    ClusterReport,
    DoctorVerdict,
    InvalidCluster,
    RayClusterRef,
    UnresolvedRef,
    check_kuberay_url,
    cluster_status,
    doctor_summary,
    head_dashboard_address,
    head_service_name,
    missing_raycluster,
    parse_cluster,
    placed_on,
    placement_annotation,
    preference_order,
)
from argus.core.doctor import Check, Row, Status
from argus.core.vocabulary import ClusterReason

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


# ------------------------------------------------------------------ a KubeRay RayCluster reference

def test_exactly_one_of_address_and_a_raycluster_ref() -> None:
    ref = parse_cluster({"metadata": {"name": "k"}, "spec": {"rayClusterRef": {"name": "gpu", "namespace": "ray"}}})
    assert (ref.address, str(ref.ray_cluster_ref)) == ("", "ray/gpu")
    for spec in ({}, {"address": "http://a:8265", "rayClusterRef": {"name": "gpu", "namespace": "ray"}}):
        with pytest.raises(InvalidCluster) as err:
            parse_cluster({"metadata": {"name": "k"}, "spec": spec})
        assert ADDRESS_OR_REF_RULE[0] in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(InvalidCluster, match="spec.rayClusterRef.namespace"):
        parse_cluster({"metadata": {"name": "k"}, "spec": {"rayClusterRef": {"name": "gpu", "namespace": "Ray_NS"}}})


def service(*ports: tuple[str, int], cluster_ip: str = "10.96.0.9") -> dict:
    return {"metadata": {"name": "gpu-head-svc"}, "spec": {"clusterIP": cluster_ip, "ports": [{"name": n, "port": p} for n, p in ports]}}


def test_the_head_service_gives_the_dashboard_address() -> None:
    ref = RayClusterRef(name="gpu", namespace="ray")
    assert head_service_name(ref, {"status": {"head": {"serviceName": "gpu-head-svc-x1"}}}) == "gpu-head-svc-x1"  # KubeRay >= 1.1 says
    assert head_service_name(ref, {"status": {}}) == "gpu-head-svc"  # else the name KubeRay gives it
    svc = service(("client", 10001), ("dashboard", 8265), ("gcs-server", 6379))
    assert head_dashboard_address(ref, "gpu-head-svc", svc, DEFAULT_KUBERAY_URL) == "http://gpu-head-svc.ray.svc.cluster.local:8265"
    assert head_dashboard_address(ref, "gpu-head-svc", svc, "https://{clusterIP}:{port}/") == "https://10.96.0.9:8265"
    with pytest.raises(UnresolvedRef, match=r"head Service ray/gpu-head-svc does not exist"):
        head_dashboard_address(ref, "gpu-head-svc", None, DEFAULT_KUBERAY_URL)
    with pytest.raises(UnresolvedRef, match=r"has no port named dashboard"):
        head_dashboard_address(ref, "gpu-head-svc", service(("client", 10001)), DEFAULT_KUBERAY_URL)
    assert str(missing_raycluster(ref)) == "spec.rayClusterRef: RayCluster ray/gpu does not exist (KubeRay's ray.io/v1)"


@pytest.mark.parametrize(("template", "words"), [
    ("http://{service}.{namespace}.svc.example.org:{port}", None),
    ("http://{clusterIP}:{port}", None),
    ("http://{service}.{namespace}.svc:{prot}", "unknown field {prot}"),
    ("http://{service}.{namespace}.svc:8265", "must be an http:// or https:// URL with {port}"),
    ("{service}:{port}", "must be an http:// or https:// URL with {port}"),
    ("http://{service:{port}", "--kuberay-dashboard-url"),
])
def test_the_kuberay_url_flag_is_checked(template: str, words: str | None) -> None:
    if words is None:
        assert check_kuberay_url(template) == template
    else:
        with pytest.raises(ValueError, match=re.escape(words)):
            check_kuberay_url(template)


def test_an_unresolved_reference_says_why_without_an_address() -> None:
    report = ClusterReport(error="spec.rayClusterRef: RayCluster ray/gpu does not exist (KubeRay's ray.io/v1)", error_reason=ClusterReason.RayClusterRefUnresolved,
                           version=None, worker_nodes=None, gpus=None, free_gpus=None, running=0, queued=1)
    status = cluster_status(ArgusClusterStatus(), report, address="", now="2026-12-05T10:00:00Z", generation=1)
    (cond,) = status.conditions or []
    assert (cond.status, cond.reason, cond.message) == ("False", ClusterReason.RayClusterRefUnresolved, report.error)
    assert status.address is None


# ------------------------------------------------------------------ argus doctor's verdict in the status

def test_the_doctor_verdict_counts_and_names_the_failures_else_the_warnings() -> None:
    rows = [Row("cluster", Check.ray_version, Status.ok, "2.60.0"), Row("w1 (10.0.0.7)", Check.probe, Status.ok, "ran"),
            Row("w1 (10.0.0.7)", Check.gpus, Status.warn, "no nvidia-smi"), Row("w2 (10.0.0.8)", Check.probe, Status.ok, "ran")]
    warned = doctor_summary(rows, "2026-12-05T10:00:00Z")
    assert (warned.verdict, warned.failed, warned.warnings, warned.message) == \
        (DoctorVerdict.Warnings, 0, 1, "w1 (10.0.0.7) gpus: no nvidia-smi")
    failed = doctor_summary([*rows, Row("w2 (10.0.0.8)", Check.python3, Status.fail, "no python3", "fix it")], "2026-12-05T10:00:00Z")
    assert (failed.verdict, failed.failed, failed.message) == (DoctorVerdict.Failed, 1, "w2 (10.0.0.8) python3: no python3")
    passed = doctor_summary([r for r in rows if r.status is Status.ok], "2026-12-05T10:00:00Z")
    assert (passed.verdict, passed.message) == (DoctorVerdict.Passed, "every check passed on 2 worker node(s)")
    long = doctor_summary([Row(f"w{i}", Check.python3, Status.fail, "x" * 100) for i in range(40)], "2026-12-05T10:00:00Z")
    assert len(long.message) <= 2000 and long.failed == 40
    # Kept in the status from one pass to the next, replaced by the next run's.
    up = ClusterReport(error=None, error_reason="", version="2.60.0", worker_nodes=2, gpus=8, free_gpus=8, running=0, queued=0, doctor=failed)
    first = cluster_status(ArgusClusterStatus(), up, address="http://a", now="2026-12-05T10:00:00Z", generation=1)
    later = cluster_status(first, ClusterReport(**{**up.__dict__, "doctor": None}), address="http://a", now="2026-12-05T10:01:00Z",
                           generation=1)
    assert later.doctor == failed and later.model_dump(by_alias=True, exclude_none=True)["doctor"]["checkedAt"] == "2026-12-05T10:00:00Z"
