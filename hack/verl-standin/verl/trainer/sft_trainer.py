"""verl STAND-IN for ``torchrun ... -m verl.trainer.sft_trainer`` (supervised fine-tuning,
verl 0.9 and later: config ``sft_trainer_engine``, model in ``model.path``).

A TEST AND DEMO DOUBLE of the training workload, not of the system under test: the same job as
the stand-in ``fsdp_sft_trainer`` (``_standin_sft.run``), composed by Hydra's ``@hydra.main`` from the
release's ``sft_trainer_engine`` config.
"""

from __future__ import annotations

import hydra

from verl.trainer import _standin as s
from verl.trainer._standin_sft import run

ENTRY = "sft_trainer"
MODEL_KEY = "model.path"


def _task(config: s.Config, knobs: s.Knobs) -> int:
    return run(config, knobs, ENTRY, MODEL_KEY)


@hydra.main(config_path="config", config_name="sft_trainer_engine", version_base=None)
def main(config) -> None:  # type: ignore[no-untyped-def]
    s.run_task(config, _task)


if __name__ == "__main__":
    main()
