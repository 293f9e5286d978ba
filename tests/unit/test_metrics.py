"""The operator's metrics, as Prometheus would scrape them: names, types and label names
against a table written here (not read from the code), the table in docs/metrics.md
against the same, what the status writer's hook counts, and that each ``Metrics`` keeps
its series in a registry of its own, timed by the clock it is handed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from argus import __version__
from argus.controller.metrics import Metrics
from fakes import FakeClock

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]

# name -> (type, label names). The contract dashboards and alerts are written against.
EXPECTED = {
    "argus_tasks": ("gauge", ("phase",)),
    "argus_queue_length": ("gauge", ()),
    "argus_submit_latency_seconds": ("histogram", ()),
    "argus_ray_api_calls_total": ("counter", ("operation", "cluster")),
    "argus_ray_api_errors_total": ("counter", ("operation", "cluster")),
    "argus_ray_api_call_duration_seconds": ("histogram", ("operation", "cluster")),
    "argus_ray_jobs_lost_total": ("counter", ()),
    "argus_tasks_finished_total": ("counter", ("phase", "reason")),
    "argus_reconcile_errors_total": ("counter", ()),
    "argus_undeclared_transitions_total": ("counter", ()),
    "argus_preemptions_total": ("counter", ("cluster",)),
    "argus_preemption_lost_gpu_steps_total": ("counter", ("cluster",)),
    "argus_admission_pass_seconds": ("histogram", ()),
    "argus_webhook_review_duration_seconds": ("histogram", ("operation", "result")),
    "argus_leader": ("gauge", ()),
    "argus_build_info": ("gauge", ("version", "python")),
    "argus_task_watch_age_seconds": ("gauge", ()),
    "argus_cluster_ready": ("gauge", ("node", "check", "cluster")),
    "argus_cluster_checked_timestamp_seconds": ("gauge", ("cluster",)),
    "argus_crd_stale": ("gauge", ("crd",)),
    "argus_user_gpus_in_use": ("gauge", ("user",)),
    "argus_user_tasks_queued": ("gauge", ("user",)),
    "argus_user_gpu_quota": ("gauge", ("user",)),
    "argus_user_gpu_seconds_total": ("counter", ("user",)),
}


def scrape(metrics: Metrics) -> dict[str, Any]:
    """What /metrics would show, parsed by Prometheus's own text parser."""
    families = text_string_to_metric_families(generate_latest(metrics.registry).decode())
    return {f.name: f for f in families if f.name.startswith("argus_")}


def family_name(name: str) -> str:
    # The parser names a counter family without its _total suffix.
    return name[: -len("_total")] if name.endswith("_total") else name


def leading_metrics() -> Metrics:
    """A ``Metrics`` whose replica has ticked as the leader (the task gauges are served)."""
    metrics = Metrics(FakeClock())
    metrics.observe_phases([])
    return metrics


def test_names_types_and_labels() -> None:
    families = scrape(leading_metrics())
    assert set(families) == {family_name(n) for n in EXPECTED}
    for name, (kind, labels) in EXPECTED.items():
        family = families[family_name(name)]
        assert family.type == kind, name
        for sample in family.samples:
            extra = {"le"} if kind == "histogram" else set()
            assert set(sample.labels) - extra <= set(labels), (name, sample)
        if labels and family.samples:
            assert any(set(s.labels) - {"le"} == set(labels) for s in family.samples), name


LEADER_ONLY = {"argus_tasks", "argus_queue_length", "argus_user_gpus_in_use", "argus_user_tasks_queued", "argus_user_gpu_quota"}


class Task:
    def __init__(self, phase: str, user: str = "alice") -> None:
        self.phase = phase
        self.status = {"user": user}


def test_only_the_leader_exports_task_and_queue_gauges() -> None:
    clock = FakeClock()
    metrics = Metrics(clock)
    follower = scrape(metrics)
    assert not LEADER_ONLY & set(follower), "a replica that has not led exports no task or queue gauge"
    assert {"argus_leader", "argus_build_info", "argus_ray_api_calls"} <= set(follower)

    metrics.observe_phases([Task("Queued"), Task("Running")])
    metrics.observe_users({"alice": 4}, [Task("Queued")], {"alice": 8})
    leader = scrape(metrics)
    assert LEADER_ONLY <= set(leader)
    assert value(metrics, "argus_queue_length") == 1
    assert value(metrics, "argus_tasks", phase="Running") == 1
    assert value(metrics, "argus_user_gpus_in_use", user="alice") == 4

    metrics.step_down()  # another replica leads now
    assert not LEADER_ONLY & set(scrape(metrics))
    clock.advance(3600)  # the other leader's hour: not this replica's to count
    metrics.observe_phases([Task("Running")])
    metrics.observe_users({"alice": 4}, [], {})
    assert value(metrics, "argus_user_gpu_seconds_total", user="alice") == 0
    assert value(metrics, "argus_queue_length") == 0 and value(metrics, "argus_tasks", phase="Queued") == 0
    assert metrics.registry.get_sample_value("argus_user_gpu_quota", {"user": "alice"}) is None  # gone with the step down


def test_series_that_exist_before_anything_happens() -> None:
    families = scrape(Metrics(FakeClock()))
    info = [s for s in families["argus_build_info"].samples]
    assert [(s.labels["version"], s.value) for s in info] == [(__version__, 1.0)]
    calls = {s.labels["operation"] for s in families["argus_ray_api_calls"].samples if s.name.endswith("_total")}
    assert calls == {"submit", "status", "stop", "delete", "logs", "nodes"}
    errors = {s.labels["operation"] for s in families["argus_ray_api_errors"].samples if s.name.endswith("_total")}
    assert errors == calls


def value(metrics: Metrics, name: str, **labels: str) -> float:
    got = metrics.registry.get_sample_value(name, labels)
    return 0.0 if got is None else got


def test_terminal_outcomes_by_phase_and_reason_and_lost_jobs_apart() -> None:
    metrics = Metrics(FakeClock())
    metrics.observe_phase_change("Queued", "Submitted", "Admitted")
    metrics.observe_phase_change("Submitted", "Running", "RayJobRunning")
    metrics.observe_phase_change("Running", "Succeeded", "RayJobSucceeded")
    metrics.observe_phase_change("Running", "Failed", "RayJobLost")
    metrics.observe_phase_change("Running", "Stopped", "Cancelled")
    metrics.observe_phase_change("Failed", "Failed", "RayJobLost")  # no change of phase: nothing
    assert value(metrics, "argus_tasks_finished_total", phase="Succeeded", reason="RayJobSucceeded") == 1
    assert value(metrics, "argus_tasks_finished_total", phase="Failed", reason="RayJobLost") == 1
    assert value(metrics, "argus_tasks_finished_total", phase="Stopped", reason="Cancelled") == 1
    assert value(metrics, "argus_ray_jobs_lost_total") == 1
    assert value(metrics, "argus_tasks_finished_total", phase="Running", reason="RayJobRunning") == 0


def test_a_lost_or_unknown_job_is_an_answer_not_an_error() -> None:
    metrics = Metrics(FakeClock())
    metrics.count_ray_call("status", "RayJobUnknown", 0.01)
    metrics.count_ray_call("status", "RayUnreachable", 10.0)
    assert value(metrics, "argus_ray_api_calls_total", operation="status", cluster="") == 2
    assert value(metrics, "argus_ray_api_errors_total", operation="status", cluster="") == 1
    assert value(metrics, "argus_ray_api_call_duration_seconds_count", operation="status", cluster="") == 2


def test_the_process_series_are_served_too() -> None:
    families = text_string_to_metric_families(generate_latest(Metrics(FakeClock()).registry).decode())
    names = {f.name for f in families}
    assert {"process_resident_memory_bytes", "process_cpu_seconds", "python_info"} <= names


def test_each_metrics_object_has_its_own_registry_and_none_on_the_global_one() -> None:
    one, other = Metrics(FakeClock()), Metrics(FakeClock())
    one.observe_phase_change("Running", "Failed", "RayJobLost")
    assert value(one, "argus_ray_jobs_lost_total") == 1
    assert value(other, "argus_ray_jobs_lost_total") == 0
    assert not [f.name for f in REGISTRY.collect() if f.name.startswith("argus_")]


def test_times_come_from_the_clock_it_is_handed() -> None:
    clock = FakeClock()
    metrics = Metrics(clock)
    metrics.observe_users({"alice": 4}, [], {})   # the first pass starts the count
    clock.advance(30)
    metrics.observe_users({"alice": 4}, [], {})
    assert value(metrics, "argus_user_gpu_seconds_total", user="alice") == 120
    clock.advance(90)
    metrics.observe_submit_latency("2026-12-03T08:00:00Z")  # FakeClock starts there; two minutes on
    assert value(metrics, "argus_submit_latency_seconds_sum") == 120
    metrics.observe_doctor([])
    assert value(metrics, "argus_cluster_checked_timestamp_seconds", cluster="") == clock.now().timestamp()


def test_docs_table_lists_every_metric_with_its_type_and_labels() -> None:
    doc = (REPO / "docs" / "metrics.md").read_text()
    rows = {m.group(1): (m.group(2).strip(), m.group(3).strip())
            for m in re.finditer(r"^\| `(argus_[a-z_]+)` \| ([a-z]+) \|([^|]*)\|", doc, re.M)}
    assert set(rows) == set(EXPECTED)
    for name, (kind, labels) in EXPECTED.items():
        doc_kind, doc_labels = rows[name]
        assert doc_kind == kind, name
        assert tuple(re.findall(r"`([a-z_]+)`", doc_labels)) == labels, name
