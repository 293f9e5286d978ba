"""verl 0.6's FSDP training engines, registered for the ``cpu`` device too.

Stands in for: the GPU device verl 0.6.1's engine registry assumes. The engine-based SFT
trainer 0.6.1 ships beside ``fsdp_sft_trainer`` (``verl/trainer/sft_trainer.py``) builds its
engine with ``EngineRegistry.new(model_type="language_model", backend=...)``, which looks the
class up under the device ``verl/utils/device.py`` names: ``cpu`` on a machine without
accelerators. ``verl/workers/engine/fsdp/transformer_impl.py`` registers its engines for
``cuda`` and ``npu`` only, so the run stops before training with ``AssertionError: Unknown
device: cpu for model_type: language_model and backend: fsdp2``. verl 0.9 has a switch for
this (``VERL_ENGINE_DEVICE``, set in ``__init__.py``); 0.6.1 has none.

Answered the way verl's registry expects a device to be added: the same classes, passed to
``EngineRegistry.register(..., device="cpu")`` for the model types and backends verl gives
them. The engines themselves place tensors on verl's device (``cpu`` here). The registering
runs right after verl imports the module (an import hook), so a process that never builds an
engine (main_ppo's, fsdp_sft_trainer's) does not pay for importing it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any

_MODULE = "verl.workers.engine.fsdp.transformer_impl"
# (class, model type) as verl registers them; backends and devices as verl gives them.
_ENGINES = (("FSDPEngineWithLMHead", "language_model"), ("FSDPEngineWithValueHead", "value_model"))
_BACKENDS = ["fsdp", "fsdp2"]


def register_cpu(module: ModuleType) -> None:
    """Add the ``cpu`` device to the FSDP engines of the imported ``module``."""
    from verl.workers.engine.base import EngineRegistry

    for class_name, model_type in _ENGINES:
        engine = getattr(module, class_name, None)
        if engine is not None:
            EngineRegistry.register(model_type=model_type, backend=_BACKENDS, device="cpu")(engine)


class _Loader(importlib.abc.Loader):
    """The module's own loader, then the registration."""

    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        register_cpu(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds only verl's FSDP engine module, through the other finders, and wraps its loader."""

    def find_spec(self, fullname: str, path: Any, target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != _MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader)
                return spec
        return None


def install() -> None:
    if _MODULE in sys.modules:
        register_cpu(sys.modules[_MODULE])
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
