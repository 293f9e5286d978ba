"""verl on CPU, through verl's own plugin hook (test infrastructure, never shipped).

``VERL_USE_EXTERNAL_MODULES=argus_verl_cpu`` makes ``verl/__init__.py`` import this package
in every verl process. For verl 0.9 (a platform registry, ``verl.plugin``):
``VERL_PLATFORM=cpu`` selects the platform registered here, and the ``hf`` rollout is
registered lazily (verl imports the replica class only when a PPO/GRPO run asks for rollout
``hf``), so an SFT process pays nothing for it. For verl 0.6 (no registry, its own ``hf``
rollout): the torch shims of ``legacy.py`` only.
"""

from __future__ import annotations

import importlib
import importlib.util
import os

if importlib.util.find_spec("verl.plugin") is not None:
    # verl 0.9: registers the "cpu" platform and the "hf" rollout.
    importlib.import_module(f"{__name__}.platform")
    importlib.import_module(f"{__name__}.rollout")
else:
    # verl 0.6: no platform registry; torch's backend and device module made CPU's.
    importlib.import_module(f"{__name__}.legacy")

# verl registers its FSDP engines for the devices "cuda" and "npu" only, and looks them up by
# the platform's device name ("cpu" here): without this, `No engine registered for
# device='cpu'`. The engines themselves place tensors on trainer.device (cpu).
os.environ.setdefault("VERL_ENGINE_DEVICE", "cuda")
