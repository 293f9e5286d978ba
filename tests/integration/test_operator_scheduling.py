"""Scheduling a shared GPU pool (issue 14) on the real API server and a real Ray cluster with
two worker nodes of different sizes (4 and 2 declared GPUs): admission by the GPUs free on
each node, as Ray reports them (a job submitted straight to Ray, outside Argus, holds
some), Unschedulable for a task no node set could ever hold, per-user quotas, and the
queue as users read it (`argus queue`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ray.job_submission import JobSubmissionClient

from argus_testbed import RayCluster
from argus_testbed.harness import advanced_task, apply_text, get_task, ppo_command, ray_jobs_for, wait_for, wait_phase

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory: pytest.TempPathFactory, ray_cluster_options: dict) -> RayCluster:
    rc = RayCluster.start(Path(tmp_path_factory.mktemp("ray-two-workers")), worker_gpus=4, extra_workers=[2], **ray_cluster_options)
    yield rc
    rc.stop()


def sized(name: str, per_node: int, nnodes: int = 1, priority: int = 0, steps: int = 2000) -> str:
    return advanced_task(name, ppo_command(steps=steps, nnodes=nnodes, gpus=per_node), nnodes=nnodes, gpus=per_node, priority=priority)


def gpus_used(ray_cluster: RayCluster) -> list[float]:
    import asyncio

    from argus.adapters.clock import SystemClock
    from argus.adapters.ray import RayJobsClient
    return [n.gpus_used or 0.0 for n in asyncio.run(RayJobsClient(ray_cluster.dashboard_url, monotonic=SystemClock().monotonic,
                                                                  threads=1).nodes())]


def status_of(cp, ns: str, name: str) -> dict:
    return get_task(cp, ns, name).get("status") or {}


def test_admission_by_free_gpus_per_node_with_a_job_outside_argus(control_plane, two_workers, user_namespace, run_operator):
    ns = user_namespace("alice")
    assert len(two_workers.worker_node_ids) == 2
    ray = JobSubmissionClient(two_workers.dashboard_url)
    # Straight to Ray, not through Argus: a driver that holds 3 GPUs, so it can only be on the 4-GPU worker.
    outside = ray.submit_job(entrypoint="sleep 600", entrypoint_num_gpus=3, entrypoint_resources={"worker_node": 1})
    try:
        wait_for(lambda: ray.get_job_info(outside).status.value == "RUNNING", 60, "the outside job to run")
        # Ray reports GPU use per node through its autoscaler's status, refreshed every few
        # seconds: wait until it shows the outside job (the operator reads the same report).
        wait_for(lambda: 3.0 in gpus_used(two_workers), 30, "Ray to report the outside job's GPUs")
        op = run_operator([ns], ray_address=two_workers.dashboard_url, max_running=4)
        apply_text(control_plane, ns, sized("two", per_node=2, priority=10))
        apply_text(control_plane, ns, sized("four", per_node=4, priority=5))
        apply_text(control_plane, ns, sized("eight", per_node=8, priority=20))
        wait_phase(control_plane, ns, "two", ("Submitted", "Running"), timeout=60, op=op)  # on the 2-GPU worker
        four = wait_for(lambda: (s := status_of(control_plane, ns, "four")).get("reason") == "Queued" and s,
                        60, "the 4-GPU task to say what it waits for", on_timeout=op.log_tail)
        # The 2-GPU worker is taken by "two"'s claim, the outside job holds 3 of the 4-GPU
        # worker's: four waits for free GPUs (not for a slot: 4 may run), and stays out of Ray.
        assert four["message"].startswith("waiting for 1 worker node(s) with 4 free GPUs each;"), four
        eight = status_of(control_plane, ns, "eight")
        assert (eight["phase"], eight["reason"]) == ("Queued", "Unschedulable")
        assert eight["message"] == ("needs 1 worker node(s) with 8 GPUs each, but the largest worker node has 4 GPUs and there are 2 worker "
                                    "node(s); it will run only if the cluster grows")
        assert [j.submission_id for j in ray_jobs_for(two_workers.dashboard_url, ns) if "four" in j.submission_id] == []
    finally:
        ray.stop_job(outside)
    # The outside job's GPUs come free: the 4-GPU task runs.
    wait_phase(control_plane, ns, "four", ("Submitted", "Running"), timeout=60, op=op)
    for name in ("two", "four"):
        control_plane.kubectl("patch", "argustask", name, "-n", ns, "--type=merge", "-p", '{"spec":{"cancel":true}}')
    for name in ("two", "four"):
        wait_phase(control_plane, ns, name, "Stopped", timeout=60, op=op)


def test_a_users_quota_holds_their_tasks_back_and_not_others(control_plane, two_workers, user_namespace, run_operator):
    alice, bob = user_namespace("alice"), user_namespace("bob")
    onboard = subprocess.run([sys.executable, "-m", "argus.cli", "onboard", "alice", "--namespace", alice, "--gpu-quota", "2",
                              "--kubeconfig", str(control_plane.kubeconfig)], capture_output=True, text=True, timeout=60)
    assert onboard.returncode == 0 and f"namespace/{alice} annotated argus.io/gpu-quota=2" in onboard.stdout, onboard.stdout + onboard.stderr
    op = run_operator([alice, bob], ray_address=two_workers.dashboard_url, max_running=4)
    apply_text(control_plane, alice, sized("a1", per_node=2))
    wait_phase(control_plane, alice, "a1", ("Submitted", "Running"), timeout=60, op=op)
    apply_text(control_plane, alice, sized("a2", per_node=1))
    apply_text(control_plane, bob, sized("b1", per_node=1))
    wait_phase(control_plane, bob, "b1", ("Submitted", "Running"), timeout=60, op=op)  # behind a2 in time, not held by it
    a2 = wait_for(lambda: (s := status_of(control_plane, alice, "a2")).get("reason") == "QuotaExceeded" and s, 60, "a2 to wait for the quota")
    assert a2["message"] == "waiting: its 1 GPUs would take user alice over the 2 GPUs of its quota"
    queue = subprocess.run([sys.executable, "-m", "argus.cli", "queue", "-o", "json", "--kubeconfig", str(control_plane.kubeconfig)],
                           capture_output=True, text=True, timeout=60)
    assert queue.returncode == 0, queue.stderr
    shown = json.loads(queue.stdout)
    assert [(r["namespace"], r["name"], r["reason"]) for r in shown["queue"] if r["namespace"] in (alice, bob)] == [(alice, "a2", "QuotaExceeded")]
    users = {u["user"]: u for u in shown["users"]}
    assert users["alice"]["quota"] == 2 and users["alice"]["gpusInUse"] >= 2 and users["bob"]["gpusInUse"] >= 1
    control_plane.kubectl("patch", "argustask", "a1", "-n", alice, "--type=merge", "-p", '{"spec":{"cancel":true}}')
    wait_phase(control_plane, alice, "a2", ("Submitted", "Running"), timeout=60, op=op)  # alice's GPUs came free
    for ns, name in ((alice, "a2"), (bob, "b1")):
        control_plane.kubectl("patch", "argustask", name, "-n", ns, "--type=merge", "-p", '{"spec":{"cancel":true}}')
