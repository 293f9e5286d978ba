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
- verl 0.6.1's SFT trainer (``verl/trainer/fsdp_sft_trainer.py``) and its critic's loader
  load the model with ``attn_implementation="flash_attention_2"`` hard-coded, whatever the
  command says, and FlashAttention needs CUDA: without ``flash_attn`` it becomes ``sdpa``
  (``cputorch.sdpa_for_flash_attention``).

The engine-based SFT trainer (``verl/trainer/sft_trainer.py``) finds its FSDP engine for the
``cpu`` device through ``legacy_engine``.

For GRPO, ``actor_rollout_ref.rollout.name=hf`` selects ``legacy_rollout.HFSyncRollout``,
put into verl's rollout table here (the class is imported only when a run asks for it).
"""

from __future__ import annotations

import torch
from verl.workers.rollout import base as rollout_base

from . import legacy_engine
from .cputorch import fill_device_module, sdpa_for_flash_attention, wrap_all_gather, wrap_init_process_group

fill_device_module(torch.cpu, replace=False)
wrap_init_process_group()
wrap_all_gather()
sdpa_for_flash_attention()
legacy_engine.install()
rollout_base._ROLLOUT_REGISTRY[("hf", "sync")] = f"{__package__}.legacy_rollout.HFSyncRollout"
