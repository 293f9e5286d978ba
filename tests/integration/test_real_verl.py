"""Real verl, end to end, through the operator: no stand-in.

A Ray cluster of its own runs the verl runtime's Ray (the oracle environment: verl 0.9.1,
torch, transformers; argus_testbed.realverl), advertising logical GPUs; its nodes carry
verl's plugin hook (VERL_USE_EXTERNAL_MODULES=argus_verl_cpu) as a CPU worker image would.
The operator's verl snapshot is the release's own ``verl/`` with the plugins beside it.
alice's home holds a tiny model, SFT and RL data and her reward function. The tasks are the
shipped examples (examples/real-verl/), applied as alice would.

What is proven against real verl here:
- an SFT task (torchrun, verl.trainer.sft_trainer) and a GRPO task (main_ppo, alice's
  custom reward function) reach Succeeded;
- status.progress shows verl's own step and total, read from the job's real log;
- the reward function's own output shows in ``argus logs``;
- checkpoints land in alice's home;
- a cancelled run's checkpoint is resumed by the next task with the same checkpoint folder
  (status.progress.resumedFromStep is verl's "Resuming from ...").

Measured here: the cluster starts in about 20 s; SFT about 1 min, the two
GRPO runs about 4 min, on the 2-core machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from argus_testbed import RayCluster, realverl
from argus_testbed.harness import EXAMPLES, OperatorProcess, apply_text, get_task, make_private_tree, wait_for, wait_phase
from argus_testbed.private_tree import login_home

# Each test trains for minutes (RUN_TIMEOUT a run): room for other test workers beside it.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.real_verl, pytest.mark.timeout(2400)]

REAL_EXAMPLES = EXAMPLES / "real-verl"
RUN_TIMEOUT = 900  # seconds; a GRPO run takes 2-5 minutes here, more on a loaded machine


@pytest.fixture(scope="module")
def real_ray(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    python = realverl.runtime()
    home = login_home(tmp_path_factory.mktemp("real-ray-home"), python_dir=python.parent, standin=False)
    cluster = RayCluster.start(tmp_path_factory.mktemp("real-ray"), python=python, worker_cpus=realverl.WORKER_CPUS,
                               worker_gpus=realverl.WORKER_GPUS, object_store_bytes=512 * 1024 * 1024,
                               extra_env={"HOME": str(home), **realverl.node_env()})
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def real_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_private_tree(tmp_path_factory.mktemp("real-private"), users=("alice",))
    realverl.lay_out_home(root / "users" / "alice")
    return root


@pytest.fixture
def real_operator(control_plane: Any, real_ray: RayCluster, real_root: Path, user_namespace: Any,
                  tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[str, OperatorProcess]]:
    ns = user_namespace("alice", prefix="real")
    op = OperatorProcess.start(tmp_path / "operator", kubeconfig=control_plane.kubeconfig, ray_address=real_ray.dashboard_url,
                               root=real_root, namespaces=[ns], verl_code_path=realverl.snapshot(), poll_interval=1.0,
                               extra_args=["--verl-plugin-rollout", "hf"])
    try:
        yield ns, op
    finally:
        op.stop()
        failed = getattr(request.node, "rep_call", None)
        if failed is not None and failed.failed:
            print(f"\n--- operator (tail) ---\n{op.log_tail(80)}\n--- ray worker (tail) ---\n{real_ray.log_tail(40)}")


def example(name: str, *, rename: str | None = None, replace: dict[str, str] | None = None) -> str:
    doc = yaml.safe_load((REAL_EXAMPLES / name).read_text())
    if rename:
        doc["metadata"]["name"] = rename
    for old, new in (replace or {}).items():
        assert old in doc["spec"]["command"], old
        doc["spec"]["command"] = doc["spec"]["command"].replace(old, new)
    return json.dumps(doc)


def argus_logs(control_plane: Any, ns: str, name: str) -> str:
    done = subprocess.run([sys.executable, "-m", "argus.cli", "logs", name, "-n", ns, "--kubeconfig", str(control_plane.kubeconfig),
                           "--direct-ray"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_sft_trains_with_real_verl(control_plane: Any, real_operator: tuple[str, OperatorProcess], real_root: Path) -> None:
    ns, op = real_operator
    apply_text(control_plane, ns, example("sft.yaml"))
    task = wait_phase(control_plane, ns, "real-sft", ("Succeeded", "Failed", "Rejected"), timeout=RUN_TIMEOUT, op=op)
    status = task["status"]
    assert status["phase"] == "Succeeded", status
    # 32 rows, a batch of 8, two epochs: verl's own total, and its last step, read from the real log.
    assert status["progress"]["totalSteps"] == 8 and status["progress"]["step"] == 8, status["progress"]
    assert status["progress"]["summary"] == "8/8"
    ckpt = real_root / "users" / "alice" / "checkpoints" / "real-sft"
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "8"
    assert (ckpt / "global_step_8" / "huggingface" / "config.json").is_file()
    logs = argus_logs(control_plane, ns, "real-sft")
    assert "train/loss:" in logs and "Total training steps: 8" in logs


def test_grpo_with_custom_reward_checkpoints_and_resumes(control_plane: Any, real_operator: tuple[str, OperatorProcess],
                                                         real_root: Path) -> None:
    ns, op = real_operator
    ckpt = real_root / "users" / "alice" / "checkpoints" / "real-grpo"
    tracker = ckpt / "latest_checkpointed_iteration.txt"
    # First run: more steps than it will get; cancelled once verl has checkpointed a step.
    apply_text(control_plane, ns, example("grpo.yaml", replace={"trainer.total_training_steps=3": "trainer.total_training_steps=20"}))

    def stepped() -> dict[str, Any] | None:
        status = get_task(control_plane, ns, "real-grpo").get("status", {})
        assert status.get("phase") not in ("Failed", "Rejected", "Succeeded"), status
        progress = status.get("progress") or {}
        return status if (progress.get("step") or 0) >= 1 and tracker.is_file() else None

    # Cancelled as soon as a step is checkpointed: each step more is half a minute of CPU.
    running = wait_for(stepped, RUN_TIMEOUT, "the first GRPO run past step 1, with a checkpoint",
                       on_timeout=lambda: op.log_tail(60))
    assert running["phase"] == "Running" and running["progress"]["totalSteps"] == 20, running
    assert running["progress"].get("resumedFromStep") is None
    # alice's reward function ran inside verl: its own print is in the job's log.
    assert realverl.REWARD_MARKER in argus_logs(control_plane, ns, "real-grpo")

    control_plane.kubectl("patch", "argustask", "real-grpo", "-n", ns, "--type=merge", "-p", '{"spec":{"cancel":true}}')
    stopped = wait_phase(control_plane, ns, "real-grpo", ("Stopped", "Succeeded", "Failed"), timeout=180, op=op)
    assert stopped["status"]["phase"] == "Stopped", stopped["status"]
    saved = int(tracker.read_text().strip())
    assert saved >= 1 and (ckpt / f"global_step_{saved}" / "actor").is_dir()

    # The next task writes to the same checkpoint folder: verl resumes from the saved step and
    # runs the one after it; the operator reads verl's resume line.
    apply_text(control_plane, ns, example("grpo.yaml", rename="real-grpo-resumed",
                                          replace={"trainer.total_training_steps=3": f"trainer.total_training_steps={saved + 1}"}))
    task = wait_phase(control_plane, ns, "real-grpo-resumed", ("Succeeded", "Failed", "Rejected"), timeout=RUN_TIMEOUT, op=op)
    status = task["status"]
    assert status["phase"] == "Succeeded", status
    progress = status["progress"]
    assert (progress["resumedFromStep"], progress["step"], progress["totalSteps"]) == (saved, saved + 1, saved + 1), progress
    assert tracker.read_text().strip() == str(saved + 1)
