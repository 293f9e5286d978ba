"""Preemption on the real API server and a real Ray cluster (issue 38): with --preemption, an
urgent task of higher priority takes the GPUs a running one holds, which is stopped in Ray,
goes back to the queue as Preempted and, once the urgent task has ended, resumes from its
checkpoint as attempt 2.

The trainer is the verl stand-in with ``VERL_STANDIN_PLACEMENT_GROUP``: it holds its GPUs in
Ray placement groups as verl's resource pools do, so Ray shows where they are, as it does for
real verl. Its own Ray cluster (one worker, 2 GPUs), so that the GPUs are this test's alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from argus_testbed import RayCluster
from argus_testbed.harness import advanced_task, apply_text, get_task, ppo_command, wait_for, wait_phase

pytestmark = pytest.mark.integration

SAVE_FREQ = 5


@pytest.fixture(scope="module")
def gpu_ray(tmp_path_factory: pytest.TempPathFactory, ray_cluster_options: dict[str, Any]) -> Any:
    env = {**ray_cluster_options.get("extra_env", {}), "VERL_STANDIN_PLACEMENT_GROUP": "1", "VERL_STANDIN_STEP_SECONDS": "0.3"}
    rc = RayCluster.start(Path(tmp_path_factory.mktemp("ray-preempt")), worker_gpus=2, **{**ray_cluster_options, "extra_env": env})
    yield rc
    rc.stop()


def status(cp: Any, ns: str, name: str) -> dict[str, Any]:
    return get_task(cp, ns, name).get("status") or {}


def test_an_urgent_task_takes_the_gpus_and_the_victim_resumes_from_its_checkpoint(control_plane, gpu_ray, user_namespace, run_operator):
    ns = user_namespace("alice")
    op = run_operator([ns], ray_address=gpu_ray.dashboard_url, extra_args=["--preemption", "--progress-interval", "1", "--poll-interval", "1"])
    long_run = ppo_command(steps=2000, gpus=2, extra=f"trainer.save_freq={SAVE_FREQ}")
    apply_text(control_plane, ns, advanced_task("long", long_run, gpus=2))
    wait_for(lambda: (status(control_plane, ns, "long").get("progress") or {}).get("step", 0) > SAVE_FREQ + 1, 120,
             "the long run to pass a checkpoint", on_timeout=op.log_tail)
    first = status(control_plane, ns, "long")["rayJob"]["submissionId"]

    apply_text(control_plane, ns, advanced_task("urgent", ppo_command(steps=3, gpus=2), gpus=2, priority=10))
    # While the victim's GPUs are on their way, the urgent task names it (argus queue's PREEMPTS).
    wait_for(lambda: status(control_plane, ns, "urgent").get("preempts") == [f"{ns}/long"], 60,
             "the urgent task to name its victim in status.preempts", interval=0.1, on_timeout=op.log_tail)
    # The victim stops in Ray and goes back to the queue as Preempted, its attempt no restart.
    requeued = wait_for(lambda: (s := status(control_plane, ns, "long")).get("phase") == "Queued" and s.get("attempt") == 2 and s, 90,
                        "the long run to be preempted and queued again", on_timeout=op.log_tail)
    assert requeued["reason"] == "Preempted" and f"{ns}/urgent took attempt 1's GPUs" in requeued["message"], requeued
    assert [(a["attempt"], a["outcome"]) for a in requeued["attempts"]] == [(1, "Preempted")]
    from ray.job_submission import JobSubmissionClient
    assert JobSubmissionClient(gpu_ray.dashboard_url).get_job_info(first).status.value == "STOPPED"
    events = control_plane.kubectl("get", "events", "-n", ns, "--field-selector", "involvedObject.name=long,reason=Preempted",
                                   "-o", "jsonpath={.items[*].message}").stdout
    assert f"preempted for {ns}/urgent (priority 10, above its own 0)" in events, events

    # The urgent task runs and ends; the victim's attempt 2 then resumes from its checkpoint.
    done = wait_phase(control_plane, ns, "urgent", ("Succeeded", "Failed"), timeout=120, op=op)["status"]
    assert done["phase"] == "Succeeded" and "preempts" not in done, done
    resumed = wait_for(lambda: (s := status(control_plane, ns, "long")).get("phase") == "Running"
                       and (s.get("progress") or {}).get("resumedFromStep") is not None and s, 120,
                       "attempt 2 to run and resume from the checkpoint", on_timeout=op.log_tail)
    assert resumed["attempt"] == 2 and resumed["rayJob"]["submissionId"] == first + "-a2"
    step = resumed["progress"]["resumedFromStep"]
    assert step > 0 and step % SAVE_FREQ == 0
    control_plane.kubectl("patch", "argustask", "long", "-n", ns, "--type", "merge", "-p", '{"spec":{"cancel":true}}')
    assert wait_phase(control_plane, ns, "long", ("Stopped",), timeout=60, op=op)["status"]["reason"] == "Cancelled"
