"""The basic spec's template: from a few fields to the verl command a v3.0 user got.

ppo and grpo run ``python3 -m verl.trainer.main_ppo`` (grpo sets the GRPO estimator, n
responses per prompt and the KL loss, and no critic); sft runs ``torchrun ... -m
verl.trainer.fsdp_sft_trainer``. The output is a plain advanced command, checked by the
same policy as any user's command.
"""

from __future__ import annotations

import posixpath
import shlex

from .spec import ArgusTaskSpec


def _render(head: list[str], overrides: list[tuple[str, object]]) -> str:
    lines = [" ".join(head)]
    for key, value in overrides:
        if value is None:
            continue
        if isinstance(value, bool):
            value = str(value)
        lines.append(shlex.quote(f"{key}={value}"))
    return " \\\n  ".join(lines)


def basic_command(spec: ArgusTaskSpec, *, home: str, experiment: str) -> str:
    """The verl command for a basic spec whose paths are already expanded."""
    project = spec.project_name or "argus"
    experiment = spec.experiment_name or experiment
    checkpoints = posixpath.join(home, "checkpoints", project, experiment)
    common: list[tuple[str, object]] = [
        ("data.train_files", spec.train_file),
        ("data.val_files", spec.val_file),
        ("data.train_batch_size", spec.train_batch_size),
    ]
    trainer: list[tuple[str, object]] = [
        ("trainer.logger", "console"),
        ("trainer.project_name", project),
        ("trainer.experiment_name", experiment),
        ("trainer.nnodes", spec.nnodes),
        ("trainer.n_gpus_per_node", spec.n_gpus_per_node),
        ("trainer.total_epochs", spec.total_epochs or 1),
        ("trainer.save_freq", spec.save_freq),
        ("trainer.test_freq", spec.test_freq),
        ("trainer.default_local_dir", checkpoints),
    ]
    if spec.workload == "sft":
        head = [
            "torchrun", "--standalone", f"--nnodes={spec.nnodes}", f"--nproc_per_node={spec.n_gpus_per_node}",
            "-m", "verl.trainer.fsdp_sft_trainer",
        ]
        return _render(head, common + [
            ("model.partial_pretrain", spec.model_id),
            ("optim.lr", spec.learning_rate),
        ] + trainer)

    grpo = spec.workload == "grpo"
    overrides = [("algorithm.adv_estimator", "grpo" if grpo else "gae")] + common + [
        ("data.max_prompt_length", spec.max_prompt_length or 512),
        ("data.max_response_length", spec.max_response_length or 512),
        ("actor_rollout_ref.model.path", spec.model_id),
        ("actor_rollout_ref.actor.optim.lr", spec.learning_rate or 1e-6),
        ("actor_rollout_ref.rollout.name", "vllm"),
    ]
    if grpo:
        overrides += [
            ("actor_rollout_ref.rollout.n", spec.rollout_n or 5),
            ("actor_rollout_ref.actor.use_kl_loss", True),
            ("actor_rollout_ref.actor.kl_loss_coef", 0.001),
            ("actor_rollout_ref.actor.kl_loss_type", "low_var_kl"),
            ("algorithm.use_kl_in_reward", False),
        ]
    else:
        overrides += [("critic.model.path", spec.model_id), ("critic.optim.lr", 1e-5)]
    if spec.custom_reward_path:
        overrides += [
            ("custom_reward_function.path", spec.custom_reward_path),
            ("custom_reward_function.name", spec.custom_reward_name or "compute_score"),
        ]
    overrides += trainer + [("+ray_kwargs.ray_init.address", "auto")]
    return _render(["python3", "-m", "verl.trainer.main_ppo"], overrides)
