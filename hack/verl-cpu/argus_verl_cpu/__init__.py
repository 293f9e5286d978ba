"""verl on CPU, through verl's own plugin hook (test infrastructure, never shipped).

``VERL_USE_EXTERNAL_MODULES=argus_verl_cpu`` makes ``verl/__init__.py`` import this package
in every verl process; ``VERL_PLATFORM=cpu`` selects the platform registered here. The
rollout is registered lazily (verl imports the replica class only when a PPO/GRPO run asks
for rollout ``hf``), so an SFT process pays nothing for it.
"""

from __future__ import annotations

import os

from . import (
    platform,  # noqa: F401  (registers the "cpu" platform)
    rollout,  # noqa: F401  (registers the "hf" rollout)
)

# verl registers its FSDP engines for the devices "cuda" and "npu" only, and looks them up by
# the platform's device name ("cpu" here): without this, `No engine registered for
# device='cpu'`. The engines themselves place tensors on trainer.device (cpu).
os.environ.setdefault("VERL_ENGINE_DEVICE", "cuda")
