"""The basic spec's template: from a few fields to a verl command that verl accepts.

ppo and grpo run ``python3 -m verl.trainer.main_ppo`` (grpo sets the GRPO estimator, n
responses per prompt and the KL loss, and no critic); sft runs ``torchrun ... -m`` the SFT
trainer of the verl version in use: ``verl.trainer.sft_trainer`` (config
``sft_trainer_engine``, model in ``model.path``) from verl 0.9 on, ``verl.trainer.
fsdp_sft_trainer`` (model in ``model.partial_pretrain``) before. The output is a plain
advanced command, checked by the same policy as any user's command, with the spec's own
``overrides`` appended last; a key the spec overrides is left out of the template's words.

Every value verl requires before training is set from ``nGpusPerNode`` and ``nnodes`` (the
start-up checks of verlconfig.startup and verl itself agree on these; tests/oracle shows it):

- ``data.train_batch_size``: the spec's, or the default below rounded up to a multiple of
  the GPUs (verl: ``train_batch_size * rollout.n`` divisible by the GPUs);
- ``actor.ppo_mini_batch_size``: 256 (verl's default), or the train batch when smaller;
- micro batches per GPU (actor, rollout and ref log-prob, critic): 4, or the largest of
  2 and 1 that divides each GPU's share of a mini batch;
- ``rollout.tensor_model_parallel_size``: verl's default 2 when it divides the GPUs of a
  node, else 1 (it must divide the GPUs);
- the reference model's log-prob micro batch when the KL loss is used (grpo), the critic's
  with GAE (ppo);
- the custom reward under the key the version reads (``reward.custom_reward_function.*``
  from 0.9 on, ``custom_reward_function.*`` before);
- the checkpoint folder ``$HOME/checkpoints/<project>/<experiment>/<uid>``: a task deleted
  and created again under the same name starts fresh.
"""

from __future__ import annotations

import math
import posixpath
import shlex

from .spec import ArgusTaskSpec

# The verl version a basic spec is generated for when nothing else says: the newest
# supported release, the first line of operator/argus/verl-releases.txt (a unit test keeps them equal).
DEFAULT_VERL_VERSION = "0.9.1"

DEFAULT_PPO_TRAIN_BATCH = 1024  # verl's own data.train_batch_size default (ppo_trainer)
DEFAULT_SFT_TRAIN_BATCH = 256  # verl's own data.train_batch_size default (sft trainers)
MINI_BATCH = 256  # verl's own actor.ppo_mini_batch_size default
MICRO_BATCH_PER_GPU = 4
ROLLOUT_TP = 2  # verl's own rollout.tensor_model_parallel_size default


def _version_tuple(version: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in version.split("."):
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out)


def _override_key(word: str) -> str:
    """The key a Hydra override word sets (``+``/``++`` add, ``~`` deletes)."""
    return word.split("=", 1)[0].lstrip("+~")


def _render(head: list[str], overrides: list[tuple[str, object]], extra: tuple[str, ...] = ()) -> str:
    lines = [" ".join(head)]
    # The spec's own overrides replace the template's value of a key they set (the command
    # checks refuse a key set twice); a word whose key is read differently by the command
    # checks is still seen there.
    replaced = {_override_key(word) for word in extra}
    for key, value in overrides:
        if value is None or _override_key(key) in replaced:
            continue
        if isinstance(value, bool):
            value = str(value)
        lines.append(shlex.quote(f"{key}={value}"))
    lines.extend(shlex.quote(word) for word in extra)
    return " \\\n  ".join(lines)


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _micro(share: int) -> int:
    """The micro batch per GPU: 4, or the largest of 2 and 1 that divides a GPU's share."""
    return math.gcd(share, MICRO_BATCH_PER_GPU) if share > 0 else 1


def _sft(spec: ArgusTaskSpec, common: list[tuple[str, object]], trainer: list[tuple[str, object]], new: bool) -> str:
    gpus = spec.nnodes * spec.n_gpus_per_node
    module = "verl.trainer.sft_trainer" if new else "verl.trainer.fsdp_sft_trainer"
    head = ["torchrun", "--standalone", f"--nnodes={spec.nnodes}", f"--nproc_per_node={spec.n_gpus_per_node}", "-m", module]
    batch = spec.train_batch_size or _round_up(DEFAULT_SFT_TRAIN_BATCH, gpus)
    common = [(k, batch if k == "data.train_batch_size" else v) for k, v in common]
    model = [("model.path" if new else "model.partial_pretrain", spec.model_id), ("optim.lr", spec.learning_rate)]
    if not new:
        # fsdp_sft_trainer splits the batch over the GPUs, then into micro batches.
        model.append(("data.micro_batch_size_per_gpu", _micro(batch // gpus)))
    return _render(head, common + model + trainer, tuple(spec.overrides or ()))


def basic_command(spec: ArgusTaskSpec, *, home: str, experiment: str, uid: str | None, verl_version: str) -> str:
    """The verl command for a basic spec whose paths are already expanded.

    ``uid`` is the task's (its checkpoints are kept apart from an earlier task of the same
    name); ``verl_version`` the version of the verl the task runs (module and keys)."""
    new = _version_tuple(verl_version) >= (0, 9)
    project = spec.project_name or "argus"
    experiment = spec.experiment_name or experiment
    checkpoints = posixpath.join(home, "checkpoints", project, experiment, *([uid] if uid else []))
    gpus = spec.nnodes * spec.n_gpus_per_node
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
        return _sft(spec, common, trainer, new)

    grpo = spec.workload == "grpo"
    rollout_n = (spec.rollout_n or 5) if grpo else 1
    batch = spec.train_batch_size or _round_up(DEFAULT_PPO_TRAIN_BATCH, gpus)
    mini = min(MINI_BATCH, batch)
    micro = _micro(mini * rollout_n // gpus)
    tp = ROLLOUT_TP if spec.n_gpus_per_node % ROLLOUT_TP == 0 else 1
    common = [(k, batch if k == "data.train_batch_size" else v) for k, v in common]
    overrides = [("algorithm.adv_estimator", "grpo" if grpo else "gae")] + common + [
        ("data.max_prompt_length", spec.max_prompt_length or 512),
        ("data.max_response_length", spec.max_response_length or 512),
        ("actor_rollout_ref.model.path", spec.model_id),
        ("actor_rollout_ref.actor.optim.lr", spec.learning_rate or 1e-6),
        ("actor_rollout_ref.actor.ppo_mini_batch_size", mini),
        ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", micro),
        ("actor_rollout_ref.rollout.name", "vllm"),
        ("actor_rollout_ref.rollout.tensor_model_parallel_size", tp),
        ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", micro),
    ]
    if grpo:
        overrides += [
            ("actor_rollout_ref.rollout.n", rollout_n),
            ("actor_rollout_ref.actor.use_kl_loss", True),
            ("actor_rollout_ref.actor.kl_loss_coef", 0.001),
            ("actor_rollout_ref.actor.kl_loss_type", "low_var_kl"),
            ("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", micro),
            ("algorithm.use_kl_in_reward", False),
        ]
    else:
        overrides += [
            ("critic.model.path", spec.model_id),
            ("critic.optim.lr", 1e-5),
            ("critic.ppo_micro_batch_size_per_gpu", micro),
        ]
    if spec.custom_reward_path:
        prefix = "reward.custom_reward_function" if new else "custom_reward_function"
        overrides += [
            (f"{prefix}.path", spec.custom_reward_path),
            (f"{prefix}.name", spec.custom_reward_name or "compute_score"),
        ]
    overrides += trainer + [("+ray_kwargs.ray_init.address", "auto")]
    return _render(["python3", "-m", "verl.trainer.main_ppo"], overrides, tuple(spec.overrides or ()))
