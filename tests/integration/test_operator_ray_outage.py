"""A stateless Ray head restarts or goes away: running tasks become RayJobLost (never a
silent resubmit) unless their restartPolicy asks for a new attempt, which then resumes from
the newest checkpoint; RayReachable=False is shown during the outage, nothing fails before
the grace period, and tasks created while Ray is down run once it is back.

Uses its own Ray cluster so restarting the head does not disturb other tests. A test that
leaves the head down does not start it again: the ``ray`` fixture starts it before a test
that needs it (a head start is seconds of CPU, wasted after the module's last test)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from argus.core.times import parse_time
from argus_testbed import RayCluster
from argus_testbed.harness import advanced_task, apply_text, get_task, logged_steps, ppo_command, ray_jobs_for, task_with, wait_for, wait_phase

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def own_ray(tmp_path_factory: pytest.TempPathFactory, ray_cluster_options: dict) -> Iterator[RayCluster]:
    rc = RayCluster.start(Path(tmp_path_factory.mktemp("ray-outage")), **ray_cluster_options)
    yield rc
    rc.stop()


@pytest.fixture
def ray(own_ray: RayCluster) -> RayCluster:
    """The module's Ray, running: started again when an earlier test left its head down."""
    if not own_ray.running:
        own_ray.stop_head()  # whatever of it is left (a test stopped it, or a node died)
        own_ray.start_head()
    return own_ray


def condition(task: dict, type_: str) -> str | None:
    return next((c["status"] for c in (task.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


def test_head_restart_loses_running_jobs_and_queued_tasks_wait(control_plane, ray, user_namespace, run_operator):
    """One head restart, three tasks: the running one with the default restartPolicy
    (Never) fails as RayJobLost; the running one with OnRayJobLost gets attempt 2, which
    resumes from attempt 1's newest checkpoint; the one created while Ray was down runs."""
    ns = user_namespace("alice")
    op = run_operator([ns], ray_address=ray.dashboard_url, extra_args=["--ray-grace", "120", "--progress-interval", "1"])
    total, save_freq = 400, 20
    apply_text(control_plane, ns, advanced_task("long", ppo_command(steps=2000)))
    apply_text(control_plane, ns, task_with("resumable", ppo_command(steps=total, extra=f"trainer.save_freq={save_freq}"), restartPolicy="OnRayJobLost"))
    wait_phase(control_plane, ns, "long", "Running", timeout=60, op=op)
    wait_for(lambda: ((get_task(control_plane, ns, "resumable").get("status") or {}).get("progress") or {}).get("step", 0) > 2 * save_freq,
             120, "the resumable run to pass two checkpoints", on_timeout=op.log_tail)

    ray.stop_head()
    try:
        # The outage shows, and nothing fails within the grace period.
        wait_for(lambda: condition(get_task(control_plane, ns, "long"), "RayReachable") == "False", 30, "RayReachable=False on the running task")
        assert get_task(control_plane, ns, "long")["status"]["phase"] == "Running"
        apply_text(control_plane, ns, advanced_task("while-down", ppo_command(steps=3)))
        queued = wait_phase(control_plane, ns, "while-down", "Queued", timeout=30, op=op)["status"]
        wait_for(lambda: get_task(control_plane, ns, "while-down")["status"].get("reason") == "RayUnreachable", 20, "queued task to say Ray is unreachable")
        assert [get_task(control_plane, ns, name)["status"]["phase"] for name in ("long", "resumable")] == ["Running", "Running"]
    finally:
        ray.start_head()
    lost = wait_phase(control_plane, ns, "long", ("Failed", "Succeeded"), timeout=60, op=op)["status"]
    assert (lost["phase"], lost["reason"]) == ("Failed", "RayJobLost"), lost
    assert "does not resubmit" in lost["message"]
    done = wait_phase(control_plane, ns, "while-down", ("Succeeded", "Failed"), timeout=90, op=op)["status"]
    assert done["phase"] == "Succeeded", done
    assert queued["phase"] == "Queued"

    status = wait_phase(control_plane, ns, "resumable", ("Succeeded", "Failed"), timeout=240, op=op)["status"]
    assert (status["phase"], status["attempt"]) == ("Succeeded", 2), status
    status = wait_for(lambda: (s := get_task(control_plane, ns, "resumable")["status"])["progress"]["step"] == total and s, 30,
                      "the final progress", on_timeout=op.log_tail)
    first, second = status["attempts"]
    assert (first["attempt"], first["outcome"], second["attempt"], second["outcome"]) == (1, "RayJobLost", 2, "RayJobSucceeded")
    assert second["submissionId"] == first["submissionId"] + "-a2"
    events = json.loads(control_plane.kubectl("get", "events", "-n", ns, "-o", "json").stdout)["items"]
    assert any(e["reason"] == "Retrying" and "attempt 2 waits in the queue" in e["message"] for e in events)
    # Attempt 2 resumed at the last step attempt 1 checkpointed, and did the rest: every
    # step of the run was done, the ones after the checkpoint twice at most.
    job_dir = Path(status["jobDir"]["jobPath"])
    one, two = (job_dir / "attempt-1.log").read_text(), (job_dir / "attempt-2.log").read_text()
    resumed = int(re.search(r"Resuming from \S*global_step_(\d+)", two).group(1))
    assert resumed % save_freq == 0 and resumed <= max(logged_steps(one)) < resumed + save_freq
    assert logged_steps(two) == list(range(resumed + 1, total + 1))
    assert status["progress"]["step"] == total and status["progress"]["resumedFromStep"] == resumed

    # Nothing was resubmitted silently: the new head knows only the task created while it
    # was down and the new attempt the restartPolicy asked for.
    jobs = sorted(j.submission_id for j in ray_jobs_for(ray.dashboard_url, ns))
    assert jobs == sorted([done["rayJob"]["submissionId"], second["submissionId"]]), jobs
    assert done["rayJob"]["submissionId"].rsplit("-", 1)[0] == f"argus-{ns}-while-down"


def test_running_task_fails_only_after_the_grace_period(control_plane, ray, user_namespace, run_operator):
    ns = user_namespace("alice")
    grace = 4  # the recorded times below prove it, so a short grace proves as much as a long one
    op = run_operator([ns], ray_address=ray.dashboard_url, extra_args=["--ray-grace", str(grace)])
    apply_text(control_plane, ns, advanced_task("patient", ppo_command(steps=2000)))
    wait_phase(control_plane, ns, "patient", "Running", timeout=60, op=op)
    # Left down: the `ray` fixture starts it again for a test that needs it.
    ray.stop_head()
    failed = wait_phase(control_plane, ns, "patient", "Failed", timeout=60, op=op)["status"]
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
