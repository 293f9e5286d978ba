"""Issue 4 acceptance on the real API server and a real Ray cluster: kubectl apply of the
examples -> the operator -> Ray workers -> .status, with the verl stand-in as trainer."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from ray.job_submission import JobSubmissionClient

from argus.core.progress import verl_lines
from argus_testbed import harness
from argus_testbed.harness import EXAMPLES, advanced_task, apply_file, apply_text, get_task, ppo_command, task_gone, wait_for, wait_phase

pytestmark = pytest.mark.integration


def ray_jobs_for(ray_cluster, namespace: str) -> list:
    return harness.ray_jobs_for(ray_cluster.dashboard_url, namespace)


def test_advanced_ppo_with_custom_reward_runs_on_a_worker(control_plane, ray_cluster, user_namespace, run_operator):
    ns = user_namespace("alice")
    op = run_operator([ns])
    apply_file(control_plane, ns, EXAMPLES / "ppo-advanced-custom-reward.yaml")
    queued = wait_phase(control_plane, ns, "ppo-custom-reward", ("Queued", "Submitted", "Running", "Succeeded"), op=op)
    assert queued["status"]["user"] == "alice"
    task = wait_phase(control_plane, ns, "ppo-custom-reward", ("Succeeded", "Failed"), timeout=120, op=op)
    status = task["status"]
    assert status["phase"] == "Succeeded", status
    # The expanded command: $HOME macros resolved to this user's tree and the shared data.
    assert "$HOME" not in status["command"] and "/users/alice/code/reward.py" in status["command"]
    # Placement proof: the driver ran on the worker, never on the head.
    driver = status["rayJob"]["driverNodeId"]
    assert driver in ray_cluster.worker_node_ids and driver != ray_cluster.head_node_id
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["Complete"] == "True" and conditions["Admitted"] == "True" and conditions["RayReachable"] == "True"
    assert status["observedGeneration"] == task["metadata"]["generation"]
    logs = subprocess.run([sys.executable, "-m", "argus.cli", "logs", "ppo-custom-reward", "-n", ns, "--kubeconfig", str(control_plane.kubeconfig), "--direct-ray"],
                          capture_output=True, text=True, timeout=60)
    assert logs.returncode == 0, logs.stderr
    # The reward function's own output (verl 0.9 says nothing when it loads the function).
    assert "reward.py: compute_score ground_truth=" in logs.stdout
    assert sum(1 for line in verl_lines(logs.stdout) if line.startswith("step:")) >= 3
    tail = subprocess.run([sys.executable, "-m", "argus.cli", "logs", "ppo-custom-reward", "-n", ns, "--tail", "1",
                           "--kubeconfig", str(control_plane.kubeconfig), "--direct-ray"], capture_output=True, text=True, timeout=60)
    assert len(tail.stdout.splitlines()) == 1
    # kubectl shows the printer columns and the events.
    table = control_plane.kubectl("get", "argustasks", "-n", ns, "-o", "wide").stdout
    header = table.splitlines()[0].split()
    for column in ("PHASE", "WORKLOAD", "KIND", "NODES", "GPUS/NODE", "AGE", "USER", "RAY", "REASON"):
        assert column in header, table
    assert "Succeeded" in table and "alice" in table
    described = control_plane.kubectl("describe", "argustask", "ppo-custom-reward", "-n", ns).stdout
    # One event per phase change but the quiet Submitted (core.vocabulary.QUIET_PHASE_CHANGES).
    assert "-> Submitted" not in described and "Submitted -> Running" in described and "Running -> Succeeded" in described, described


@pytest.mark.parametrize("example,name", [("ppo-basic.yaml", "ppo-basic"), ("grpo-basic.yaml", "grpo-basic"), ("sft-basic.yaml", "sft-basic"), ("ppo-advanced.yaml", "ppo-advanced")])
def test_examples_run_to_succeeded(control_plane, ray_cluster, user_namespace, run_operator, example, name):
    ns = user_namespace("alice")
    op = run_operator([ns])
    apply_file(control_plane, ns, EXAMPLES / example)
    task = wait_phase(control_plane, ns, name, ("Succeeded", "Failed"), timeout=120, op=op)
    assert task["status"]["phase"] == "Succeeded", task["status"]
    client = JobSubmissionClient(ray_cluster.dashboard_url)
    logs = client.get_job_logs(task["status"]["rayJob"]["submissionId"])
    assert "Total training steps" in logs


def test_rejected_tasks_never_reach_ray(control_plane, ray_cluster, user_namespace, run_operator):
    ns = user_namespace("alice")
    bare = user_namespace(None, prefix="bare")
    op = run_operator([ns, bare])
    apply_file(control_plane, ns, EXAMPLES / "hostile-other-user.yaml")
    apply_text(control_plane, ns, advanced_task("echo-only", "echo python3 -m verl.trainer.main_ppo"))
    apply_text(control_plane, bare, advanced_task("not-onboarded", ppo_command()))
    hostile = wait_phase(control_plane, ns, "hostile-other-user", ("Rejected", "Queued", "Succeeded"), op=op)["status"]
    assert hostile["phase"] == "Rejected" and hostile["reason"] == "InvalidSpec"
    assert "another user's home (bob)" in hostile["message"]
    echo = wait_phase(control_plane, ns, "echo-only", ("Rejected", "Queued"), op=op)["status"]
    assert echo["phase"] == "Rejected" and "does not run an allowed entrypoint" in echo["message"]
    bare_status = wait_phase(control_plane, bare, "not-onboarded", ("Rejected", "Queued"), op=op)["status"]
    assert bare_status["reason"] == "NamespaceNotOnboarded"
    events = control_plane.kubectl("get", "events", "-n", ns, "-o", "json").stdout
    assert any(e["reason"] == "InvalidSpec" and e["type"] == "Warning" for e in json.loads(events)["items"])
    # A positive sign that the operator went on acting after the refusals (a good task
    # created last runs to its end), with Ray's job list read all along: never a job for a
    # rejected task.
    apply_text(control_plane, ns, advanced_task("canary", ppo_command(steps=3)))

    def canary_done() -> bool:
        assert [j.submission_id for j in ray_jobs_for(ray_cluster, ns) if not j.submission_id.startswith(f"argus-{ns}-canary-")] == []
        assert ray_jobs_for(ray_cluster, bare) == []
        return get_task(control_plane, ns, "canary").get("status", {}).get("phase") == "Succeeded"
    wait_for(canary_done, 120, "the canary task to succeed", on_timeout=op.log_tail)
    # argus logs says why there is nothing to show, in one line, without a traceback.
    for task, expected in (("hostile-other-user", "has not been submitted to Ray yet (phase Rejected)"), ("no-such-task", "no ArgusTask 'no-such-task'")):
        logs = subprocess.run([sys.executable, "-m", "argus.cli", "logs", task, "-n", ns, "--kubeconfig", str(control_plane.kubeconfig), "--direct-ray"],
                              capture_output=True, text=True, timeout=60)
        assert logs.returncode == 1 and expected in logs.stderr and "Traceback" not in logs.stderr, logs.stderr


def test_queue_runs_in_priority_order_and_skips_unschedulable(control_plane, ray_cluster, user_namespace, run_operator):
    """The priority read from the real objects decides, on the real cluster's capacity. (The
    queue's whole order, priority then age then name, is tests/unit/test_core_queue.py's and
    tests/unit/test_controller.py's.)"""
    ns = user_namespace("alice")
    # Created before the operator starts, so all three wait in one queue. "first" comes first
    # by age and by name: only its lower priority puts it after "urgent".
    too_big = advanced_task("too-big", ppo_command(nnodes=2, gpus=4), nnodes=2, gpus=4)  # 8 GPUs > the cluster's 4
    apply_text(control_plane, ns, too_big)
    for name, priority in (("first", 0), ("urgent", 10)):
        apply_text(control_plane, ns, advanced_task(name, ppo_command(steps=10), priority=priority))
    op = run_operator([ns], max_running=1)
    wait_phase(control_plane, ns, "first", "Succeeded", timeout=180, op=op)
    assert get_task(control_plane, ns, "urgent")["status"]["phase"] == "Succeeded"
    # Ray's own millisecond times: one after the other, in priority order, never overlapping.
    client = JobSubmissionClient(ray_cluster.dashboard_url)
    jobs = {name: client.get_job_info(get_task(control_plane, ns, name)["status"]["rayJob"]["submissionId"]) for name in ("urgent", "first")}
    assert jobs["urgent"].end_time <= jobs["first"].start_time, {n: (j.start_time, j.end_time) for n, j in jobs.items()}
    big = get_task(control_plane, ns, "too-big")["status"]
    assert big["phase"] == "Queued" and big["reason"] == "Unschedulable", big
    assert big["message"].startswith("needs 2 worker node(s) with 4 GPUs each, but the largest worker node has 4 GPUs and there is 1 worker node(s)")
    # Its place is served on demand (the log API's pendingtasks), never kept in its status.
    assert "queuePosition" not in big, big


def test_cancel_delete_and_deadline_stop_the_ray_job(control_plane, ray_cluster, user_namespace, run_operator):
    ns = user_namespace("alice")
    op = run_operator([ns])
    client = JobSubmissionClient(ray_cluster.dashboard_url)
    long = ppo_command(steps=2000)
    apply_text(control_plane, ns, advanced_task("to-cancel", long))
    apply_text(control_plane, ns, advanced_task("to-delete", long))
    apply_text(control_plane, ns, advanced_task("with-deadline", long, deadline=3))
    for name in ("to-cancel", "to-delete"):
        wait_phase(control_plane, ns, name, "Running", timeout=60, op=op)
    control_plane.kubectl("patch", "argustask", "to-cancel", "-n", ns, "--type=merge", "-p", '{"spec":{"cancel":true}}')
    # Finished turns true at every end, so kubectl wait needs no knowledge of how it ended.
    control_plane.kubectl("wait", "argustask/to-cancel", "-n", ns, "--for=condition=Finished", "--timeout=60s")
    cancelled = wait_phase(control_plane, ns, "to-cancel", ("Stopped", "Failed", "Succeeded"), timeout=60, op=op)["status"]
    assert (cancelled["phase"], cancelled["reason"]) == ("Stopped", "Cancelled")
    assert client.get_job_info(cancelled["rayJob"]["submissionId"]).status.value == "STOPPED"

    sid = get_task(control_plane, ns, "to-delete")["status"]["rayJob"]["submissionId"]
    assert client.get_job_info(sid).status.value == "RUNNING"
    control_plane.kubectl("delete", "argustask", "to-delete", "-n", ns, "--timeout=60s")  # returns once the finalizer is released
    # The job was stopped, then removed from Ray's job history: Ray removes only ended jobs
    # (delete_job refuses a running one), so its absence proves the stop. Ray's job monitor may
    # write the record once more as the supervisor exits; the operator removes it again.
    wait_for(lambda: sid not in [j.submission_id for j in client.list_jobs()], 20, "the deleted task's job to leave Ray's history",
             on_timeout=op.log_tail)

    late = wait_phase(control_plane, ns, "with-deadline", ("Failed", "Stopped", "Succeeded"), timeout=60, op=op)["status"]
    assert (late["phase"], late["reason"]) == ("Failed", "DeadlineExceeded")
    assert client.get_job_info(late["rayJob"]["submissionId"]).status.value == "STOPPED"


def test_cancel_while_queued_never_reaches_ray(control_plane, ray_cluster, user_namespace, run_operator):
    ns = user_namespace("alice")
    apply_text(control_plane, ns, advanced_task("blocker", ppo_command(steps=2000, gpus=4), gpus=4))
    apply_text(control_plane, ns, advanced_task("waiting", ppo_command(steps=5)))
    op = run_operator([ns], max_running=1)
    wait_phase(control_plane, ns, "blocker", "Running", timeout=60, op=op)
    assert get_task(control_plane, ns, "waiting")["status"]["phase"] == "Queued"
    control_plane.kubectl("patch", "argustask", "waiting", "-n", ns, "--type=merge", "-p", '{"spec":{"cancel":true}}')
    status = wait_phase(control_plane, ns, "waiting", "Stopped", timeout=30, op=op)["status"]
    assert status["reason"] == "Cancelled"
    assert [j.metadata.get("argus.io/name") for j in ray_jobs_for(ray_cluster, ns)] == ["blocker"]
    control_plane.kubectl("delete", "argustask", "blocker", "-n", ns, "--timeout=60s")


def test_spec_change_is_refused_and_cancel_cannot_be_undone(control_plane, user_namespace):
    ns = user_namespace("alice")
    apply_text(control_plane, ns, advanced_task("fixed", ppo_command()))
    changed = apply_text(control_plane, ns, advanced_task("fixed", ppo_command(steps=3)), check=False)
    assert changed.returncode != 0 and "spec.command is immutable" in changed.stderr
    control_plane.kubectl("patch", "argustask", "fixed", "-n", ns, "--type=merge", "-p", '{"spec":{"cancel":true}}')
    back = control_plane.kubectl("patch", "argustask", "fixed", "-n", ns, "--type=merge", "-p", '{"spec":{"cancel":false}}', check=False)
    assert back.returncode != 0 and "cannot go back from true to false" in back.stderr


def crash_after_submit(control_plane, ray_cluster, run_operator, ns: str, name: str) -> tuple[object, str]:
    """Run an operator that dies right after Ray accepted the task's job (the fault is
    injected by the testbed, argus_testbed.faults): the job is in Ray, the status says Queued."""
    op = run_operator([ns], crash_after_submit=1.0)
    assert op.wait_exit(timeout=60) == 137
    task = get_task(control_plane, ns, name)
    assert (task.get("status") or {}).get("phase") in (None, "Queued")  # nothing says it reached Ray...
    assert task["metadata"]["finalizers"] == ["argus.io/stop-ray-job"]  # ...but the finalizer says it may have
    jobs = ray_jobs_for(ray_cluster, ns)
    assert len(jobs) == 1
    return op, jobs[0].submission_id


def test_crash_right_after_submit_adopts_the_job(control_plane, ray_cluster, user_namespace, run_operator):
    ns = user_namespace("alice")
    apply_text(control_plane, ns, advanced_task("crashy", ppo_command(steps=20)))
    op, sid = crash_after_submit(control_plane, ray_cluster, run_operator, ns, "crashy")
    op.restart(without_faults=True)
    status = wait_phase(control_plane, ns, "crashy", ("Succeeded", "Failed"), timeout=120, op=op)["status"]
    assert status["phase"] == "Succeeded", status
    jobs = ray_jobs_for(ray_cluster, ns)
    assert [j.submission_id for j in jobs] == [sid] == [status["rayJob"]["submissionId"]]
    events = json.loads(control_plane.kubectl("get", "events", "-n", ns, "-o", "json").stdout)["items"]
    assert any(e["reason"] == "AdoptedExistingJob" for e in events)


def test_cancel_after_a_crash_stops_the_job_that_reached_ray(control_plane, ray_cluster, user_namespace, run_operator):
    """Issue 18: the job is in Ray, its Submitted status was never written; the task is
    cancelled while no operator runs. The restarted operator asks Ray about the task's
    submission id, stops the job, and only then says Stopped."""
    ns = user_namespace("alice")
    apply_text(control_plane, ns, advanced_task("orphan", ppo_command(steps=2000)))
    op, sid = crash_after_submit(control_plane, ray_cluster, run_operator, ns, "orphan")
    client = JobSubmissionClient(ray_cluster.dashboard_url)
    wait_for(lambda: client.get_job_info(sid).status.value == "RUNNING", 60, f"Ray job {sid} to run")
    control_plane.kubectl("patch", "argustask", "orphan", "-n", ns, "--type=merge", "-p", '{"spec":{"cancel":true}}')
    op.restart(without_faults=True)
    status = wait_phase(control_plane, ns, "orphan", ("Stopped", "Failed", "Succeeded"), timeout=60, op=op)["status"]
    assert (status["phase"], status["reason"]) == ("Stopped", "Cancelled"), status
    assert client.get_job_info(sid).status.value == "STOPPED"
    assert status["rayJob"]["submissionId"] == sid and status["rayJob"]["status"] == "STOPPED"


def test_delete_after_a_crash_stops_the_job_that_reached_ray(control_plane, ray_cluster, user_namespace, run_operator):
    """The same window, closed by a delete: the object is held until the job is stopped."""
    ns = user_namespace("alice")
    apply_text(control_plane, ns, advanced_task("orphan", ppo_command(steps=2000)))
    op, sid = crash_after_submit(control_plane, ray_cluster, run_operator, ns, "orphan")
    client = JobSubmissionClient(ray_cluster.dashboard_url)
    wait_for(lambda: client.get_job_info(sid).status.value == "RUNNING", 60, f"Ray job {sid} to run")
    control_plane.kubectl("delete", "argustask", "orphan", "-n", ns, "--wait=false")
    assert control_plane.kubectl("get", "argustask", "orphan", "-n", ns, check=False).returncode == 0  # held by the finalizer
    assert client.get_job_info(sid).status.value == "RUNNING"  # no operator runs: the job still runs
    op.restart(without_faults=True)
    wait_for(lambda: task_gone(control_plane, ns, "orphan"), 60,
             "the object to go once its job is stopped", on_timeout=lambda: op.log_tail())
    # Stopped, then removed from Ray's job history (Ray removes only ended jobs). The removal
    # runs in the background and looks again until the record stays gone (Ray's job monitor
    # can write an ended job's record back a moment after a delete), so it may finish after
    # the object has gone.
    wait_for(lambda: sid not in [j.submission_id for j in client.list_jobs()], 30, f"{sid} to leave Ray's job history",
             on_timeout=lambda: op.log_tail())
