"""verl STAND-IN for ``torchrun ... -m verl.trainer.fsdp_sft_trainer`` (supervised
fine-tuning, verl up to 0.7; config ``sft_trainer``, model in ``model.partial_pretrain``).

This is a TEST AND DEMO DOUBLE of the training workload, not of the system under test (the
argus operator): real verl needs GPUs. Hydra's ``@hydra.main`` composes the release's own
config tree with the command line; the stand-in runs verl's start-up checks, prints the model
(never loaded), reads up to 4 rows of ``data.train_files`` (any keys) and prints verl-style
progress: ``Total training steps: N``, ``step:<n> - train/loss:<x> - train/lr:1e-05 -
timing_s/step:<x>`` and ``Final validation metrics: {...}``. No model, no torch. In
production it is started by torchrun; here ``bin/torchrun`` stands in for that. The testbed
leaves this module out of a verl 0.9 snapshot, as verl 0.9 has no such module. See
``verl/trainer/_standin.py`` for the environment knobs.
"""

from __future__ import annotations

import hydra

from verl.trainer import _standin as s
from verl.trainer._standin_sft import run

ENTRY = "fsdp_sft_trainer"
MODEL_KEY = "model.partial_pretrain"


def _task(config: s.Config, knobs: s.Knobs) -> int:
    return run(config, knobs, ENTRY, MODEL_KEY)


@hydra.main(config_path="config", config_name="sft_trainer", version_base=None)
def main(config) -> None:  # type: ignore[no-untyped-def]
    s.run_task(config, _task)


if __name__ == "__main__":
    main()
