"""verl's progress lines -> status.progress (``core.progress``)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from argus.core.progress import ProgressReader
from argus.core.spec import TaskProgress

pytestmark = pytest.mark.unit

T0 = dt.datetime(2026, 12, 3, 8, 0, 0, tzinfo=dt.UTC)


def test_steps_total_and_followed_metrics() -> None:
    r = ProgressReader(followed_metrics=("critic/score/mean",))
    assert r.progress() is None
    r.feed("verl stand-in main_ppo\nTotal training steps: 300\nTraining from scratch\n", T0)
    r.feed("step:36 - critic/score/mean:0.350 - timing_s/step:12.0\nstep:37 - critic/score/mean:0.41", T0)
    r.feed(" - actor/lr:1e-06 - timing_s/step:14.0\n", T0 + dt.timedelta(seconds=13))  # a line split across chunks
    p = r.progress()
    assert p == TaskProgress(step=37, total_steps=300, percent=12.3, summary="37/300", last_step_time="2026-12-03T08:00:13Z",
                             eta="2026-12-03T08:57:12Z", metrics={"critic/score/mean": 0.41})
    # ETA: 263 steps left x 13 s (the median of verl's own step times, 12 s and 14 s) = 3419 s after the last step.
    assert r.changed is False


def test_pace_from_wall_time_when_verl_prints_no_step_timing() -> None:
    r = ProgressReader()
    r.feed("Total training steps: 10\n", T0)
    for i in range(1, 5):
        r.feed(f"step:{i} - loss:0.5\n", T0 + dt.timedelta(seconds=10 * i))
    p = r.progress()
    assert (p.step, p.last_step_time, p.eta) == (4, "2026-12-03T08:00:40Z", "2026-12-03T08:01:40Z")  # 10 s a step, 6 to go


def test_resuming_is_seen() -> None:
    r = ProgressReader()
    r.feed("Load from checkpoint folder: /h/ckpt/global_step_120\nSetting global step to 120\n"
           "Resuming from /h/ckpt/global_step_120\nTotal training steps: 300\nstep:121 - x:1\n", T0)
    p = r.progress()
    assert (p.resumed_from_step, p.step, p.summary) == (120, 121, "121/300")


def test_a_replayed_log_keeps_the_time_of_the_last_step() -> None:
    """After an operator restart the log stream starts again from the beginning: the step is
    the one the status has, and its time stays the recorded one."""
    before = TaskProgress(step=2, total_steps=5, last_step_time="2026-12-03T07:00:00Z")
    r = ProgressReader()
    r.feed("Total training steps: 5\nstep:1 - a:1\nstep:2 - a:1\n", T0)
    assert r.progress(before).last_step_time == "2026-12-03T07:00:00Z"
    r.feed("step:3 - a:1\n", T0)
    assert r.progress(before).last_step_time == "2026-12-03T08:00:00Z"


def test_lines_that_only_look_like_progress_are_ignored() -> None:
    r = ProgressReader(followed_metrics=("a",))
    r.feed("a step:3 in prose\nstep:x - a:1\nstep:4 - a:nan - b:inf\n", T0)
    p = r.progress()
    assert p.step == 4 and p.metrics is None  # NaN and inf are not numbers a status can hold


@given(st.text(max_size=400), st.integers(1, 7))
def test_any_text_in_any_chunks_never_breaks_the_reader(text: str, pieces: int) -> None:
    r = ProgressReader(followed_metrics=("a",))
    size = max(1, len(text) // pieces)
    for i in range(0, len(text), size):
        r.feed(text[i:i + size], T0)
    p = r.progress()
    if p is not None:
        TaskProgress.model_validate(p.model_dump())


# The trackers' "View run" lines as the job's log shows them: printed by verl's TaskRunner (a
# Ray actor: Ray's coloured prefix), in the shapes wandb (0.23: wandb_run.py, errors/term.py)
# and MLflow (3.x: tracking/_tracking_service/client.py, _log_url) print them.
WANDB_START = ("\x1b[36m(TaskRunner pid=16289)\x1b[0m \x1b[34m\x1b[1mwandb\x1b[0m: 🚀 View run at "
               "\x1b[34m\x1b[4mhttps://wandb.ai/alice/gsm8k/runs/3fz9k2qa\x1b[0m\n")
WANDB_FINISH = ("\x1b[36m(TaskRunner pid=16289)\x1b[0m \x1b[34m\x1b[1mwandb\x1b[0m: 🚀 View run \x1b[33mgrpo-1\x1b[0m at: "
                "\x1b[34m\x1b[4mhttps://wandb.ai/alice/gsm8k/runs/3fz9k2qa\x1b[0m\n")
WANDB_PLAIN = "(TaskRunner pid=7, ip=10.0.0.3) wandb:  View run at https://wandb.example.com/a/b/runs/x1\n"  # no emoji
MLFLOW = "(TaskRunnerV1 pid=42) 🏃 View run grpo-1 at: http://mlflow.internal:5000/#/experiments/3/runs/0af1 [repeated 2x across cluster]\n"


@pytest.mark.parametrize(("line", "url"), [
    (WANDB_START, "https://wandb.ai/alice/gsm8k/runs/3fz9k2qa"),
    (WANDB_FINISH, "https://wandb.ai/alice/gsm8k/runs/3fz9k2qa"),
    (WANDB_PLAIN, "https://wandb.example.com/a/b/runs/x1"),
    (MLFLOW, "http://mlflow.internal:5000/#/experiments/3/runs/0af1"),
])
def test_the_runs_link_from_the_trackers_own_lines(line: str, url: str) -> None:
    r = ProgressReader()
    r.feed(line[:20], T0)
    r.feed(line[20:], T0)  # split across chunks
    p = r.progress()
    assert p is not None and p.run_url == url and p.step is None


def test_the_first_link_stays_and_other_lines_are_no_link() -> None:
    r = ProgressReader()
    for line in ("View run at https://evil.example/x\n",         # not wandb's nor MLflow's shape
                 "wandb: 🚀 View run at ftp://x/y\n",            # not http(s)
                 "step:1 - note:View run at https://x\n",
                 "(TaskRunner pid=1) 🧪 View experiment at: http://mlflow:5000/#/experiments/3\n"):
        r.feed(line, T0)
    assert r.run_url is None
    r.feed(WANDB_START + MLFLOW, T0)
    assert r.run_url == "https://wandb.ai/alice/gsm8k/runs/3fz9k2qa"
