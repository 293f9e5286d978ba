"""verl STAND-IN for ``python3 -m verl.trainer.main_ppo`` (PPO and GRPO).

This is a TEST AND DEMO DOUBLE of the training workload, not of the system under test (the
argus operator): real verl needs GPUs. Hydra's ``@hydra.main`` composes verl's own config
tree (``config/ppo_trainer.yaml`` of the release the testbed copied in) with the command
line; the stand-in then runs verl's start-up checks, loads the custom reward function from
the key the release reads, with verl's messages, reads up to 4 rows of ``data.train_files``,
scores fake responses with the reward function (and, with a knob, holds its GPUs in Ray
placement groups as verl's resource pools do) and prints verl-style progress: ``Total
training steps: N``, ``step:<n> - critic/score/mean:<x> - actor/lr:1e-06 -
timing_s/step:<x>`` and ``Final validation metrics: {...}``. No model, no training, no ray
import unless the placement-group knob asks. See ``verl/trainer/_standin.py`` for the environment knobs.
"""

from __future__ import annotations

import time

import hydra

from verl.trainer import _standin as s

def _task(config: s.Config, knobs: s.Knobs) -> int:
    out = s.voice("main_ppo")
    s.say("verl stand-in main_ppo (TEST AND DEMO DOUBLE of the training workload; no GPU, no training)")
    address = config.get("ray_kwargs.ray_init.address")
    if address is not None:
        s.say(f"ray_init address={address}")
    if knobs.instant:
        out.info("Total training steps: 0")
        code = s.startup_done(knobs)
        return code if code is not None else 0

    s.startup_checks(config, "main_ppo")
    custom = s.get_custom_reward_fn(config)
    if custom is not None:
        reward_fn, reward_name = custom, custom.standin_name  # type: ignore[attr-defined]
    else:
        reward_fn, reward_name = s.default_compute_score, "default_compute_score"

    train_paths = s.as_paths(config.get("data.train_files"))
    if not train_paths:
        raise s.known(ValueError("data.train_files is not set"))
    prompt_key = str(config.get("data.prompt_key") or "prompt")
    train_rows = s.to_rl_rows(s.read_rows(train_paths, "data.train_files"), prompt_key, "data.train_files")
    val_paths = s.check_val_files(config)
    val_rows = (
        s.to_rl_rows(s.read_rows(val_paths, "data.val_files"), prompt_key, "data.val_files")
        if val_paths
        else train_rows
    )

    total = s.total_steps(config, len(train_rows))
    pools = s.hold_gpus(config, knobs)  # noqa: F841 - held for the whole run, as verl's worker groups are
    out.info(f"Total training steps: {total}")
    code = s.startup_done(knobs)
    if code is not None:
        return code

    def val_metrics(correct_fraction: float) -> dict:
        n_correct = round(len(val_rows) * correct_fraction)
        scores = s.score_rows(reward_fn, reward_name, val_rows, n_correct)
        by_source: dict = {}
        for row, score in zip(val_rows, scores):
            by_source.setdefault(str(row.data_source), []).append(score)
        return {f"val-core/{src}/reward/mean@1": sum(v) / len(v) for src, v in by_source.items()}

    start = s.resume_step(config, out)  # verl loads the newest checkpoint before the first validation
    if val_paths:
        out.say(f"Initial validation metrics: {val_metrics(start / total if total else 0.0)}")

    for step in range(start + 1, total + 1):
        t0 = time.monotonic()
        s.timed_sleep(knobs.step_seconds)
        # A fake learning curve: the share of correct fake responses grows with the step.
        n_correct = round(len(train_rows) * step / total)
        scores = s.score_rows(reward_fn, reward_name, train_rows, n_correct)
        metrics = {
            "critic/score/mean": sum(scores) / len(scores),
            "actor/lr": 1e-06,
            "timing_s/step": round(time.monotonic() - t0, 3),
        }
        out.step(step, total, s.step_line(step, metrics))
        s.maybe_checkpoint(config, step, total, metrics)
        code = s.crash_after(knobs, step)
        if code is not None:
            return code

    out.say(f"Final validation metrics: {val_metrics(1.0)}")
    return 0


@hydra.main(config_path="config", config_name="ppo_trainer", version_base=None)
def main(config) -> None:  # type: ignore[no-untyped-def]
    s.run_task(config, _task)


if __name__ == "__main__":
    main()
