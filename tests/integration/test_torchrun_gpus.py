"""torchrun GPUs counted by Ray (issue 22, item 4), on a real Ray cluster whose only worker
declares 1 GPU: a torchrun launch reserves its GPUs through the entrypoint
(``entrypoint_num_gpus``), so Ray itself places its driver on a node with that many free and
counts them while it runs; two 1-GPU torchrun tasks never run at once, whether they come
through the operator's queue or go to Ray straight from the plan the operator submits.

The jobs are the verl stand-in's SFT trainer under the stand-in torchrun, made to last a few
seconds (``VERL_STANDIN_STEP_SECONDS`` on this cluster's nodes)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from ray.job_submission import JobSubmissionClient

from argus.adapters.clock import SystemClock
from argus.adapters.ray import RayJobsClient
from argus.core.config import PlatformConfig
from argus.core.plan import validate_task
from argus.core.times import parse_time
from argus_testbed import RayCluster
from argus_testbed.harness import STANDIN, advanced_task, apply_text, get_task, wait_for, wait_phase

pytestmark = pytest.mark.integration

STEPS = 4
STEP_SECONDS = 1.0
# verl 0.9.x's SFT trainer (the testbed's verl snapshot is 0.9.1's tree).
SFT = ("torchrun --standalone --nnodes=1 --nproc_per_node=1 -m verl.trainer.sft_trainer "
       "data.train_files=$HOME/datasets/sft/train.parquet data.val_files=$HOME/datasets/sft/test.parquet "
       f"model.path=Qwen/Qwen2.5-0.5B-Instruct data.train_batch_size=8 trainer.total_training_steps={STEPS}")


@pytest.fixture(scope="module")
def one_gpu(tmp_path_factory: pytest.TempPathFactory, ray_cluster_options: dict[str, Any]) -> RayCluster:
    """A head and one worker that declares 1 GPU (Ray's accounting needs no real one)."""
    options = {**ray_cluster_options, "extra_env": {**ray_cluster_options["extra_env"], "VERL_STANDIN_STEP_SECONDS": str(STEP_SECONDS)}}
    rc = RayCluster.start(Path(tmp_path_factory.mktemp("ray-one-gpu")), worker_gpus=1, **options)
    yield rc
    rc.stop()


def gpus_used(cluster: RayCluster) -> dict[str, float]:
    return {n.node_id: n.gpus_used or 0.0 for n in asyncio.run(RayJobsClient(cluster.dashboard_url, monotonic=SystemClock().monotonic, threads=1).nodes())}


def interval(status: dict[str, Any]) -> tuple[float, float]:
    job = status["rayJob"]
    start, end = parse_time(job["startTime"]), parse_time(job["endTime"])
    assert start is not None and end is not None, job
    return start.timestamp(), end.timestamp()


def test_ray_itself_holds_the_second_driver_back_until_the_first_ends(one_gpu: RayCluster, argus_root: Path) -> None:
    """No queue: the operator's own plans, submitted by the operator's Ray adapter. Ray
    places the first driver on the 1-GPU worker and keeps the second PENDING while the first
    holds the GPU."""
    (worker,) = one_gpu.worker_node_ids
    config = PlatformConfig(root=str(argus_root), verl_code_path=str(STANDIN))
    ns = f"raw-{uuid.uuid4().hex[:6]}"
    plans = []
    for name in ("first", "second"):
        manifest = json.loads(advanced_task(name, SFT, workload="sft"))
        manifest["metadata"].update(namespace=ns, uid=str(uuid.uuid4()))
        verdict = validate_task(manifest, "alice", config)
        assert verdict.plan is not None, verdict.error_lines()
        assert verdict.plan.entrypoint_num_gpus == 1
        plans.append(verdict.plan)
    client = RayJobsClient(one_gpu.dashboard_url, monotonic=SystemClock().monotonic, threads=2)
    ray = JobSubmissionClient(one_gpu.dashboard_url)
    first, second = (p.submission_id for p in plans)
    try:
        assert asyncio.run(client.submit(plans[0]))
        wait_for(lambda: ray.get_job_info(first).status.value == "RUNNING", 60, "the first driver to run")
        info = ray.get_job_info(first)
        assert info.driver_node_id == worker and info.metadata["argus.io/driver-gpus"] == "1"
        wait_for(lambda: gpus_used(one_gpu).get(worker) == 1.0, 30, "Ray to report the first driver's GPU in use")
        assert asyncio.run(client.submit(plans[1]))
        # The second waits in Ray for the GPU for as long as the first runs.
        while ray.get_job_info(first).status.value == "RUNNING":
            assert ray.get_job_info(second).status.value == "PENDING"
            time.sleep(0.3)
        assert ray.get_job_info(first).status.value == "SUCCEEDED", ray.get_job_logs(first)[-2000:]
        wait_for(lambda: ray.get_job_info(second).status.value in ("RUNNING", "SUCCEEDED"), 60, "the second driver to start")
        wait_for(lambda: ray.get_job_info(second).status.value == "SUCCEEDED", 60, "the second to finish")
        assert ray.get_job_info(second).driver_node_id == worker
    finally:
        for sid in (first, second):
            try:
                ray.stop_job(sid)
            except Exception:  # noqa: BLE001 - never submitted, or already gone
                pass


def test_two_one_gpu_torchrun_tasks_on_a_one_gpu_worker_do_not_run_at_once(control_plane, one_gpu: RayCluster, user_namespace,
                                                                            run_operator) -> None:
    (worker,) = one_gpu.worker_node_ids
    ns = user_namespace("alice")
    op = run_operator([ns], ray_address=one_gpu.dashboard_url, max_running=4)
    apply_text(control_plane, ns, advanced_task("first", SFT, workload="sft"))
    wait_phase(control_plane, ns, "first", ("Submitted", "Running"), timeout=60, op=op)
    apply_text(control_plane, ns, advanced_task("second", SFT, workload="sft"))
    wait_phase(control_plane, ns, "first", "Running", timeout=60, op=op)
    # Ray counts the driver's GPU on the worker (the operator's submission reserved it).
    wait_for(lambda: gpus_used(one_gpu).get(worker) == 1.0, 30, "Ray to report the first driver's GPU in use", on_timeout=op.log_tail)
    # While first runs, second waits in the queue for the GPU (not in Ray: nothing submitted).
    second = wait_for(lambda: (s := get_task(control_plane, ns, "second").get("status") or {}).get("reason") == "Queued" and s,
                      30, "second to say what it waits for", on_timeout=op.log_tail)
    assert second["phase"] == "Queued"
    assert second["message"].startswith("waiting for 1 worker node(s) with 1 free GPUs each;"), second
    for name in ("first", "second"):
        wait_phase(control_plane, ns, name, "Succeeded", timeout=120, op=op)
    first_status, second_status = (get_task(control_plane, ns, n)["status"] for n in ("first", "second"))
    (a_start, a_end), (b_start, _) = interval(first_status), interval(second_status)
    assert a_end <= b_start, (first_status["rayJob"], second_status["rayJob"])
    assert a_end - a_start >= STEPS * STEP_SECONDS
    ray = JobSubmissionClient(one_gpu.dashboard_url)
    for status in (first_status, second_status):
        assert status["rayJob"]["driverNodeId"] == worker
        info = ray.get_job_info(status["rayJob"]["submissionId"])
        assert info.metadata["argus.io/driver-gpus"] == "1"
        # The shared Hugging Face cache reaches the job (item 5).
        assert info.runtime_env["env_vars"]["HF_HOME"] == str(Path(op.argv[op.argv.index("--root") + 1]) / "hf")
