"""Training progress from verl's own log lines, for ``status.progress``.

verl's console logger prints, on the driver:

    Total training steps: 300                       (when training starts)
    Training from scratch                           (no checkpoint to resume from), or
    Resuming from <default_local_dir>/global_step_120
    step:37 - critic/score/mean:0.41 - timing_s/step:12.9 - ...   (after each step)

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
_STEP = re.compile(r"^step:(\d+)(?:\s+-\s+(.*))?$")
_RESUMED = re.compile(r"Resuming from \S*?global_step_(\d+)")
_STEP_SECONDS_KEY = "timing_s/step"
# A line longer than this is not one of verl's progress lines: kept out of memory.
_MAX_LINE = 64 * 1024
_RECENT_STEPS = 10


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
            self._line(line.rstrip("\r"), now)

    def _line(self, line: str, now: dt.datetime) -> None:
        if len(line) > _MAX_LINE:
            return
        if line.startswith("step:"):
            m = _STEP.match(line)
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

    def _step(self, step: int, rest: str, now: dt.datetime) -> None:
        values: dict[str, float] = {}
        for part in rest.split(" - "):
            key, sep, value = part.strip().rpartition(":")
            number = _number(value) if sep else None
            if key and number is not None:
                values[key] = number
        self.step, self.last_step_time, self.changed = step, now, True
        self._recent.append((step, now, values.get(_STEP_SECONDS_KEY)))
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
        if self.step is None and self.total_steps is None and self.resumed_from is None:
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
                            last_step_time=last_text, eta=eta, resumed_from_step=self.resumed_from,
                            metrics=dict(self.metrics) or None)
