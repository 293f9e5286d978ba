"""A stateless Ray head restarts or goes away: running tasks become RayJobLost (never a
silent resubmit), RayReachable=False is shown during the outage, nothing fails before the
grace period, and tasks created while Ray is down run once it is back.

Uses its own Ray cluster so restarting the head does not disturb other tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from argus.core.times import parse_time
from argus_testbed import RayCluster
from argus_testbed.harness import advanced_task, apply_text, get_task, ppo_command, ray_jobs_for, wait_for, wait_phase

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def own_ray(tmp_path_factory: pytest.TempPathFactory, ray_cluster_options: dict) -> RayCluster:
    rc = RayCluster.start(Path(tmp_path_factory.mktemp("ray-outage")), **ray_cluster_options)
    yield rc
    rc.stop()


def condition(task: dict, type_: str) -> str | None:
    return next((c["status"] for c in (task.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


def test_head_restart_loses_running_jobs_and_queued_tasks_wait(control_plane, own_ray, user_namespace, run_operator):
    ns = user_namespace("alice")
    op = run_operator([ns], ray_address=own_ray.dashboard_url, extra_args=["--ray-grace", "120"])
    apply_text(control_plane, ns, advanced_task("long", ppo_command(steps=2000)))
    wait_phase(control_plane, ns, "long", "Running", timeout=60, op=op)

    own_ray.stop_head()
    try:
        # The outage shows, and nothing fails within the grace period.
        wait_for(lambda: condition(get_task(control_plane, ns, "long"), "RayReachable") == "False", 30, "RayReachable=False on the running task")
        assert get_task(control_plane, ns, "long")["status"]["phase"] == "Running"
        apply_text(control_plane, ns, advanced_task("while-down", ppo_command(steps=3)))
        queued = wait_phase(control_plane, ns, "while-down", "Queued", timeout=30, op=op)["status"]
        wait_for(lambda: get_task(control_plane, ns, "while-down")["status"].get("reason") == "RayUnreachable", 20, "queued task to say Ray is unreachable")
        assert get_task(control_plane, ns, "long")["status"]["phase"] == "Running"
    finally:
        own_ray.start_head()
    lost = wait_phase(control_plane, ns, "long", ("Failed", "Succeeded"), timeout=60, op=op)["status"]
    assert (lost["phase"], lost["reason"]) == ("Failed", "RayJobLost"), lost
    assert "does not resubmit" in lost["message"]
    done = wait_phase(control_plane, ns, "while-down", ("Succeeded", "Failed"), timeout=90, op=op)["status"]
    assert done["phase"] == "Succeeded", done
    # Nothing was resubmitted silently: the new head knows only the task created while it was down.
    jobs = ray_jobs_for(own_ray.dashboard_url, ns)
    assert [j.submission_id.rsplit("-", 1)[0] for j in jobs] == [f"argus-{ns}-while-down"]
    assert queued["phase"] == "Queued"


def test_running_task_fails_only_after_the_grace_period(control_plane, own_ray, user_namespace, run_operator):
    ns = user_namespace("alice")
    grace = 4  # the recorded times below prove it, so a short grace proves as much as a long one
    op = run_operator([ns], ray_address=own_ray.dashboard_url, extra_args=["--ray-grace", str(grace)])
    apply_text(control_plane, ns, advanced_task("patient", ppo_command(steps=2000)))
    wait_phase(control_plane, ns, "patient", "Running", timeout=60, op=op)
    own_ray.stop_head()
    try:
        failed = wait_phase(control_plane, ns, "patient", "Failed", timeout=60, op=op)["status"]
    finally:
        own_ray.start_head()
    assert failed["reason"] == "RayUnreachable" and f"grace {grace} s" in failed["message"], failed
    # From the recorded times, not from sampling: the outage was noticed while the task ran,
    # and the task failed no earlier than the grace period after that.
    since = parse_time(failed["rayUnreachableSince"])
    failed_at = parse_time(next(c for c in failed["conditions"] if c["type"] == "Failed")["lastTransitionTime"])
    reachable = next(c for c in failed["conditions"] if c["type"] == "RayReachable")
    assert reachable["status"] == "False" and parse_time(reachable["lastTransitionTime"]) == since
    assert (failed_at - since).total_seconds() >= grace, (since, failed_at)
    running_since = parse_time(next(c for c in failed["conditions"] if c["type"] == "Running")["lastTransitionTime"])
    assert running_since == failed_at  # Running until it failed: the outage alone did not end it
