"""verl's start-up checks, restated: what verl refuses before training, read from the config.

verl checks its configuration when a run starts, after the task has waited in the queue for
its GPUs: ``verl.utils.config.validate_config`` in the driver, the ``__post_init__`` and
``validate`` of its config dataclasses (``verl/workers/config/actor.py``,
``verl/workers/config/critic.py``, ``verl/workers/config/rollout.py``), and, in the GPU workers, the rollout's device mesh. The checks that read
only the configuration are restated here, so a task verl would refuse is refused at apply
time, with verl's own words, instead of after the wait.

Input: the job's configuration as verl will see it, composed with the config tree of the
verl version in use and resolved (plain dicts and lists, without Hydra's ``hydra`` node);
``version`` is that verl version and ``entry`` the module the command runs. A value Hydra
left mandatory and unset stays the string ``???`` (``OmegaConf.to_container`` keeps it).

Versions: the checks are written from the releases in operator/argus/verl-releases.txt (0.9.1 and
0.6.1) and kept honest by tests/oracle, which runs verl's own ``validate_config`` and config
dataclasses on the same configurations and fails on every disagreement. A version from 0.9
on gets the 0.9.1 checks; an older one the 0.6.1 checks.

Pure: no I/O, no imports beyond the standard library.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PPO_ENTRY = "verl.trainer.main_ppo"
SFT_ENTRY = "verl.trainer.sft_trainer"
LEGACY_SFT_ENTRY = "verl.trainer.fsdp_sft_trainer"

_MISSING = "???"  # OmegaConf's mark for a mandatory value nobody set

# vLLM's largest LoRA rank (verl 0.9.1 reads it from vLLM's MaxLoRARanks; 0.6.1 writes 512).
_VLLM_MAX_LORA_RANK = 512

# The rollout engines verl's workers know: 0.9.x's RolloutReplicaRegistry, 0.6.x's
# _ROLLOUT_REGISTRY (by name and mode).
_ROLLOUT_ENGINES = ("vllm", "sglang", "trtllm")
_LEGACY_ROLLOUTS = {(name, mode) for name in ("vllm", "sglang") for mode in ("sync", "async")}

_LOSS_AGG_MODES = ("token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")


# The actor config class (its _target_) and the key its engine config sits under (0.9.x).
_ENGINE_KEY = {
    "FSDPActorConfig": "fsdp_config",
    "McoreActorConfig": "megatron",
    "VeOmniActorConfig": "veomni",
    "TorchTitanActorConfig": "torchtitan",
}


@dataclass(frozen=True)
class StartupProblem:
    """One thing verl would refuse at start: the key, its value, verl's words for the rule."""

    key: str
    value: object
    message: str


def _version_tuple(version: str) -> tuple[int, ...]:
    parts: list[int] = []
    for part in version.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


class _Config:
    """Dotted reads of a plain nested mapping; a missing key reads as its default."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root

    def get(self, key: str, default: object = None) -> Any:
        node: Any = self.root
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return default
            node = node[part]
        return node


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _unset(value: object) -> bool:
    return value is None or value == _MISSING


def _class_name(target: object) -> str:
    return target.rsplit(".", 1)[-1] if isinstance(target, str) else ""


class _Checks:
    """Collects problems; an arithmetic check is skipped when its inputs are not integers
    (the problem about that input is reported instead)."""

    def __init__(self, config: Mapping[str, Any], version: str, plugin_rollouts: tuple[str, ...] = ()) -> None:
        self.c = _Config(config)
        self.plugin_rollouts = plugin_rollouts
        self.v = _version_tuple(version)
        self.new = self.v >= (0, 9)
        self.problems: list[StartupProblem] = []

    def add(self, key: str, message: str) -> None:
        self.problems.append(StartupProblem(key, self.c.get(key), message))

    def integer(self, key: str, *, positive: bool = True) -> int | None:
        value = self.c.get(key)
        if _is_int(value) and (value > 0 or not positive):
            return value
        if _unset(value):
            self.add(key, f"{key} must be set (verl reads it as a number before training)")
        else:
            self.add(key, f"{key} must be {'a positive' if positive else 'an'} integer")
        return None

    def one_of(self, section: str, param: str, label: str | None = None) -> None:
        """verl's check_mutually_exclusive: exactly one of ``param`` and ``param_per_gpu``."""
        label = label or section
        old, per_gpu = f"{section}.{param}", f"{section}.{param}_per_gpu"
        old_value, new_value = self.c.get(old), self.c.get(per_gpu)
        if _unset(old_value) and _unset(new_value):
            self.add(per_gpu, f"[{label}] Please set at least one of '{old}' or '{per_gpu}'.")
        elif not _unset(old_value) and not _unset(new_value):
            self.add(
                old,
                f"[{label}] You have set both '{old}' AND '{per_gpu}'. Please remove '{old}' because only "
                f"'*_{param}_per_gpu' is supported (the former is deprecated).",
            )

    # -- PPO / GRPO: verl.trainer.main_ppo ------------------------------------------------

    def ppo(self) -> None:
        c = self.c
        per_node = self.integer("trainer.n_gpus_per_node")
        nnodes = self.integer("trainer.nnodes")
        n_gpus = per_node * nnodes if per_node is not None and nnodes is not None else None
        train_batch_size = self.integer("data.train_batch_size")
        rollout_n = self.integer("actor_rollout_ref.rollout.n")
        actor = "actor_rollout_ref.actor"
        dynamic = bool(c.get(f"{actor}.use_dynamic_bsz"))

        # validate_config: the real batch divides the smallest batch the GPUs can take.
        if not dynamic and n_gpus is not None and train_batch_size is not None and rollout_n is not None:
            minimal = self._minimal_batch(n_gpus)
            if minimal is not None:
                real = train_batch_size * rollout_n
                if real % minimal != 0:
                    self.add(
                        "data.train_batch_size",
                        f"real_train_batch_size ({real}) must be divisible by minimal possible batch size ({minimal})"
                        f" (data.train_batch_size {train_batch_size} * actor_rollout_ref.rollout.n {rollout_n})",
                    )

        # ActorConfig.__post_init__ and .validate (validate_config builds the actor's config).
        self._actor(n_gpus, train_batch_size, dynamic)
        if self.new:
            engine = _ENGINE_KEY.get(_class_name(c.get(f"{actor}._target_")), "fsdp_config")
            mode = c.get(f"{actor}.{engine}.router_replay.mode", "disabled")
            if mode not in ("disabled", "R2", "R3"):
                self.add(
                    f"{actor}.{engine}.router_replay.mode",
                    f"Invalid router_replay mode: {mode}. Must be one of ['disabled', 'R2', 'R3']",
                )
            if mode == "R2" and c.get("algorithm.rollout_correction.bypass_mode"):
                self.add(
                    "algorithm.rollout_correction.bypass_mode",
                    "router_replay.mode='R2' requires algorithm.rollout_correction.bypass_mode=False: R2 records "
                    "routes while recomputing actor old_log_probs, but bypass mode skips that forward.",
                )

        if not dynamic:
            if c.get("algorithm.use_kl_in_reward") or c.get(f"{actor}.use_kl_loss"):
                self.one_of("actor_rollout_ref.ref", "log_prob_micro_batch_size")
            self.one_of("actor_rollout_ref.rollout", "log_prob_micro_batch_size")

        if not self.new and c.get("reward_model.enable") and not c.get("reward_model.use_dynamic_bsz"):
            self.one_of("reward_model", "micro_batch_size")

        if self._uses_critic():
            self._critic(n_gpus, train_batch_size)

        if c.get("actor_rollout_ref.rollout.val_kwargs.do_sample"):
            temperature = c.get("actor_rollout_ref.rollout.temperature")
            if isinstance(temperature, (int, float)) and not isinstance(temperature, bool) and temperature <= 0:
                self.add(
                    "actor_rollout_ref.rollout.temperature",
                    "validation gen temperature should be greater than 0 when enabling do_sample",
                )
        self._lora()
        self._rollout(n_gpus)

    def _minimal_batch(self, n_gpus: int) -> int | None:
        actor = "actor_rollout_ref.actor"
        if self.c.get(f"{actor}.strategy") != "megatron":
            return n_gpus
        tp = self.integer(f"{actor}.megatron.tensor_model_parallel_size")
        pp = self.integer(f"{actor}.megatron.pipeline_model_parallel_size")
        cp = self.integer(f"{actor}.megatron.context_parallel_size")
        if tp is None or pp is None or cp is None:
            return None
        if n_gpus % (tp * pp * cp) != 0:
            self.add(
                f"{actor}.megatron.tensor_model_parallel_size",
                f"n_gpus ({n_gpus}) must be divisible by model_parallel_size ({tp * pp}) times "
                f"context_parallel_size ({cp})",
            )
            return None
        micro = self.c.get(f"{actor}.ppo_micro_batch_size_per_gpu")
        if not _is_int(micro):
            # verl multiplies by it here; unset, the check below names it.
            return None
        return n_gpus // (tp * pp * cp) * micro

    def _actor(self, n_gpus: int | None, train_batch_size: int | None, dynamic: bool) -> None:
        c, actor = self.c, "actor_rollout_ref.actor"
        if not dynamic:
            micro, per_gpu = c.get(f"{actor}.ppo_micro_batch_size"), c.get(f"{actor}.ppo_micro_batch_size_per_gpu")
            if not _unset(micro) and not _unset(per_gpu):
                self.add(
                    f"{actor}.ppo_micro_batch_size",
                    "[actor] You have set both 'actor.ppo_micro_batch_size' AND 'actor.ppo_micro_batch_size_per_gpu'."
                    " Please remove 'actor.ppo_micro_batch_size' because only '*_ppo_micro_batch_size_per_gpu' is "
                    "supported (the former is deprecated).",
                )
            elif _unset(micro) and _unset(per_gpu):
                self.add(
                    f"{actor}.ppo_micro_batch_size_per_gpu",
                    "[actor] Please set at least one of 'actor.ppo_micro_batch_size' or "
                    "'actor.ppo_micro_batch_size_per_gpu' if use_dynamic_bsz is not enabled.",
                )
        loss_agg_mode = c.get(f"{actor}.loss_agg_mode", "token-mean")
        if loss_agg_mode not in _LOSS_AGG_MODES:
            self.add(f"{actor}.loss_agg_mode", f"Invalid loss_agg_mode: {loss_agg_mode}")
        if dynamic:
            return
        mini = c.get(f"{actor}.ppo_mini_batch_size")
        if _is_int(train_batch_size) and _is_int(mini) and train_batch_size < mini:
            self.add(
                f"{actor}.ppo_mini_batch_size",
                f"train_batch_size ({train_batch_size}) must be >= actor.ppo_mini_batch_size ({mini})",
            )
        micro = c.get(f"{actor}.ppo_micro_batch_size")
        fsdp = _class_name(c.get(f"{actor}._target_")) == "FSDPActorConfig"
        sp = c.get(f"{actor}.ulysses_sequence_parallel_size", 1) if fsdp else 1
        if _is_int(micro) and micro > 0 and _is_int(mini):
            if mini % micro != 0:
                self.add(
                    f"{actor}.ppo_micro_batch_size",
                    f"ppo_mini_batch_size ({mini}) must be divisible by ppo_micro_batch_size ({micro})",
                )
            if n_gpus is not None and _is_int(sp) and micro * sp < n_gpus:
                self.add(
                    f"{actor}.ppo_micro_batch_size",
                    f"ppo_micro_batch_size ({micro}) * ulysses_sequence_parallel_size ({sp}) must be >= n_gpus "
                    f"({n_gpus})",
                )
        if (
            fsdp
            and (self.new or c.get(f"{actor}.strategy") in ("fsdp", "fsdp2"))
            and _is_int(sp)
            and sp > 1
            and not c.get("actor_rollout_ref.model.use_remove_padding")
        ):
            self.add(
                "actor_rollout_ref.model.use_remove_padding",
                "When using sequence parallelism for actor/ref policy, you must enable `use_remove_padding`.",
            )

    def _uses_critic(self) -> bool:
        enable = self.c.get("critic.enable")
        if enable is not None:
            return bool(enable)
        return self.c.get("algorithm.adv_estimator") == "gae"

    def _critic(self, n_gpus: int | None, train_batch_size: int | None) -> None:
        c = self.c
        if c.get("critic.use_dynamic_bsz"):
            return
        self.one_of("critic", "ppo_micro_batch_size")
        mini, micro = c.get("critic.ppo_mini_batch_size"), c.get("critic.ppo_micro_batch_size")
        if _is_int(micro) and micro > 0 and _is_int(mini) and mini % micro != 0:
            self.add(
                "critic.ppo_micro_batch_size",
                f"[critic] ppo_mini_batch_size ({mini}) must be divisible by ppo_micro_batch_size ({micro})",
            )
        if _is_int(train_batch_size) and _is_int(mini) and train_batch_size < mini:
            self.add(
                "critic.ppo_mini_batch_size",
                f"train_batch_size ({train_batch_size}) must be >= critic.ppo_mini_batch_size ({mini})",
            )
        if _class_name(c.get("critic._target_")) == "FSDPCriticConfig" and _is_int(micro) and n_gpus is not None:
            sp = c.get("critic.ulysses_sequence_parallel_size", 1)
            if _is_int(sp) and micro * sp < n_gpus:
                self.add(
                    "critic.ppo_micro_batch_size",
                    f"critic.ppo_micro_batch_size ({micro}) * ulysses_sequence_parallel_size ({sp}) must be >= "
                    f"n_gpus ({n_gpus})",
                )

    def _lora(self) -> None:
        c, model = self.c, "actor_rollout_ref.model"
        if c.get("actor_rollout_ref.rollout.name") != "vllm":
            return
        if self.new:
            lora = c.get(f"{model}.lora") or {}
            rank = lora.get("rank", 0) if isinstance(lora, Mapping) else 0
            key = f"{model}.lora.rank"
            if not _is_int(rank) or rank <= 0:
                rank, key = c.get(f"{model}.lora_rank", 0), f"{model}.lora_rank"
            if isinstance(lora, Mapping) and lora.get("merge"):
                rank = 0
            if _is_int(rank) and rank > _VLLM_MAX_LORA_RANK:
                self.add(key, f"lora_rank must be less than or equal to {_VLLM_MAX_LORA_RANK}, but got {rank}")
        else:
            rank = c.get(f"{model}.lora_rank", 0)
            if _is_int(rank) and rank > _VLLM_MAX_LORA_RANK:
                self.add(f"{model}.lora_rank", "LoRA rank in vLLM must be less than or equal to 512")

    def _rollout(self, n_gpus: int | None) -> None:
        """RolloutConfig's __post_init__ (verl builds it when the workers start) and the
        rollout's device mesh in the actor-rollout workers (engine_workers / fsdp_workers)."""
        c, rollout = self.c, "actor_rollout_ref.rollout"
        name = c.get(f"{rollout}.name")
        if name == _MISSING:
            self.add(
                f"{rollout}.name",
                f"Missing mandatory value: {rollout}.name (verl's config leaves the rollout engine unset: "
                "set it, for example to vllm or sglang)",
            )
        elif self.new and name not in (*_ROLLOUT_ENGINES, *self.plugin_rollouts):
            # The workers look the engine up in verl's RolloutReplicaRegistry.
            available = [*_ROLLOUT_ENGINES, *self.plugin_rollouts]
            self.add(f"{rollout}.name", f"Unknown rollout mode: {name}. Available: {available}")
        elif not self.new and (name, c.get(f"{rollout}.mode")) not in _LEGACY_ROLLOUTS:
            # The workers look (name, mode) up in verl's _ROLLOUT_REGISTRY.
            self.add(f"{rollout}.name", f"Rollout {name} with mode {c.get(f'{rollout}.mode')} not found")
        if self.new and c.get(f"{rollout}.mode") == "sync":
            self.add(
                f"{rollout}.mode",
                "Rollout mode 'sync' has been removed. Please set `actor_rollout_ref.rollout.mode=async` or remove "
                "the mode setting entirely.",
            )
        tp = c.get(f"{rollout}.tensor_model_parallel_size", 1)
        dp = c.get(f"{rollout}.data_parallel_size", 1)
        pp = c.get(f"{rollout}.pipeline_model_parallel_size", 1)
        ep = c.get(f"{rollout}.expert_parallel_size", 1)
        if not all(_is_int(x) and x > 0 for x in (tp, dp, pp)):
            for key, value in (("tensor_model_parallel_size", tp), ("data_parallel_size", dp),
                               ("pipeline_model_parallel_size", pp)):
                if not (_is_int(value) and value > 0):
                    self.add(f"{rollout}.{key}", f"{rollout}.{key} must be a positive integer")
            return
        if (not self.new or name != "trtllm") and _is_int(ep) and ep > 1 and ep != tp * dp:
            self.add(
                f"{rollout}.expert_parallel_size",
                "expert_parallel_size must be equal to tensor_model_parallel_size * data_parallel_size",
            )
        moe_tp = c.get(f"{rollout}.moe_tensor_parallel_size")
        if self.new and _is_int(moe_tp) and moe_tp > 1 and name != "trtllm":
            self.add(f"{rollout}.moe_tensor_parallel_size", "moe_tensor_parallel_size is only supported for trtllm")
        engines = ("vllm", "sglang", "trtllm") if self.new else ("vllm", "sglang")
        if pp > 1 and name in engines:
            self.add(
                f"{rollout}.pipeline_model_parallel_size",
                f"Current rollout self.name={name!r} not implemented pipeline_model_parallel_size > 1 yet.",
            )
        if self.new and c.get(f"{rollout}.disaggregation.enabled") and name not in ("sglang", "vllm"):
            self.add(
                f"{rollout}.disaggregation.enabled",
                f"rollout.disaggregation.enabled=True requires rollout.name in ('sglang', 'vllm'); got {name!r}.",
            )
        infer_world_size = tp * dp * pp
        if n_gpus is not None and n_gpus % infer_world_size != 0:
            self.add(
                f"{rollout}.tensor_model_parallel_size",
                f"rollout world_size: {n_gpus} is not divisible by infer_world_size: {infer_world_size} "
                f"(tensor_model_parallel_size {tp} * data_parallel_size {dp} * pipeline_model_parallel_size {pp}; "
                f"the task has {n_gpus} GPUs)",
            )

    # -- SFT ----------------------------------------------------------------------------

    def sft(self, entry: str, world_size: int | None) -> None:
        """Both SFT trainers split the batch over the data-parallel ranks, and take their count
        from torch's world (torchrun's processes), never from ``trainer.n_gpus_per_node`` or
        ``trainer.nnodes``: neither reads those keys (verl 0.6.1's ``sft_trainer_engine.yaml``
        does not even declare them). ``world_size``: torchrun's, when the launch is known;
        else the trainer's counts stand in for it when both are set (a bare configuration)."""
        c = self.c
        per_node, nnodes = c.get("trainer.n_gpus_per_node"), c.get("trainer.nnodes")
        counted = per_node * nnodes if _is_int(per_node) and _is_int(nnodes) and per_node > 0 and nnodes > 0 else None
        n_gpus = world_size if world_size is not None else counted
        train_batch_size = self.integer("data.train_batch_size")
        if entry == LEGACY_SFT_ENTRY:
            sp = c.get("ulysses_sequence_parallel_size", 1)
            micro = self.integer("data.micro_batch_size_per_gpu")
            if n_gpus is None or train_batch_size is None or not _is_int(sp) or sp <= 0:
                return
            dp = n_gpus // sp
            if dp <= 0 or n_gpus % sp != 0:
                self.add("ulysses_sequence_parallel_size", f"ulysses_sequence_parallel_size ({sp}) must divide the "
                         f"{n_gpus} GPUs")
                return
            if train_batch_size % dp != 0:
                self.add("data.train_batch_size",
                         f"Global batch size {train_batch_size} is not divisible by dp size {dp}")
            elif micro is not None and (train_batch_size // dp) % micro != 0:
                self.add("data.micro_batch_size_per_gpu",
                         f"data.train_batch_size per data-parallel rank ({train_batch_size // dp}) must be divisible "
                         f"by data.micro_batch_size_per_gpu ({micro})")
            return
        # verl.trainer.sft_trainer (config sft_trainer_engine); 0.9's _build_config checks the
        # profiler's interval, 0.6's has no such check
        interval = c.get("trainer.profile_interval", [-1, -1]) if self.new else [-1, -1]
        if not isinstance(interval, list) or len(interval) != 2 or not all(_is_int(x) for x in interval):
            self.add("trainer.profile_interval", "trainer.profile_interval must be a list of two steps [start, end]")
        elif interval[1] < interval[0] or (interval[0] < 0 and interval[1] >= 0):
            self.add("trainer.profile_interval",
                     "trainer.profile_interval: the end step must be >= the start step, and negative when the "
                     "start is (verl's _validate_profiler_interval)")
        if n_gpus is not None and train_batch_size is not None and train_batch_size < n_gpus:
            self.add("data.train_batch_size",
                     f"data.train_batch_size ({train_batch_size}) split over {n_gpus} data-parallel ranks gives a "
                     "per-rank batch size of 0 (batch_size should be a positive integer value)")


def startup_problems(config: Mapping[str, Any], *, version: str, entry: str,
                     plugin_rollouts: tuple[str, ...] = (), world_size: int | None = None) -> list[StartupProblem]:
    """What verl ``version`` would refuse, reading only ``config``, before training ``entry``.
    ``plugin_rollouts``: rollout engines the cluster's verl plugins register (verl 0.9's
    RolloutReplicaRegistry), known to the cluster's verl beside its own. ``world_size``: the
    processes torchrun starts (an SFT trainer's data-parallel ranks), when the launch is known.

    Every problem verl's start-up checks would raise is returned (verl stops at the first);
    an entry point this module does not know gets no checks.
    """
    checks = _Checks(config, version, plugin_rollouts)
    if entry == PPO_ENTRY:
        checks.ppo()
    elif entry in (SFT_ENTRY, LEGACY_SFT_ENTRY):
        checks.sft(entry, world_size)
    return checks.problems
