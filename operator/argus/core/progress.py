"""Training progress from verl's own log lines, for ``status.progress``.

verl prints, as the job's log shows it (measured on real verl 0.9.1 runs, recorded in
tests/unit/verl_logs/):

    Total training steps: 300                       (when training starts)
    Training from scratch                           (no checkpoint to resume from), or
    Resuming from <default_local_dir>/global_step_120  (main_ppo; the SFT trainer says
                                                    Found latest checkpoint: <dir>/global_step_120 (step 120))
    step:37 - critic/score/mean:0.41 - timing_s/step:12.9 - ...   (after each step)

but seldom as clean lines:
- main_ppo prints them from its TaskRunner, a Ray actor, so each line in the job's log
  starts with Ray's actor prefix in colour: ``\x1b[36m(TaskRunnerV1 pid=16289)\x1b[0m step:3 - ...``
  (and Ray may append `` [repeated 3x across cluster]`` to lines it folded);
- verl's loggers put their own prefix before the totals and the resume line
  (``INFO:2026-12-06 04:35:15,221:Total training steps: 3``);
- the SFT trainer under torchrun writes tqdm's bar with carriage returns and prints each step
  line right after the bar, on the same line: ``\rEpoch 1/4:  12%|█▎ | 1/8 [00:00<00:02,
  3.45it/s]step:2 - train/loss:...``; it prints its total (``[Rank 0] Total training steps:
  3,``) only at INFO level (VERL_SFT_LOGGING_LEVEL, which Argus sets for the job), and a
  second ``step:N - val/loss:...`` line for a step it validated;
- sft_trainer_ray (SFT on several nodes, a Ray job) prints the same lines from the job's
  driver, with no actor prefix; Ray's log reader has turned tqdm's carriage returns into
  newlines, so the bar ends the line before and a step line may still be glued after it.

So a line is cut at carriage returns too, colour codes are dropped, and a step line is
recognised after Ray's actor prefix or tqdm's bar, and nowhere else.

The operator follows each running job's log (``ProgressSource``: Ray's log stream, or the
attempt's log file in the job folder) and feeds it here, chunk by chunk (lines may be split
across chunks). Pure: time comes in as an argument.
"""

from __future__ import annotations

import datetime as dt
import re
import statistics
from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum

from .spec import TaskProgress
from .times import format_time


class ProgressSource(StrEnum):
    """Where the operator reads a running job's log for its progress (--progress-source)."""

    stream = "stream"  # Ray's log stream, one per running job, served by the Ray head's dashboard
    file = "file"      # the attempt's log file in the job folder (the shared tree mounted in the operator)
    off = "off"        # not read: status.progress stays empty


_TOTAL = re.compile(r"Total training steps:\s*(\d+)")
# ANSI SGR codes (Ray colours its actor prefix and its "[repeated Nx]" notes).
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Ray's prefix on a line an actor or task printed: "(TaskRunnerV1 pid=16289) " or, from
# another node, "(WorkerDict pid=42, ip=10.0.0.3) ".
_RAY_PREFIX = re.compile(r"^\([A-Za-z_][\w.:-]* pid=\d+(?:, ip=[^)]*)?\)\s?")
# tqdm's bar ("Epoch 1/4:  12%|█▎  | 1/8 [00:00<00:02,  3.45it/s]") that a step line follows.
_TQDM_BAR = re.compile(r"^[^|]*\|[^|]*\|\s*\d+/\d+\s*\[[^\]]*\]")
_STEP = re.compile(r"^step:(\d+)(?:\s+-\s+(.*?))?(?:\s+\[repeated \d+x across cluster\])?$")
# main_ppo: "Resuming from <dir>/global_step_2, setting global step to 2"; the SFT trainer:
# "Found latest checkpoint: <dir>/global_step_4 (step 4)".
_RESUMED = re.compile(r"(?:Resuming from|Found latest checkpoint:) \S*?global_step_(\d+)")
# The run's link, as the trackers print it (their own source: wandb 0.23's wandb_run.py and
# errors/term.py, mlflow 3.x's tracking/_tracking_service/client.py _log_url):
#   wandb at start:   "wandb: 🚀 View run at https://wandb.ai/<entity>/<project>/runs/<id>"
#   wandb at finish (and at start before 0.16): "wandb: 🚀 View run <name> at: <url>"
#   (with colour: "wandb" blue and bold, the URL blue and underlined; no emoji where stdout
#   is not Unicode-safe), and MLflow, for a tracking server (http), at the run's start and end:
#   "🏃 View run <name> at: <url>"
_WANDB_RUN = re.compile(r"^wandb:\s+(?:\S+\s+)?View run (?:.+? at:|at) (https?://\S{1,2048})$")
_MLFLOW_RUN = re.compile(r"^\U0001F3C3 View run .+? at: (https?://\S{1,2048})$")
_REPEATED = re.compile(r"\s+\[repeated \d+x across cluster\]$")
_STEP_SECONDS_KEY = "timing_s/step"
# A line longer than this is not one of verl's progress lines: kept out of memory.
_MAX_LINE = 64 * 1024
_RECENT_STEPS = 10


def verl_line(line: str) -> str:
    """One line of a job's log (no newline, no carriage return) as verl printed it: without
    colour codes, Ray's actor prefix, or the tqdm bar a step line was glued to."""
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    if line.startswith("("):
        line = _RAY_PREFIX.sub("", line, count=1)
    if not line.startswith("step:") and "step:" in line:
        bar = _TQDM_BAR.match(line)
        if bar:
            line = line[bar.end():]
    return line


def verl_lines(text: str) -> list[str]:
    """A log's lines as verl printed them (``verl_line``), tqdm's redraws each a line."""
    return [verl_line(part) for line in text.split("\n") for part in line.split("\r") if part]


def run_link(line: str) -> str | None:
    """The run's link in a tracker's "View run" line (as ``verl_line`` gives it), or None."""
    line = _REPEATED.sub("", line.rstrip())
    m = _WANDB_RUN.match(line) or _MLFLOW_RUN.match(line)
    return m.group(1) if m else None


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None  # NaN, inf: not JSON numbers


@dataclass
class ProgressReader:
    """Reads a job's log as it streams; ``progress()`` says where training stands."""

    followed_metrics: tuple[str, ...] = ()
    total_steps: int | None = None
    step: int | None = None
    resumed_from: int | None = None
    last_step_time: dt.datetime | None = None
    run_url: str | None = None  # the tracker's link to the run (the first one printed)
    metrics: dict[str, float] = field(default_factory=dict)
    _partial: str = ""
    _recent: deque[tuple[int, dt.datetime, float | None]] = field(default_factory=lambda: deque(maxlen=_RECENT_STEPS))
    changed: bool = False  # something new since the last progress() was taken

    def feed(self, chunk: str, now: dt.datetime) -> None:
        text = self._partial + chunk
        lines = text.split("\n")
        self._partial = lines.pop()
        if len(self._partial) > _MAX_LINE:
            self._partial = ""
        for line in lines:
            # tqdm redraws its bar after a carriage return: each redraw is a line of its own.
            for part in line.split("\r"):
                if part:
                    self._line(part, now)

    def _line(self, line: str, now: dt.datetime) -> None:
        if len(line) > _MAX_LINE:
            return
        line = verl_line(line)
        if line.startswith("step:"):
            m = _STEP.match(line.rstrip())
            if m:
                self._step(int(m.group(1)), m.group(2) or "", now)
            return
        m = _TOTAL.search(line)
        if m:
            self.total_steps, self.changed = int(m.group(1)), True
            return
        m = _RESUMED.search(line)
        if m:
            self.resumed_from, self.changed = int(m.group(1)), True
            return
        if self.run_url is None and "View run " in line:
            self.run_url = run_link(line)
            self.changed = self.changed or self.run_url is not None

    def _step(self, step: int, rest: str, now: dt.datetime) -> None:
        values: dict[str, float] = {}
        for part in rest.split(" - "):
            key, sep, value = part.strip().rpartition(":")
            number = _number(value) if sep else None
            if key and number is not None:
                values[key] = number
        if step != self.step:
            # A second line for the same step (the SFT trainer's "step:N - val/loss:...")
            # adds metrics, not a step.
            self.step, self.last_step_time = step, now
            self._recent.append((step, now, values.get(_STEP_SECONDS_KEY)))
        self.changed = True
        for key in self.followed_metrics:
            if key in values:
                self.metrics[key] = values[key]

    def _seconds_per_step(self) -> float | None:
        """verl's own step timings when it prints them; else the recent steps' pace."""
        timed = [s for _, _, s in self._recent if s is not None and s > 0]
        if timed:
            return statistics.median(timed)
        if len(self._recent) >= 2:
            (s0, t0, _), (s1, t1, _) = self._recent[0], self._recent[-1]
            if s1 > s0 and t1 > t0:
                return (t1 - t0).total_seconds() / (s1 - s0)
        return None

    def progress(self, previous: TaskProgress | None = None) -> TaskProgress | None:
        """The progress to show, or None before verl said anything. ``previous`` (what the
        status says) keeps the time of the last step when a replayed log (after an operator
        restart) reports the same step again."""
        self.changed = False
        if self.step is None and self.total_steps is None and self.resumed_from is None and self.run_url is None:
            return None
        last = self.last_step_time
        last_text: str | None
        if previous is not None and previous.step == self.step and previous.last_step_time:
            last_text = previous.last_step_time
        else:
            last_text = format_time(last) if last else None
        percent = summary = eta = None
        if self.total_steps:
            done = self.step or 0
            percent = round(min(100.0, 100.0 * done / self.total_steps), 1)
            summary = f"{done}/{self.total_steps}"
            pace = self._seconds_per_step()
            if pace is not None and last is not None and done < self.total_steps:
                eta = format_time(last + dt.timedelta(seconds=pace * (self.total_steps - done)))
        elif self.step is not None:
            summary = str(self.step)
        return TaskProgress(step=self.step, total_steps=self.total_steps, percent=percent, summary=summary,
                            last_step_time=last_text, eta=eta, resumed_from_step=self.resumed_from, run_url=self.run_url,
                            metrics=dict(self.metrics) or None)
