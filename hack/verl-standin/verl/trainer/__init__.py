"""verl STAND-IN trainers: TEST AND DEMO DOUBLES of the training workload (real verl needs GPUs).

Not part of the system under test. Entry points: ``python3 -m verl.trainer.main_ppo`` and
``torchrun ... -m verl.trainer.fsdp_sft_trainer``.
"""
