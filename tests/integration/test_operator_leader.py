"""Two operator replicas never both act: leader election on a Lease. Only one runs the
queue (max running 1 holds across both), and when the leader is killed the other takes
over and finishes the work."""

from __future__ import annotations

import itertools
import json

import pytest

from argus_testbed.harness import advanced_task, apply_text, get_task, ppo_command, ray_jobs_for, wait_for

pytestmark = pytest.mark.integration


def phases(cp, ns):
    items = json.loads(cp.kubectl("get", "argustasks", "-n", ns, "-o", "json").stdout)["items"]
    return {i["metadata"]["name"]: (i.get("status") or {}).get("phase") for i in items}


def test_two_replicas_one_leader_and_failover(control_plane, ray_cluster, user_namespace, run_operator):
    ns = user_namespace("alice")
    flags = ["--leader-elect", "--leader-election-namespace", ns, "--leader-lease-seconds", "4"]
    ops = [run_operator([ns], max_running=1, extra_args=flags) for _ in range(2)]
    for i in range(3):
        apply_text(control_plane, ns, advanced_task(f"t{i}", ppo_command(steps=40)))
    leader = wait_for(lambda: next((op for op in ops if "is now the leader" in op.log_path.read_text()), None), 30, "a leader")
    wait_for(lambda: "Running" in phases(control_plane, ns).values(), 60, "a task to run")
    leader.kill()
    follower = next(op for op in ops if op is not leader)
    wait_for(lambda: "is now the leader" in follower.log_path.read_text(), 30, "the follower to take over")
    wait_for(lambda: set(phases(control_plane, ns).values()) == {"Succeeded"}, 180, "all tasks to succeed after the failover",
             on_timeout=lambda: follower.log_tail())
    lease = json.loads(control_plane.kubectl("get", "lease", "argus-operator", "-n", ns, "-o", "json").stdout)
    assert lease["spec"]["leaseTransitions"] >= 1
    assert get_task(control_plane, ns, "t0")["status"]["phase"] == "Succeeded"
    # Never two at once, although each replica alone would allow one: Ray's own recorded
    # start and end times (ms) of the three jobs never overlap, and there are exactly three.
    jobs = sorted(ray_jobs_for(ray_cluster.dashboard_url, ns), key=lambda j: j.start_time)
    assert len(jobs) == 3, [j.submission_id for j in jobs]
    for earlier, later in itertools.pairwise(jobs):
        assert earlier.end_time <= later.start_time, [(j.submission_id, j.start_time, j.end_time) for j in jobs]
