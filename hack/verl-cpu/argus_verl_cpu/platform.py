"""The ``cpu`` platform for verl 0.9.1 (registered with verl's ``PlatformRegistry``).

Stands in for: verl's CUDA platform (``verl/plugin/platform/platform_cuda.py``). verl 0.9.1
ships platforms for NVIDIA, Huawei and AMD only; on a machine without accelerators it falls
back to ``nvidia`` and torchrun's process group then fails with ``nccl2 requires at least one
CUDA device``. This platform says: device ``cpu``, collective backend ``gloo``, and Ray
resource ``GPU`` (the test Ray cluster advertises logical GPUs, so verl's resource pools and
Argus's GPU accounting work as on a GPU cluster; torch never touches a GPU).

More that verl does and CPU torch refuses, each answered here without editing verl:
- verl builds the process-group backend as ``f"cpu:gloo,{device}:{backend}"``
  (verl/utils/distributed.py), which on CPU reads ``cpu:gloo,cpu:gloo``; torch refuses the
  repeated device. ``torch.distributed.init_process_group`` is wrapped to drop the repeat.
- verl moves tensors to ``get_device_id()``, the platform's current device; an int there
  means a CUDA device to torch, so the current device is ``torch.device("cpu")``.
- verl calls ``get_torch_device().<fn>`` for what ``torch.cuda`` offers (``empty_cache``,
  ``mem_get_info``, ``get_rng_state``, ...); ``torch.cpu`` lacks some. ``device_module`` is
  ``torch.cpu`` with those filled in as the no-ops or host equivalents they are on CPU.
- PPO's critic and the reference policy of a KL loss or reward (GRPO without KL builds
  neither): verl hard-codes FlashAttention 2 for the critic's model, and shards the
  reference with FSDP2's ``CPUOffloadPolicy(pin_memory=True)``, whose pinning needs an
  accelerator (``cputorch.sdpa_for_flash_attention``, ``cputorch.unpinned_cpu_offload``).
"""

from __future__ import annotations

import types
from contextlib import contextmanager
from typing import Any

import torch
from verl.plugin.platform import PlatformBase, PlatformRegistry

from .cputorch import fill_device_module, sdpa_for_flash_attention, unpinned_cpu_offload, wrap_init_process_group


def _device_module() -> types.ModuleType:
    """``torch.cpu`` with what verl calls on ``torch.cuda`` and ``torch.cpu`` lacks."""
    module = types.ModuleType("argus_verl_cpu.device")
    for name in dir(torch.cpu):
        if not name.startswith("__"):
            setattr(module, name, getattr(torch.cpu, name))
    return fill_device_module(module, replace=True)


_DEVICE_MODULE = _device_module()
wrap_init_process_group()
# PPO's critic (GAE) and the reference policy of a KL loss or reward: verl hard-codes
# FlashAttention 2 for the critic's model and pins the reference's offloaded memory.
sdpa_for_flash_attention()
unpinned_cpu_offload()


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """verl's platform interface answered for host CPUs."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.ModuleType:
        return _DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def current_device(self) -> Any:
        # verl uses the "device id" as a place for tensors (``model.to(device=get_device_id())``,
        # ``batch.to(get_device_id())``); an int there means a CUDA device to torch.
        return torch.device("cpu")

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        # Ray sets it for the logical GPUs it hands out; torch on CPU ignores it.
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str):  # type: ignore[no-untyped-def]
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None

