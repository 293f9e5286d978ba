"""What CPU torch refuses or lacks when verl drives it as a GPU (no verl import here).

Shared by the platform of verl 0.9 (``platform.py``) and the shims for verl 0.6
(``legacy.py``):

- ``wrap_init_process_group``: verl names its collective backend after the accelerator
  (``cpu:gloo,cpu:gloo`` from verl 0.9's CPU platform; ``nccl`` and ``cpu:gloo,cpu:nccl``
  from verl 0.6, which has no platform to ask). torch refuses a repeated device, and NCCL
  needs a CUDA device (``nccl2 requires at least one CUDA device``). Wrapped, every backend
  becomes one ``gloo`` a device, as on a machine without GPUs it must.
- ``wrap_all_gather``: NCCL gathers tensors of equal size whatever their shapes, and verl
  relies on it (verl 0.6.1's ``topk_reduce_ratio_min_max`` gathers a 0-d tensor into
  1-element ones); gloo refuses (``ProcessGroupGloo::allgather: invalid tensor size at index
  0 (expected (), got (1))``). Wrapped, an input of the outputs' size takes their shape.
- ``fill_device_module``: what verl calls on its device module (``torch.cuda`` on a GPU;
  ``empty_cache``, ``mem_get_info``, ``get_rng_state``, ...), as the no-ops or host
  equivalents they are on CPU.
- ``sdpa_for_flash_attention``: verl hard-codes ``attn_implementation="flash_attention_2"``
  where it loads some models, whatever the command says (verl 0.6.1's
  ``fsdp_sft_trainer``; both releases' ``load_valuehead_model``, the critic's model for
  GAE), and FlashAttention needs CUDA (``FlashAttention2 has been toggled on, but it cannot
  be used ... flash_attn seems to be not installed``; the critic's loader then falls back to
  trl and stops at ``... is not a value head model, please install trl``). transformers'
  check of the requested attention is wrapped: without ``flash_attn``, FlashAttention 2
  becomes ``sdpa``, the attention transformers picks by default.
- ``unpinned_cpu_offload``: verl 0.9 shards a forward-only model (the reference policy of
  a KL loss or KL reward) with FSDP2's ``CPUOffloadPolicy(pin_memory=True)``, and pinning
  host memory needs an accelerator. Without CUDA, the policy verl imports pins nothing: on
  a machine with no device, host memory is where the parameters live anyway.
"""

from __future__ import annotations

import functools
import importlib
import types
from typing import Any

import psutil
import torch
import torch.distributed
from transformers import modeling_utils
from transformers.utils import is_flash_attn_2_available

# The accelerators' collective backends, gloo on CPU.
_ACCELERATOR_BACKENDS = ("nccl", "hccl", "rccl")


def cpu_backend(backend: Any) -> Any:
    """``cpu:gloo,cpu:gloo`` -> ``cpu:gloo``; ``nccl`` -> ``gloo``; ``cpu:gloo,cpu:nccl`` ->
    ``cpu:gloo``: one gloo backend per device, as torch on CPU requires."""
    if not isinstance(backend, str):
        return backend
    if "," not in backend and ":" not in backend:
        return "gloo" if backend in _ACCELERATOR_BACKENDS else backend
    seen: dict[str, str] = {}
    for part in backend.split(","):
        device, _, name = part.partition(":")
        name = name.strip()
        seen.setdefault(device.strip(), "gloo" if name in _ACCELERATOR_BACKENDS else name)
    return ",".join(f"{d}:{n}" if n else d for d, n in seen.items())


def wrap_init_process_group() -> None:
    """``torch.distributed.init_process_group`` with its backend made ``cpu_backend``."""
    original = torch.distributed.init_process_group
    if getattr(original, "_argus_cpu", False):
        return

    @functools.wraps(original)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        if "backend" in kwargs:
            kwargs["backend"] = cpu_backend(kwargs["backend"])
        elif args:
            args = (cpu_backend(args[0]), *args[1:])
        return original(*args, **kwargs)

    init_process_group._argus_cpu = True  # type: ignore[attr-defined]
    torch.distributed.init_process_group = init_process_group


def wrap_all_gather() -> None:
    """``torch.distributed.all_gather`` taking, as NCCL does, an input of the outputs' size
    in another shape."""
    original = torch.distributed.all_gather
    if getattr(original, "_argus_cpu", False):
        return

    @functools.wraps(original)
    def all_gather(tensor_list: list[torch.Tensor], tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if tensor_list and tensor.shape != tensor_list[0].shape and tensor.numel() == tensor_list[0].numel():
            tensor = tensor.reshape(tensor_list[0].shape)
        return original(tensor_list, tensor, *args, **kwargs)

    all_gather._argus_cpu = True  # type: ignore[attr-defined]
    torch.distributed.all_gather = all_gather


def fill_device_module(module: types.ModuleType, *, replace: bool) -> types.ModuleType:
    """Give ``module`` (a copy of ``torch.cpu``, or ``torch.cpu`` itself) what verl calls on
    ``torch.cuda``; with ``replace`` False, only what it lacks."""

    def mem_get_info(device: Any = None) -> tuple[int, int]:
        memory = psutil.virtual_memory()
        return memory.available, memory.total

    def nothing(*args: Any, **kwargs: Any) -> None:
        return None

    def zero(*args: Any, **kwargs: Any) -> int:
        return 0

    fills: dict[str, Any] = {
        "mem_get_info": mem_get_info,
        "get_rng_state": lambda device=None: torch.get_rng_state(),
        "set_rng_state": lambda state, device=None: torch.set_rng_state(state),
        "manual_seed": torch.manual_seed,
        "manual_seed_all": torch.manual_seed,
        "get_device_name": lambda device=None: "cpu",
    }
    for name in ("empty_cache", "ipc_collect", "set_per_process_memory_fraction", "reset_peak_memory_stats"):
        fills[name] = nothing
    for name in ("memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved"):
        fills[name] = zero
    for name, value in fills.items():
        if replace or not hasattr(module, name):
            setattr(module, name, value)
    if not hasattr(module, "set_device"):
        module.set_device = nothing  # type: ignore[attr-defined]
    return module


def sdpa_for_flash_attention() -> None:
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


def unpinned_cpu_offload() -> None:
    """FSDP2's ``CPUOffloadPolicy``, where verl imports it from (``torch.distributed.fsdp``,
    or the older ``torch.distributed._composable.fsdp``), made to pin nothing when there is
    no CUDA. A subclass, so FSDP's own ``isinstance`` checks still see a CPU offload policy."""
    if torch.cuda.is_available():
        return
    for name in ("torch.distributed.fsdp", "torch.distributed._composable.fsdp"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        original = getattr(module, "CPUOffloadPolicy", None)
        if original is None or getattr(original, "_argus_cpu", False):
            continue

        class UnpinnedCPUOffloadPolicy(original):  # type: ignore[misc, valid-type]
            _argus_cpu = True

            def __init__(self, pin_memory: bool = False) -> None:
                super().__init__(pin_memory=False)

        module.CPUOffloadPolicy = UnpinnedCPUOffloadPolicy
