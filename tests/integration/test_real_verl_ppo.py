"""Real verl PPO with a critic and a KL loss, through the operator (the slower real-verl suite).

test_real_verl.py trains GRPO without KL: an actor and a rollout only. PPO as verl's own
examples run it adds two models that GRPO-without-KL never builds: a critic (GAE's value
model, loaded by verl's ``load_valuehead_model``) and the reference policy (for the KL loss,
sharded with FSDP2's CPU offload). On CPU each needs a shim of the testbed's plugins
(hack/verl-cpu/argus_verl_cpu/cputorch.py: FlashAttention 2, hard-coded by verl for the
critic, made ``sdpa``; the reference's offload made to pin no memory), loaded through verl's
own hook like the rest; nothing inside verl is edited.

alice applies the shipped example (examples/real-verl/ppo.yaml: main_ppo with
``algorithm.adv_estimator=gae``, ``critic.*``, ``actor_rollout_ref.actor.use_kl_loss=True``,
her own reward function) on the real-verl Ray cluster (one logical GPU, which the actor,
critic and reference share). What is proven against real verl:
- the task reaches Succeeded, and ``status.progress`` shows verl's own step and total;
- the job's log, read with ``argus logs``, holds the critic's and the KL loss's metrics on
  verl's step lines, and alice's reward function's own output;
- the checkpoint in alice's home holds the actor and the critic, at every step
  (``trainer.save_freq=1``).
A resumed PPO run (critic and all) is in the progress reader's recorded logs
(tests/unit/verl_logs/0.9.1/main_ppo-ppo-critic-kl*.log); this module trains once.

Measured: the module alone 4.5 min wall (2 cores, other work beside it, load average 5-13);
265 s of it the test, the Ray cluster's start included.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from argus_testbed import realverl
from argus_testbed.harness import apply_text, argus_logs, wait_phase
from argus_testbed.realverl import RUN_TIMEOUT, example

# The slower suite (tests/conftest.py): run by `hack/test.sh -m slower`, not by CI's run.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.real_verl, pytest.mark.slower, pytest.mark.timeout(1800)]

STEPS = 2  # the example's trainer.total_training_steps


def step_metrics(log: str, step: int) -> dict[str, str]:
    """The key:value pairs of verl's line for ``step`` (the last one printed)."""
    lines = re.findall(rf"(?:^|\x1b\[0m )step:{step} - (.*)$", log, re.M)
    assert lines, f"no line for step {step} in the log"
    return dict(pair.split(":", 1) for pair in lines[-1].split(" - ") if ":" in pair)


def test_ppo_with_a_critic_and_a_kl_loss_trains_and_checkpoints_both(control_plane: Any, real_operator_in: Any, real_root: Path) -> None:
    ns, op = real_operator_in("ppo")
    apply_text(control_plane, ns, example("ppo.yaml"))
    task = wait_phase(control_plane, ns, "real-ppo", ("Succeeded", "Failed", "Rejected"), timeout=RUN_TIMEOUT, op=op)
    s = task["status"]
    assert s["phase"] == "Succeeded", s
    assert (s["progress"]["step"], s["progress"]["totalSteps"]) == (STEPS, STEPS), s["progress"]

    log = argus_logs(control_plane, ns, "real-ppo")
    metrics = step_metrics(log, STEPS)
    # The critic trained (its value loss), the actor's loss held the KL term against the reference.
    for key in ("critic/vf_loss", "critic/vpred_mean", "actor/kl_loss", "actor/pg_loss", "critic/score/mean"):
        assert key in metrics and float(metrics[key]) == float(metrics[key]), (key, metrics.get(key))
    assert float(metrics["actor/kl_coef"]) == pytest.approx(0.01)
    assert realverl.REWARD_MARKER in log

    ckpt = real_root / "users" / "alice" / "checkpoints" / "real-ppo"
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == str(STEPS)
    for step in range(1, STEPS + 1):
        assert (ckpt / f"global_step_{step}" / "actor").is_dir() and (ckpt / f"global_step_{step}" / "critic").is_dir(), step
