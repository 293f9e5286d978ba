"""The idle tasks (``IdleTasks``), the ones a tick may pass by (``loop.ControlLoop.tick``):
a task that has ended and needs nothing from Ray (``core.lifecycle.settled``) can only need
the operator again when it changes (a new view from the watch, or this process's own write
in the overlay) or when its timer (time to live, Ray history retention: ``core.lifecycle.timer_due``) runs out. Each such
task is looked at once per change, and the tick's work follows the tasks that live rather
than every object in the cache: a cluster with 10,000 ended tasks ticks as one with none
(bench/scale.py measures it).

A view is the cache's immutable object for one resourceVersion (``adapters.taskcache``), so
"unchanged" is object identity: no field is compared.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from ..core import lifecycle
from ..core.lifecycle import LifecycleSettings
from ..core.vocabulary import Key
from .view import TaskView


@dataclass(frozen=True)
class _Entry:
    view: TaskView
    timer: dt.datetime | None  # when its time to live or retention runs out (None: never)


class IdleTasks:
    def __init__(self, settings: LifecycleSettings):
        self.settings = settings
        self._entries: dict[Key, _Entry] = {}
        self._next: dt.datetime | None = None  # the earliest timer, kept while nothing changes
        self._next_stale = False

    def passed_by(self, view: TaskView, now: dt.datetime) -> bool:
        """Whether the tick may pass the task by: settled when last seen, unchanged since,
        and its timer not due."""
        entry = self._entries.get(view.key)
        if entry is None or entry.view is not view:
            return False
        return entry.timer is None or entry.timer > now

    def note(self, view: TaskView, now: dt.datetime) -> None:
        """Remember the task if it is settled now (after the tick has done what it needed)."""
        state = view.state
        settled = lifecycle.settled(state)
        timer = lifecycle.timer_due(state, self.settings) if settled else None
        if not settled or (timer is not None and timer[0] <= now):  # due: the tick looks at it
            if self._entries.pop(view.key, None) is not None:
                self._next_stale = True
            return
        self._entries[view.key] = _Entry(view, timer[0] if timer else None)
        if timer is not None:
            self._next_stale = True

    def next_timer(self, now: dt.datetime) -> dt.datetime | None:
        """The earliest timer still to run out among the settled tasks."""
        if self._next_stale or (self._next is not None and self._next <= now):
            self._next = min((e.timer for e in self._entries.values() if e.timer is not None and e.timer > now), default=None)
            self._next_stale = False
        return self._next

    def forget(self, present: set[Key]) -> None:
        for key in self._entries.keys() - present:
            del self._entries[key]
            self._next_stale = True

    def __len__(self) -> int:
        return len(self._entries)
