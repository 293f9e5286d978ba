"""The job of the verl STAND-IN SFT trainers (``fsdp_sft_trainer`` up to verl 0.7,
``sft_trainer`` from 0.9): a TEST AND DEMO DOUBLE of the training workload, not of the system
under test. See ``fsdp_sft_trainer.py``."""

from __future__ import annotations

import os
import time

from verl.trainer import _standin as s


def _loss(step: int, text_len: int) -> float:
    return 2.5 * (0.8**step) + (text_len % 7) / 100.0


def run(config: s.Config, knobs: s.Knobs, entry: str, model_key: str) -> int:
    """The SFT stand-in's job, for either SFT entry point (``entry``, whose model key is
    ``model_key``)."""
    out = s.voice(entry)
    s.say(f"verl stand-in {entry} (TEST AND DEMO DOUBLE of the training workload; no GPU, no training)")
    model = config.get(model_key)
    if not model or model == s.MISSING:
        raise s.known(ValueError(f"{model_key} is not set"))
    s.say(f"{model_key}: {model}")
    world = os.environ.get("WORLD_SIZE")
    if world:
        s.say(f"world_size={world} rank={os.environ.get('RANK', '0')}")
    if knobs.instant:
        out.info(s.sft_total_line(out, 0))
        code = s.startup_done(knobs)
        return code if code is not None else 0

    s.startup_checks(config, entry)
    train_paths = s.as_paths(config.get("data.train_files"))
    if not train_paths:
        raise s.known(ValueError("data.train_files is not set"))
    rows = s.read_rows(train_paths, "data.train_files")
    val_paths = s.check_val_files(config)
    if val_paths:
        s.read_rows(val_paths, "data.val_files")
    text_len = sum(len(str(r)) for r in rows)

    total = s.total_steps(config, len(rows))
    if not isinstance(out, s.SFTVoice) or os.environ.get("VERL_SFT_LOGGING_LEVEL", "WARN").upper() in ("INFO", "DEBUG"):
        # verl 0.9's SFT trainer logs its total at INFO level, and its logger's level is
        # VERL_SFT_LOGGING_LEVEL (default WARN): Argus sets INFO for its jobs.
        out.info(s.sft_total_line(out, total))
    code = s.startup_done(knobs)
    if code is not None:
        return code

    start = s.resume_step(config, out)
    for step in range(start + 1, total + 1):
        t0 = time.monotonic()
        s.timed_sleep(knobs.step_seconds)
        metrics = {
            "train/loss": _loss(step, text_len),
            "train/lr": 1e-05,
            "timing_s/step": round(time.monotonic() - t0, 3),
        }
        if s.RECORDED_FORM:
            del metrics["timing_s/step"]  # verl 0.9's SFT trainer prints no step timing
        out.step(step, total, s.step_line(step, metrics))
        s.maybe_checkpoint(config, step, total, metrics)
        code = s.crash_after(knobs, step)
        if code is not None:
            return code

    s.say(f"Final validation metrics: {{'val/loss': {_loss(total + 1, text_len):.4f}}}")
    return 0
