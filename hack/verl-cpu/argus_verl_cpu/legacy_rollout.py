"""The ``hf`` rollout for verl 0.6 on CPU: ``actor_rollout_ref.rollout.name=hf``, sync mode.

Stands in for: verl's vLLM rollout (``verl/workers/rollout/vllm_rollout``), which needs a
GPU. verl 0.6.1 still ships a transformers rollout (``verl/workers/rollout/hf_rollout.py``,
``HFRollout``), but main_ppo cannot reach it: it is not in verl's rollout table (``Rollout
hf with mode sync not found``), and its constructor (``module, config``, then
``BaseRollout.__init__()`` without arguments) no longer fits how the FSDP worker builds a
rollout (``config, model_config, device_mesh``). ``HFSyncRollout`` is that rollout (a
subclass) in the form the worker builds:

- it holds its own transformers copy of the model (loaded from the model's folder, ``sdpa``
  attention, float32), as vLLM holds its own engine;
- ``update_weights``: at every step, before generating, verl hands it the FSDP actor's full
  weights, and it loads them, as vLLM's rollout does;
- ``generate_sequences``: verl's own ``HFRollout.generate_sequences``, inherited (sampling
  settings, padding, masks and position ids exactly as verl 0.6.1 writes them), run on this
  copy.

verl has no register function for rollouts, so it goes into verl's own table,
``verl.workers.rollout.base._ROLLOUT_REGISTRY[("hf", "sync")]`` (``legacy.py`` puts it there;
verl imports this module only when a run asks for rollout ``hf``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from transformers import AutoModelForCausalLM
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.hf_rollout import HFRollout


class HFSyncRollout(HFRollout):
    """verl's transformers rollout, built as the FSDP worker builds rollouts."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any) -> None:
        BaseRollout.__init__(self, config, model_config, device_mesh)  # HFRollout's own no longer fits
        path = self.model_config.local_path or self.model_config.path
        self.model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="sdpa", dtype=torch.float32)
        self.module = self.model  # what HFRollout generates with (the FSDP module, when it was written)

    async def resume(self, tags: list[str]) -> None:
        return None  # no device memory to take back on CPU

    async def release(self) -> None:
        return None

    async def update_weights(self, weights: Iterable[tuple[str, torch.Tensor]], **kwargs: Any) -> None:
        state = self.model.state_dict()
        named = {name: tensor for name, tensor in weights}
        for name, tensor in named.items():
            key = name if name in state else name.removeprefix("_fsdp_wrapped_module.")
            if key in state:
                state[key].copy_(tensor.detach().to("cpu", state[key].dtype))
        if getattr(self.model.config, "tie_word_embeddings", False) and "model.embed_tokens.weight" in named \
                and "lm_head.weight" in state:
            state["lm_head.weight"].copy_(named["model.embed_tokens.weight"].detach().to("cpu", state["lm_head.weight"].dtype))
