"""verl STAND-IN trainers: TEST AND DEMO DOUBLES of the training workload (real verl needs GPUs).

Not part of the system under test. Entry points: ``python3 -m verl.trainer.main_ppo``,
``torchrun ... -m verl.trainer.sft_trainer`` (verl 0.9) and ``torchrun ... -m
verl.trainer.fsdp_sft_trainer`` (verl up to 0.7). The release's config tree
(``verl/trainer/config``) is copied in by the testbed (argus_testbed.verl.standin_snapshot).
"""

from verl.trainer import _one_compose  # noqa: F401 - Hydra composes once a run (its docstring says why)
