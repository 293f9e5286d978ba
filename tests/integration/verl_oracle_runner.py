"""verl's own verdict on verl calls: runs INSIDE the verl oracle environment
(hack/build-verl-oracle.sh), never in the product's .venv.

    <oracle python> verl_oracle_runner.py < cases.json > verdicts.json

stdin: a JSON list of cases ``{"id", "entry", "config_name", "overrides"}``. stdout: one JSON object, ``{"version": ..., "verdicts":
{id: {"ok": bool, "stage": ..., "error": ...}}}``.

The model is the one thing replaced: every key naming it points at a tiny local model (a
Hugging Face config and tokenizer, no weights), which verl loads as it builds its config.
For each case, in the order verl's entry point does it, on CPU:
- Hydra composes the case with the imported verl's own config tree (a composition error is
  a refusal: verl would not start);
- main_ppo: ``verl.utils.config.validate_config`` with verl's own ``need_critic`` and the
  reference-policy rule of the version (0.9.x: ``need_reference_policy(config)``; 0.6.x:
  TaskRunner.add_ref_policy_worker's condition), then the rollout's config dataclass
  (``omega_conf_to_dataclass(actor_rollout_ref.rollout)``, as the actor-rollout worker builds
  it: its ``__post_init__`` and Hydra's mandatory-value check run);
- sft_trainer (0.9.x): the engine, optimizer, checkpoint and profiler dataclasses and
  ``_validate_profiler_interval`` as ``SFTTrainer._build_config`` runs them (the model's
  dataclass is left out: it downloads the model); torch's DataLoader on the per-rank batch;
- fsdp_sft_trainer (0.6.x): ``FSDPSFTTrainer._normalize_config_bsz`` on the config.

Both SFT trainers take their data-parallel size from torch's world (torchrun's processes); a
case carries no launch, so the trainer's GPU counts stand in for it here, as they do on
Argus's side of the comparison (``startup_problems`` without ``world_size``).

Two checks run only in verl's GPU workers; the runner reads verl's own data for them but
does the lookup or arithmetic itself: the rollout engine's name in verl's registry (0.9.x
RolloutReplicaRegistry, 0.6.x _ROLLOUT_REGISTRY; looking it up the way verl does would
import vLLM), and the rollout device mesh (verl/workers/engine_workers.py, 0.9.1, and
fsdp_workers.py, 0.6.1: ``world_size % (tp * dp * pp) == 0``), marked ``"worker (restated)"``.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import io
import json
import sys
import tempfile
import traceback
import types
import warnings
from pathlib import Path
from typing import Any


def _first_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _compose(config_dir: Path, name: str, overrides: list[str]) -> Any:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name=name, overrides=overrides)


def parse_each_config_file_once() -> None:
    """Hydra's config sources hand out a deep copy of their first load of a file.

    Every compose reads and parses again each of the ~30 YAML files it composes (Hydra's
    CachingConfigRepository lives for one ``load_configuration``; initializing Hydra once
    instead of for every case keeps nothing more): measured, a compose of verl 0.9.1's
    ppo_trainer took 0.34 s of CPU, 0.24 s with this. The files do not change during a run, and
    a deep copy of a parse is what a fresh parse gives (Hydra merges a loaded config into the
    composition without copying it, so each compose gets its own copy; the first one is never
    handed out). Everything after the file's parse (the defaults lists, the merge, the
    overrides, the checks) is Hydra's and verl's own, for every case.
    """
    from hydra._internal.sources_registry import SourcesRegistry
    from hydra.core.plugins import Plugins

    Plugins.instance()  # its discovery loads the core plugins' modules anew: the classes Hydra uses are these
    for scheme in ("file", "pkg"):  # verl's tree, Hydra's own configs (hydra/config and its groups)
        source = SourcesRegistry.instance().resolve(scheme)
        source.load_config = _first_load_copied(source.load_config)  # type: ignore[method-assign]


def _first_load_copied(load: Any) -> Any:
    first: dict[tuple[str, str, str], Any] = {}

    @functools.wraps(load)
    def load_config(source: Any, config_path: str) -> Any:
        key = (type(source).__name__, source.path, config_path)
        if key not in first:  # a file that is not there raises, every time, and is not kept
            first[key] = load(source, config_path)
        return copy.deepcopy(first[key])

    return load_config


def _ppo(cfg: Any) -> tuple[str, str] | None:
    from verl.trainer.ppo import utils as ppo_utils
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    wants_ref = bool(cfg.algorithm.get("use_kl_in_reward", False) or cfg.actor_rollout_ref.actor.use_kl_loss)
    params = list(inspect.signature(ppo_utils.need_reference_policy).parameters)
    if params and params[0] == "config":
        use_ref = ppo_utils.need_reference_policy(cfg)
    else:  # 0.6.x: from the role mapping TaskRunner builds (add_ref_policy_worker)
        use_ref = ppo_utils.need_reference_policy({ppo_utils.Role.RefPolicy: object} if wants_ref else {})
    try:
        validate_config(config=cfg, use_reference_policy=use_ref, use_critic=ppo_utils.need_critic(cfg))
    except Exception as exc:  # noqa: BLE001 - any refusal is verl's verdict
        return "validate_config", _first_line(exc)
    try:
        rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    except Exception as exc:  # noqa: BLE001
        return "rollout config", _first_line(exc)
    # The workers look the engine up by name (without loading it here: that imports vLLM).
    try:
        from verl.workers.rollout.replica import RolloutReplicaRegistry
    except ImportError:  # 0.6.x
        from verl.workers.rollout.base import _ROLLOUT_REGISTRY

        if (rollout.name, rollout.mode) not in _ROLLOUT_REGISTRY:
            return "rollout engine", f"Rollout {rollout.name} with mode {rollout.mode} not found"
    else:
        if rollout.name not in RolloutReplicaRegistry._registry:
            return "rollout engine", f"Unknown rollout mode: {rollout.name}. Available: {list(RolloutReplicaRegistry._registry)}"
    n_gpus = cfg.trainer.n_gpus_per_node * cfg.trainer.nnodes
    infer_world_size = rollout.tensor_model_parallel_size * rollout.data_parallel_size * rollout.pipeline_model_parallel_size
    if n_gpus % infer_world_size != 0:
        return "worker (restated)", f"rollout world_size: {n_gpus} is not divisible by infer_world_size: {infer_world_size}"
    return None


def _sft_engine(cfg: Any) -> tuple[str, str] | None:
    import torch.utils.data
    from verl.trainer.sft_trainer import SFTTrainer
    from verl.utils.config import omega_conf_to_dataclass

    try:
        for key in ("engine", "optim", "checkpoint", "profiler"):
            omega_conf_to_dataclass(cfg[key])
        fake = types.SimpleNamespace(profiler_interval=cfg.trainer.profile_interval)
        SFTTrainer._validate_profiler_interval(fake)
    except Exception as exc:  # noqa: BLE001
        return "sft config", _first_line(exc)
    dp = cfg.trainer.n_gpus_per_node * cfg.trainer.nnodes
    try:  # sft_trainer._build_dataloader: batch_size = train_batch_size // dp_size
        torch.utils.data.DataLoader([0], batch_size=cfg.data.train_batch_size // dp)
    except Exception as exc:  # noqa: BLE001
        return "dataloader", _first_line(exc)
    return None


def _sft_legacy(cfg: Any) -> tuple[str, str] | None:
    from omegaconf import OmegaConf
    from verl.trainer.fsdp_sft_trainer import FSDPSFTTrainer

    n_gpus = cfg.trainer.n_gpus_per_node * cfg.trainer.nnodes
    sp = cfg.get("ulysses_sequence_parallel_size", 1)
    mesh = types.SimpleNamespace(size=lambda dim=0: n_gpus, get_rank=lambda: 0)
    ulysses = types.SimpleNamespace(size=lambda dim=0: n_gpus // sp) if sp > 1 else None
    fake = types.SimpleNamespace(config=OmegaConf.create(OmegaConf.to_container(cfg, resolve=True)),
                                 device_mesh=mesh, ulysses_device_mesh=ulysses)
    try:
        FSDPSFTTrainer._normalize_config_bsz(fake)
    except Exception as exc:  # noqa: BLE001
        return "_normalize_config_bsz", _first_line(exc)
    return None


# verl loads the model's Hugging Face config and tokenizer when it builds its config
# dataclasses (HFModelConfig.__post_init__): the one thing the runner replaces is the model,
# by a tiny local one (no weights), under every key that names it.
MODEL_KEYS = ("actor_rollout_ref.model.path", "critic.model.path", "model.path")


def tiny_model(folder: Path) -> Path:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast, Qwen2Config

    vocab = {"<unk>": 0, "<pad>": 1, "<eos>": 2, "a": 3, "b": 4}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", pad_token="<pad>", eos_token="<eos>")
    fast.save_pretrained(folder)
    Qwen2Config(vocab_size=len(vocab), hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
                num_key_value_heads=1, max_position_embeddings=64, architectures=["Qwen2ForCausalLM"]).save_pretrained(folder)
    return folder


def with_model(overrides: list[str], model: Path) -> list[str]:
    return [f"{w.split('=', 1)[0]}={model}" if w.split("=", 1)[0].lstrip("+") in MODEL_KEYS else w for w in overrides]


def verdict(case: dict[str, Any], config_dir: Path, model: Path) -> dict[str, Any]:
    try:
        cfg = _compose(config_dir, case["config_name"], with_model(list(case["overrides"]), model))
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "stage": "compose", "error": _first_line(exc)}
    checks = {"verl.trainer.main_ppo": _ppo, "verl.trainer.sft_trainer": _sft_engine,
              "verl.trainer.fsdp_sft_trainer": _sft_legacy}
    check = checks.get(case["entry"])
    if check is None:
        return {"ok": False, "stage": "entry", "error": f"no oracle for {case['entry']}"}
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            refused = check(cfg)
    except Exception as exc:  # noqa: BLE001 - a crash in verl's code is a refusal too, said as such
        return {"ok": False, "stage": "crash", "error": _first_line(exc), "trace": traceback.format_exc()[-2000:]}
    if refused:
        return {"ok": False, "stage": refused[0], "error": refused[1]}
    return {"ok": True, "stage": "passed", "error": ""}


def main() -> None:
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import verl
    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    version = (Path(verl.__file__).parent / "version" / "version").read_text().strip()
    cases = json.load(sys.stdin)
    parse_each_config_file_once()
    with tempfile.TemporaryDirectory(prefix="verl-oracle-model-") as tmp:
        with contextlib.redirect_stdout(io.StringIO()):
            model = tiny_model(Path(tmp))
        verdicts = {c["id"]: verdict(c, config_dir, model) for c in cases}
    json.dump({"version": version, "verdicts": verdicts}, sys.stdout)


if __name__ == "__main__":
    main()
