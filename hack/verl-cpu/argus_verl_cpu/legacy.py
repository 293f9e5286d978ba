"""verl 0.6 on CPU: what its GPU code paths need from torch (no platform to register).

Stands in for: the CUDA device verl 0.6 assumes. verl 0.6.1 has no platform registry
(``verl/plugin/platform`` came later); it asks ``verl/utils/device.py``, which on a machine
without accelerators already answers device ``cpu`` and device module ``torch.cpu``, but
names the collective backend ``nccl`` regardless: torchrun's SFT trainer then stops at
``nccl2 requires at least one CUDA device``, and main_ppo's FSDP workers ask for
``cpu:gloo,cpu:nccl``. Answered here without editing verl:

- ``torch.distributed.init_process_group`` is wrapped (``cputorch.wrap_init_process_group``):
  ``nccl`` becomes ``gloo``, one backend a device; and ``all_gather`` takes an input of the
  outputs' size in another shape, as NCCL does and gloo does not
  (``cputorch.wrap_all_gather``; verl 0.6.1 gathers a 0-d timing into 1-element tensors);
- ``torch.cpu``, verl's device module here, gets what verl calls on ``torch.cuda`` and it
  lacks (``empty_cache``, ``mem_get_info``, ``get_rng_state``, ...) as CPU no-ops or host
  equivalents; what it has is left alone;
- verl 0.6.1's SFT trainer (``verl/trainer/fsdp_sft_trainer.py``) loads the model with
  ``attn_implementation="flash_attention_2"`` hard-coded, whatever the command says, and
  FlashAttention needs CUDA (``FlashAttention2 has been toggled on, but it cannot be used
  ... flash_attn seems to be not installed``). transformers' check of the requested
  attention is wrapped: without ``flash_attn``, FlashAttention 2 becomes ``sdpa``, the
  attention transformers picks by default.

The engine-based SFT trainer (``verl/trainer/sft_trainer.py``) finds its FSDP engine for the
``cpu`` device through ``legacy_engine``.

For GRPO, ``actor_rollout_ref.rollout.name=hf`` selects ``legacy_rollout.HFSyncRollout``,
put into verl's rollout table here (the class is imported only when a run asks for it).
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from transformers import modeling_utils
from transformers.utils import is_flash_attn_2_available
from verl.workers.rollout import base as rollout_base

from . import legacy_engine
from .cputorch import fill_device_module, wrap_all_gather, wrap_init_process_group


def _sdpa_for_flash_attention() -> None:
    """FlashAttention 2 asked for without ``flash_attn``: ``sdpa`` instead."""
    model_class = modeling_utils.PreTrainedModel
    original = model_class._check_and_adjust_attn_implementation
    if getattr(original, "_argus_cpu", False) or is_flash_attn_2_available():
        return

    @functools.wraps(original)
    def check(self: Any, attn_implementation: str | None, *args: Any, **kwargs: Any) -> str:
        if attn_implementation == "flash_attention_2":
            attn_implementation = "sdpa"
        return original(self, attn_implementation, *args, **kwargs)

    check._argus_cpu = True  # type: ignore[attr-defined]
    model_class._check_and_adjust_attn_implementation = check  # type: ignore[method-assign]


fill_device_module(torch.cpu, replace=False)
wrap_init_process_group()
wrap_all_gather()
_sdpa_for_flash_attention()
legacy_engine.install()
rollout_base._ROLLOUT_REGISTRY[("hf", "sync")] = f"{__package__}.legacy_rollout.HFSyncRollout"
