"""The operator's Prometheus endpoint (--metrics-port; docs/metrics.md lists the metrics):
after a task runs to Succeeded, /metrics has every documented metric and counts it."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest

from argus.core.jobscript import exit_marker_for
from argus_testbed.harness import advanced_task, apply_text, ppo_command, wait_for, wait_phase
from argus_testbed.ports import free_port

pytestmark = pytest.mark.integration

METRICS = ("argus_tasks", "argus_queue_length", "argus_submit_latency_seconds", "argus_ray_api_errors_total",
           "argus_ray_api_calls_total", "argus_ray_jobs_lost_total", "argus_reconcile_errors_total",
           "argus_ray_api_call_duration_seconds", "argus_admission_pass_seconds", "argus_leader", "argus_build_info",
           "argus_task_watch_age_seconds", "argus_webhook_review_duration_seconds")


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def sample(text: str, name: str, labels: str = "") -> float | None:
    m = re.search(rf"^{re.escape(name)}{re.escape(labels)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def test_metrics_endpoint_counts_a_succeeded_task(control_plane, ray_cluster, user_namespace, run_operator) -> None:
    ns = user_namespace("alice")
    port = free_port()
    op = run_operator([ns], extra_args=["--metrics-port", str(port)])
    apply_text(control_plane, ns, advanced_task("measured", ppo_command(steps=3)))
    status = wait_phase(control_plane, ns, "measured", ("Succeeded", "Failed", "Rejected"), timeout=120, op=op)["status"]
    assert status["phase"] == "Succeeded", status

    # The gauge follows on the control loop's next tick.
    def counted() -> str | None:
        text = scrape(port)
        return text if (sample(text, "argus_tasks", '{phase="Succeeded"}') or 0) >= 1 else None
    text = wait_for(counted, 30, 'argus_tasks{phase="Succeeded"} >= 1', on_timeout=lambda: scrape(port))
    for name in METRICS:
        assert re.search(rf"^# TYPE {name} ", text, re.M), f"{name} missing:\n{text}"
    # The outcome counter holds the one task that ended, by its phase and reason.
    outcomes = re.findall(r'^argus_tasks_finished_total\{phase="(\w+)",reason="(\w+)"\} (\S+)$', text, re.M)
    assert outcomes == [("Succeeded", "RayJobSucceeded", "1.0")], outcomes
    assert sample(text, "argus_leader") == 1  # no leader election: this process acts
    assert sample(text, "argus_ray_api_call_duration_seconds_count", '{cluster="",operation="submit"}') == 1
    assert sample(text, "argus_admission_pass_seconds_count") >= 1
    assert 0 <= sample(text, "argus_task_watch_age_seconds") < 300
    assert sample(text, "argus_queue_length") == 0
    assert sample(text, "argus_submit_latency_seconds_count") >= 1
    assert sample(text, "argus_ray_api_calls_total", '{cluster="",operation="submit"}') == 1
    # The job's script wrote the command's exit status beside its log (what the operator
    # looks for to see the job's end without a Ray call).
    assert Path(exit_marker_for(status["logFile"]["jobPath"])).read_text() == "0\n"
    assert sample(text, "argus_ray_api_calls_total", '{cluster="",operation="status"}') >= 1
    assert sample(text, "argus_ray_api_calls_total", '{cluster="",operation="nodes"}') >= 1
    assert sample(text, "argus_reconcile_errors_total") == 0
    assert sample(text, "argus_ray_jobs_lost_total") == 0
    for operation in ("nodes", "submit", "status", "stop", "logs"):  # exported at 0 for alerts
        assert sample(text, "argus_ray_api_errors_total", f'{{cluster="",operation="{operation}"}}') == 0
    for phase in ("Queued", "Submitted", "Running", "Failed", "Stopped", "Rejected"):
        assert sample(text, "argus_tasks", f'{{phase="{phase}"}}') is not None



def test_progress_from_the_log_file_opens_no_ray_log_stream(control_plane, ray_cluster, user_namespace, run_operator) -> None:
    """--progress-source file (issue 26): the operator reads the attempt's log file in the job
    folder (this testbed's shared tree is local, at the jobs' paths) and never opens a Ray log
    stream; the task's progress is the same."""
    ns = user_namespace("alice")
    port = free_port()
    op = run_operator([ns], extra_args=["--metrics-port", str(port), "--progress-source", "file", "--progress-interval", "1"])
    apply_text(control_plane, ns, advanced_task("from-file", ppo_command(steps=5)))
    status = wait_phase(control_plane, ns, "from-file", ("Succeeded", "Failed", "Rejected"), timeout=120, op=op)["status"]
    assert status["phase"] == "Succeeded", status
    assert status["progress"]["step"] == 5 and status["progress"]["totalSteps"] == 5, status
    text = scrape(port)
    assert sample(text, "argus_ray_api_calls_total", '{cluster="",operation="logs"}') == 0, text
    assert sample(text, "argus_ray_api_calls_total", '{cluster="",operation="submit"}') == 1
    # The job's script wrote the command's exit status beside its log (what the operator
    # looks for to see the job's end without a Ray call).
    assert Path(exit_marker_for(status["logFile"]["jobPath"])).read_text() == "0\n"
