"""verl STAND-IN for ``torchrun ... -m verl.trainer.fsdp_sft_trainer`` (supervised fine-tuning).

This is a TEST AND DEMO DOUBLE of the training workload, not of the system under test (the
argus operator): real verl needs GPUs. It parses the same Hydra-style overrides as the real
trainer, requires ``model.partial_pretrain`` (printed, never loaded), reads up to 4 rows of
``data.train_files`` (any keys) and prints verl-style progress: ``Total training steps: N``,
``step:<n> - train/loss:<x> - train/lr:1e-05 - timing_s/step:<x>`` and
``Final validation metrics: {...}``. No model, no torch. In production it is started by
torchrun; here ``hack/verl-standin/bin/torchrun`` stands in for that. See
``verl/trainer/_standin.py`` for the environment knobs.
"""

from __future__ import annotations

import os
import sys
import time

from verl.trainer import _standin as s

DEFAULTS: dict = {
    "data": {"train_files": None, "val_files": None},
    "model": {"partial_pretrain": None},
    "trainer": {
        "total_epochs": 1,
        "total_training_steps": None,
        "save_freq": -1,
        "default_local_dir": None,
    },
}
CLOSED: set[str] = set()


def _loss(step: int, text_len: int) -> float:
    return 2.5 * (0.8**step) + (text_len % 7) / 100.0


def _task(config: s.Config, knobs: s.Knobs) -> int:
    s.say("verl stand-in fsdp_sft_trainer (TEST AND DEMO DOUBLE of the training workload; no GPU, no training)")
    model = config.get("model.partial_pretrain")
    if not model:
        raise s.known(ValueError("model.partial_pretrain is not set"))
    s.say(f"model.partial_pretrain: {model}")
    world = os.environ.get("WORLD_SIZE")
    if world:
        s.say(f"world_size={world} rank={os.environ.get('RANK', '0')}")
    if knobs.instant:
        s.say("Total training steps: 0")
        code = s.startup_done(knobs)
        return code if code is not None else 0

    train_paths = s.as_paths(config.get("data.train_files"))
    if not train_paths:
        raise s.known(ValueError("data.train_files is not set"))
    rows = s.read_rows(train_paths, "data.train_files")
    val_paths = s.check_val_files(config)
    if val_paths:
        s.read_rows(val_paths, "data.val_files")
    text_len = sum(len(str(r)) for r in rows)

    total = s.total_steps(config, len(rows))
    s.say(f"Total training steps: {total}")
    code = s.startup_done(knobs)
    if code is not None:
        return code

    start = s.resume_step(config)
    for step in range(start + 1, total + 1):
        t0 = time.monotonic()
        s.timed_sleep(knobs.step_seconds)
        metrics = {
            "train/loss": _loss(step, text_len),
            "train/lr": 1e-05,
            "timing_s/step": round(time.monotonic() - t0, 3),
        }
        s.say(s.step_line(step, metrics))
        s.maybe_checkpoint(config, step, total, metrics)
        code = s.crash_after(knobs, step)
        if code is not None:
            return code

    s.say(f"Final validation metrics: {{'val/loss': {_loss(total + 1, text_len):.4f}}}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return s.run_entry(sys.argv[1:] if argv is None else argv, DEFAULTS, CLOSED, _task)


if __name__ == "__main__":
    sys.exit(main())
