"""The progress reader on logs of real verl runs (``core.progress``).

tests/unit/verl_logs/<version>/ holds whole job logs of real verl, recorded on the CPU
testbed (hack/verl-cpu/README.md says how): main_ppo (GRPO; and for 0.9.1 PPO with a critic
and a KL loss) submitted through Ray's Jobs API, its step lines printed by the TaskRunner actor with Ray's coloured prefix; the SFT
trainer under torchrun, its step lines glued after tqdm's bar; 0.9.1's sft_trainer_ray
submitted through the Jobs API, its driver printing the steps after tqdm's bar (whose
carriage returns Ray's log reader turned into newlines); and a second run of each that
resumed from the first one's checkpoint. Each log is fed whole and in small chunks (as a
log stream arrives), and the reader must find what verl said: the total, every step, the
resume point, and the metrics a user follows.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from argus.core.progress import ProgressReader

pytestmark = pytest.mark.unit

LOGS = Path(__file__).parent / "verl_logs"
T0 = dt.datetime(2026, 12, 6, 8, 0, 0, tzinfo=dt.UTC)

# What each recorded run did, read off its log by a person: (total, last step, resumed from,
# a followed metric and its value at the last step).
EXPECTED = {
    "0.6.1/main_ppo-grpo.log": (3, 3, None, ("critic/score/mean", 0.40625)),
    "0.6.1/main_ppo-grpo-resumed.log": (4, 4, 3, ("critic/score/mean", 0.09375)),
    # verl 0.6's SFT trainer is fsdp_sft_trainer (what Argus's template runs before 0.9).
    "0.6.1/fsdp_sft_trainer.log": (4, 4, None, ("train/loss", 5.255542755126953)),
    # Like 0.9.1's, it resumed at step 4 of 8 and ran no step (the restored data loader said
    # the epoch was done).
    "0.6.1/fsdp_sft_trainer-resumed.log": (8, None, 4, ("train/loss", None)),
    # 0.6.1's engine-based sft_trainer (the entry point 0.9 kept), which Argus also accepts
    # on 0.6.1: 0.9.1's format, and the same resume with no step.
    "0.6.1/sft_trainer.log": (4, 4, None, ("train/loss", 5.1875)),
    "0.6.1/sft_trainer-resumed.log": (8, None, 4, ("train/loss", None)),
    "0.9.1/main_ppo-grpo.log": (3, 3, None, ("critic/score/mean", 0.10000000894069672)),
    "0.9.1/main_ppo-grpo-resumed.log": (4, 4, 3, ("critic/score/mean", None)),
    # PPO with a critic (GAE) and a KL loss (examples/real-verl/ppo.yaml's keys): the critic's
    # value loss is on the step lines; the second run resumed from global_step_2, critic and all.
    "0.9.1/main_ppo-ppo-critic-kl.log": (2, 2, None, ("critic/vf_loss", 0.10068189352750778)),
    "0.9.1/main_ppo-ppo-critic-kl-resumed.log": (3, 3, 2, ("critic/vf_loss", 0.021728409454226494)),
    "0.9.1/sft_trainer.log": (4, 4, None, ("train/loss", 5.21875)),
    # verl 0.9.1's SFT trainer resumed at step 4 of 8 and then ran no step (its data loader's
    # state said the epoch was done): the log has the total and the resume point only.
    "0.9.1/sft_trainer-resumed.log": (8, None, 4, ("train/loss", None)),
    # sft_trainer_ray (SFT on several nodes) submitted through Ray's Jobs API: the driver runs
    # the trainer and prints the steps (no actor prefix), its TrainingWorker actors the rest.
    # Stopped at step 2 of trainer.total_training_steps=2, then resumed mid-epoch to step 4.
    "0.9.1/sft_trainer_ray.log": (2, 2, None, ("train/loss", 5.5625)),
    "0.9.1/sft_trainer_ray-resumed.log": (4, 4, 2, ("train/loss", 5.21875)),
    # The same two runs' driver logs as Ray wrote them to its session folder, tqdm's carriage
    # returns kept: the form the operator reads with --progress-source file (the job's
    # output tee'd to the attempt's log).
    "0.9.1/sft_trainer_ray-file.log": (2, 2, None, ("train/loss", 5.5625)),
    "0.9.1/sft_trainer_ray-resumed-file.log": (4, 4, 2, ("train/loss", 5.21875)),
}


def _read(name: str) -> str:
    return (LOGS / name).read_bytes().decode("utf-8", errors="replace")


def _feed(text: str, chunk: int | None, metric: str) -> ProgressReader:
    reader = ProgressReader(followed_metrics=(metric,))
    if chunk is None:
        reader.feed(text, T0)
    else:
        for i in range(0, len(text), chunk):
            reader.feed(text[i:i + chunk], T0 + dt.timedelta(seconds=i // chunk))
    reader.feed("\n", T0)
    return reader


def test_every_recorded_log_is_expected() -> None:
    recorded = sorted(str(p.relative_to(LOGS)) for p in LOGS.rglob("*.log"))
    assert recorded == sorted(EXPECTED)


@pytest.mark.parametrize("chunk", [None, 7, 4096], ids=["whole", "7-byte chunks", "4k chunks"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_reader_finds_what_real_verl_printed(name: str, chunk: int | None) -> None:
    total, last, resumed, (metric, value) = EXPECTED[name]
    text = _read(name)
    reader = _feed(text, chunk, metric)
    assert (reader.total_steps, reader.step, reader.resumed_from) == (total, last, resumed)
    if value is not None:
        assert reader.metrics[metric] == pytest.approx(value)
    progress = reader.progress()
    assert progress is not None and progress.total_steps == total and progress.resumed_from_step == resumed


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_step_line_in_the_log_is_seen(name: str) -> None:
    """Each step verl printed (found here independently: the text after the last ESC-code,
    Ray prefix or tqdm bar before 'step:') moves the reader to that step, in order."""
    text = _read(name)
    printed = [int(m.group(1)) for m in re.finditer(r"(?:^|\]|\) |\x1b\[0m )step:(\d+) - ", text, re.M)]
    seen: list[int] = []
    reader = ProgressReader()
    for line in text.splitlines(keepends=True):
        before = reader.step
        reader.feed(line, T0)
        if reader.step != before:
            seen.append(reader.step)
    assert seen == sorted(set(printed)), (seen, printed)
    if "main_ppo" in name:
        # the recorded form: Ray's coloured actor prefix (TaskRunner in 0.6, TaskRunnerV1 in 0.9)
        assert re.search(r"\x1b\[36m\(TaskRunner(?:V1)? pid=", text)
    elif "sft_trainer_ray" in name and not name.endswith("-file.log"):
        # the recorded form: glued after tqdm's bar, whose carriage returns Ray's log reader
        # (get_job_logs, tail_job_logs: the file opened in text mode) made newlines; the
        # TrainingWorker actors' lines with Ray's coloured prefix
        assert "\r" not in text and re.search(r"\n[^\n]*(?:it/s|s/it)\]step:\d+ - ", text)
        assert re.search(r"\x1b\[36m\(TrainingWorker pid=", text)
    elif printed:  # the SFT trainers under torchrun, and sft_trainer_ray's driver log file
        assert re.search(r"\r[^\n]*(?:it/s|s/it)\]step:\d+ - ", text)  # the recorded form: glued after tqdm's bar


def test_lines_that_only_mention_step_are_not_steps() -> None:
    reader = ProgressReader()
    reader.feed("\x1b[36m(TaskRunnerV1 pid=1)\x1b[0m 'save_freq': 1, 'step:9 - x:1' in a dict\n", T0)
    reader.feed("INFO: resuming data loader at step:5 - of the epoch\n", T0)
    reader.feed("Epoch 1/1:  25%|##  | 1/4 [00:02<00:07]  step:3 - not glued to the bar\n", T0)
    assert reader.step is None
    reader.feed("\x1b[36m(TaskRunnerV1 pid=1, ip=10.0.0.3)\x1b[0m step:2 - a:1 \x1b[32m[repeated 2x across cluster]\x1b[0m\n", T0)
    assert reader.step == 2
