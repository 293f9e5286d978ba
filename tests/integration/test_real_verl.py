"""Real verl, end to end, through the operator: no stand-in; and preemption (issue 38) with it.

A Ray cluster of its own runs the verl runtime's Ray (the oracle environment: verl 0.9.1,
torch, transformers; argus_testbed.realverl), advertising one logical GPU: too few for two
tasks at once. Its nodes carry verl's plugin hook (VERL_USE_EXTERNAL_MODULES=argus_verl_cpu)
as a CPU worker image would. The operator runs with --preemption; its verl snapshot is the
release's own ``verl/`` with the plugins beside it. alice's home holds a tiny model, SFT and
RL data and her reward function. The tasks are the shipped examples (examples/real-verl/),
applied as alice would.

One story, so that each real run (minutes of CPU) proves several things: a GRPO task
(priority 0, checkpointing every step) trains; once verl has checkpointed a step, an SFT
task of priority 10 arrives and takes its GPU; the SFT trains to the end; the GRPO task's
second attempt then resumes from its checkpoint and trains to the end. What is proven
against real verl here:
- the operator sees real verl's own Ray placement groups as the task's GPUs (its preemptor
  takes no task Ray does not show holding GPUs);
- the GRPO task goes Running/Preempting (status.preemptedBy), its Ray job is stopped and
  gone (STOPPED in Ray's job list; none of its actors or placement groups left), then it is
  Queued with reason Preempted naming the SFT task; the Event says the steps it loses; its
  attempts list says Preempted, and it is no restart (restartPolicy OnFailure with
  backoffLimit 0 would fail it otherwise);
- the SFT task (torchrun, verl.trainer.sft_trainer) and the GRPO task (main_ppo, alice's
  custom reward function) reach Succeeded;
- status.progress shows verl's own step and total, read from the job's real log, and the
  GRPO task's attempt 2 resumed from the step its attempt 1 checkpointed (resumedFromStep is
  verl's "Resuming from ...");
- the reward function's own output shows in ``argus logs``;
- checkpoints land in alice's home.
Not run against real verl any more (each real GRPO start is minutes of CPU): a cancelled
run's checkpoint resumed by a new task in the same folder. Real verl's resume is the one
proven above; the operator's other ways to a resumed attempt run with the stand-in (suspend
and resume: test_operator_runs.py; a Ray head restart: test_operator_ray_outage.py), as do the
preemption policy's finer
points (test_operator_preemption.py and the unit tests).

Measured (2-core machine, other work beside it, load average 5-19): the module 6.6 min wall
and 97 s of CPU (every process under it, Ray's included), where the SFT test and the
cancel-and-resume GRPO test it replaces took 6.5 min and 98 s (load average 4-10): the same
three real runs. The preemption lands about 3 s after the first checkpoint; a GRPO step of
the tiny model takes 1-3 s, a start minutes (docs/testing.md).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from argus_testbed import RayCluster, realverl
from argus_testbed.controlplane import find_kubectl
from argus_testbed.harness import OperatorProcess, apply_text, argus_logs, get_task, wait_for, wait_phase
from argus_testbed.realverl import RUN_TIMEOUT, example

# The story trains for minutes (RUN_TIMEOUT a run): room for other test workers beside it.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.real_verl, pytest.mark.timeout(2400)]

# The GRPO task's trainer.total_training_steps (the example's 3, raised; trainer.save_freq=1).
# A step of the tiny model takes 1-3 s here, its start minutes: the steps after the first
# checkpoint are room for the preemption (about 3 s) to land before the run ends.
GRPO_STEPS = 10
URGENT = 10  # the SFT task's priority, above the GRPO task's 0


@pytest.fixture
def real_operator(real_operator_in: Any) -> tuple[str, OperatorProcess]:
    return real_operator_in("real", "--preemption")


def left_in_ray(ray: RayCluster, job_id: str) -> list[str]:
    """What a Ray job still holds: its alive actors and its created placement groups."""
    from ray.util.state import list_actors, list_placement_groups
    actors = list_actors(address=ray.dashboard_url, filters=[("job_id", "=", job_id), ("state", "=", "ALIVE")], raise_on_missing_output=False)
    groups = list_placement_groups(address=ray.dashboard_url, filters=[("state", "=", "CREATED")], detail=True, raise_on_missing_output=False)
    return ([f"actor {a.class_name}" for a in actors]
            + [f"placement group {g.placement_group_id}" for g in groups if g.creator_job_id == job_id])


def status(control_plane: Any, ns: str, name: str) -> dict[str, Any]:
    return get_task(control_plane, ns, name).get("status") or {}


def grpo_checkpointed(control_plane: Any, ns: str, tracker: Path, op: OperatorProcess) -> dict[str, Any]:
    """The GRPO task's status once verl has checkpointed a step and the operator has read one
    (the checkpoint file first: it is read without the API server)."""
    def stepped() -> dict[str, Any] | None:
        if not tracker.is_file():
            return None
        s = status(control_plane, ns, "real-grpo")
        assert s.get("phase") not in ("Failed", "Rejected", "Succeeded"), s
        return s if ((s.get("progress") or {}).get("step") or 0) >= 1 else None
    return wait_for(stepped, RUN_TIMEOUT, "the GRPO run past step 1, with a checkpoint", interval=0.2, on_timeout=lambda: op.log_tail(60))


def queued_again(control_plane: Any, ns: str) -> dict[str, Any] | None:
    s = status(control_plane, ns, "real-grpo")
    assert s.get("phase") not in ("Succeeded", "Failed"), f"the GRPO run ended before it was preempted: {s}"
    return s if s.get("phase") == "Queued" else None


def watch_phases(control_plane: Any, ns: str, name: str) -> subprocess.Popen[str]:
    """Every status write of a task as the API server streams it (a watch misses none): the
    Preempting state lasts only as long as Ray takes to stop the job."""
    return subprocess.Popen([find_kubectl(), f"--kubeconfig={control_plane.kubeconfig}", "get", "argustask", name, "-n", ns, "-w",
                             "-o", "jsonpath={.status.phase}/{.status.reason}/{.status.preemptedBy}{\"\\n\"}"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def test_urgent_sft_preempts_grpo_which_resumes_from_its_checkpoint(control_plane: Any, real_operator: tuple[str, OperatorProcess],
                                                                    real_root: Path, real_ray: RayCluster) -> None:
    ns, op = real_operator
    ckpt = real_root / "users" / "alice" / "checkpoints" / "real-grpo"
    tracker = ckpt / "latest_checkpointed_iteration.txt"
    # A preemption is no restart: with OnFailure and no retries left, a counted one would fail it.
    apply_text(control_plane, ns, example("grpo.yaml", spec={"restartPolicy": "OnFailure", "backoffLimit": 0},
                                          replace={"trainer.total_training_steps=3": f"trainer.total_training_steps={GRPO_STEPS}"}))
    running = grpo_checkpointed(control_plane, ns, tracker, op)
    assert running["phase"] == "Running" and running["progress"]["totalSteps"] == GRPO_STEPS, running
    assert running["progress"].get("resumedFromStep") is None
    first = running["rayJob"]["submissionId"]
    from ray.job_submission import JobSubmissionClient
    jobs = JobSubmissionClient(real_ray.dashboard_url)
    job_id = jobs.get_job_info(first).job_id
    # Real verl's workers hold the GPU in placement groups of its own making, under the job's Ray job id:
    # what the operator reads as the task's GPUs (its preemptor takes only a task Ray shows holding some).
    assert job_id and any(w.startswith("placement group") for w in left_in_ray(real_ray, job_id)), "verl's workers hold no placement group"

    watch = watch_phases(control_plane, ns, "real-grpo")
    try:
        apply_text(control_plane, ns, example("sft.yaml", spec={"priority": URGENT}))
        requeued = wait_for(lambda: queued_again(control_plane, ns), 300, "the GRPO task to be preempted and queued again",
                            on_timeout=lambda: op.log_tail(60))
    finally:
        watch.terminate()
    seen = watch.communicate(timeout=30)[0].split()
    assert f"Running/Preempting/{ns}/real-sft" in seen, seen
    assert requeued["reason"] == "Preempted" and requeued["attempt"] == 2, requeued
    assert re.match(rf"preempted at step \d+: {ns}/real-sft took attempt 1's GPUs", requeued["message"]), requeued["message"]
    assert [(a["attempt"], a["outcome"], a.get("preemptedBy")) for a in requeued["attempts"]] == [(1, "Preempted", f"{ns}/real-sft")], \
        requeued["attempts"]
    assert jobs.get_job_info(first).status.value == "STOPPED"
    assert wait_for(lambda: not left_in_ray(real_ray, job_id), 60, "attempt 1's actors and placement groups to be gone",
                    on_timeout=lambda: str(left_in_ray(real_ray, job_id)))
    events = control_plane.kubectl("get", "events", "-n", ns, "--field-selector", "involvedObject.name=real-grpo,reason=Preempted",
                                   "-o", "jsonpath={.items[*].message}").stdout
    assert f"preempted for {ns}/real-sft (priority {URGENT}, above its own 0)" in events, events
    # trainer.save_freq=1: every step verl reported is checkpointed, so the preemption loses none.
    assert re.search(r"it loses 0 step\(s\) since its last checkpoint", events), events
    saved = int(tracker.read_text().strip())
    assert 1 <= saved < GRPO_STEPS and (ckpt / f"global_step_{saved}" / "actor").is_dir(), saved

    check_sft(control_plane, ns, op, real_root)

    # The GRPO task's attempt 2 starts by itself once the GPU is free, and resumes.
    task = wait_phase(control_plane, ns, "real-grpo", ("Succeeded", "Failed"), timeout=RUN_TIMEOUT, op=op)
    done = task["status"]
    assert done["phase"] == "Succeeded" and done["attempt"] == 2 and done["rayJob"]["submissionId"] == first + "-a2", done
    progress = done["progress"]
    assert (progress["resumedFromStep"], progress["step"], progress["totalSteps"]) == (saved, GRPO_STEPS, GRPO_STEPS), progress
    assert tracker.read_text().strip() == str(GRPO_STEPS)
    # verl's own resume line, and alice's reward function's own print (it ran inside verl), in the job's log.
    logs = argus_logs(control_plane, ns, "real-grpo")
    assert f"global_step_{saved}" in logs and "Resuming from" in logs and realverl.REWARD_MARKER in logs


def check_sft(control_plane: Any, ns: str, op: OperatorProcess, real_root: Path) -> None:
    """The urgent SFT task, on the GPU it took, trains to the end."""
    task = wait_phase(control_plane, ns, "real-sft", ("Succeeded", "Failed", "Rejected"), timeout=RUN_TIMEOUT, op=op)
    s = task["status"]
    assert s["phase"] == "Succeeded" and "preempts" not in s, s
    # 32 rows, a batch of 8, two epochs: verl's own total, and its last step, read from the real log.
    assert s["progress"]["totalSteps"] == 8 and s["progress"]["step"] == 8, s["progress"]
    assert s["progress"]["summary"] == "8/8"
    ckpt = real_root / "users" / "alice" / "checkpoints" / "real-sft"
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "8"
    assert (ckpt / "global_step_8" / "huggingface" / "config.json").is_file()
    logs = argus_logs(control_plane, ns, "real-sft")
    assert "train/loss:" in logs and "Total training steps: 8" in logs
